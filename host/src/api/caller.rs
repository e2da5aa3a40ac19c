//! Who is at the other end of a framed connection: whether a peer's hello
//! is believed (with TLS: only over the peer protocol, from a certificate
//! naming the node it claims), a client's principal (its token, else its
//! certificate, else a member node's), and whether that principal may make
//! a request (refusals logged with the principal and its roles).

use lockd_net::tls::Alpn;
use lockd_proto::ClientRequest;

use super::services::{Refusal, Services};
use crate::auth::{action, Access, Denied, Principal};
use crate::transport::listener::Caller;

/// Why a peer's hello is not believed over this connection, if it is not.
pub(crate) fn peer_refusal(node: &Services, caller: &Caller, from: u64) -> Option<String> {
    if !node.tls_required() {
        return None;
    }
    let tls = caller.tls.as_ref()?;
    if tls.alpn != Some(Alpn::Peer) {
        return Some("a peer hello must come over the peer protocol (ALPN lockd-peer/1)".into());
    }
    match &tls.identity {
        None => Some(format!(
            "the caller claims to be node {from} but presented no certificate"
        )),
        Some(id) if !id.is_node(from) => Some(format!(
            "the caller claims to be node {from} but its certificate names {}",
            id.principal().unwrap_or_else(|| "no node".into())
        )),
        Some(_) => None,
    }
}

/// Who a client is, from its hello and its certificate.
pub(crate) fn client_principal(
    node: &Services,
    caller: &Caller,
    token: Option<&str>,
) -> Result<Principal, Denied> {
    let identity = caller.identity();
    node.authenticate(token, identity, node.member_of(identity), None)
}

/// A native client's principal, settled at the hello and again after
/// every reload of the rules; and its certificate, checked again once a
/// second at most.
pub struct Settled {
    caller: Caller,
    token: Option<String>,
    generation: u64,
    who: std::sync::Arc<Result<Principal, Denied>>,
    checked: std::time::Instant,
}

/// How often a connection's certificate is verified again.
const RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

impl Settled {
    pub fn new(node: &Services, caller: Caller, token: Option<String>) -> Settled {
        let generation = node.rules_generation();
        let who = client_principal(node, &caller, token.as_deref());
        Settled {
            caller,
            token,
            generation,
            who: std::sync::Arc::new(who),
            checked: std::time::Instant::now(),
        }
    }

    /// Whether the caller presented a valid credential (or none is
    /// needed): what decides its connection budget.
    pub(crate) fn is_authenticated(&self, node: &Services) -> bool {
        node.is_authenticated(&self.who)
    }

    /// Who the caller is now; `None` once its certificate has expired
    /// (the connection is to be closed).
    pub fn now(&mut self, node: &Services) -> Option<std::sync::Arc<Result<Principal, Denied>>> {
        if let Some(id) = self.caller.identity() {
            if self.checked.elapsed() >= RECHECK {
                if !id.valid_now() {
                    return None;
                }
                self.checked = std::time::Instant::now();
            }
        }
        let generation = node.rules_generation();
        if generation != self.generation {
            self.generation = generation;
            self.who =
                std::sync::Arc::new(client_principal(node, &self.caller, self.token.as_deref()));
        }
        Some(self.who.clone())
    }
}

impl Settled {
    /// The check a stream of `req` (a watch) runs while it lasts: the
    /// caller authenticated and authorised again by the rules in force,
    /// its certificate valid now (`api::reauth`).
    pub(crate) fn reauth(
        &self,
        node: &std::sync::Arc<Services>,
        req: &ClientRequest,
    ) -> super::reauth::Reauth {
        let (node, caller, token) = (node.clone(), self.caller.clone(), self.token.clone());
        let action = action::of_native(req);
        super::reauth::Reauth(std::sync::Arc::new(move || {
            if caller.identity().is_some_and(|i| !i.valid_now()) {
                return Err("the client certificate has expired".into());
            }
            if !node.auth_is_on() {
                return Ok(());
            }
            let who = client_principal(&node, &caller, token.as_deref());
            node.authorize(&who, &action)
                .map(|_| ())
                .map_err(|r| r.denied.to_string())
        }))
    }
}

/// Whether `who` may make `req`; refusals are logged with the principal
/// and its roles.
pub(crate) fn authorize(
    node: &Services,
    who: &Result<Principal, Denied>,
    req: &ClientRequest,
    peer: &str,
) -> Result<Access, Denied> {
    // Off: nothing to decide, and no key copied per request to decide it.
    if !node.auth_is_on() {
        return Ok(Access::open());
    }
    let action = action::of_native(req);
    node.authorize(who, &action).map_err(|r| {
        let Refusal {
            denied: why,
            principal,
            roles,
        } = r;
        tracing::warn!(id = node.id(), %peer, %principal, %roles, action = %action.describe(), %why, "refused a request");
        why
    })
}
