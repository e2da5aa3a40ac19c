//! Who a caller is and what it may do, by this node's rules
//! ([`crate::auth`]), the same for framed and HTTP callers; and the admin
//! audit trail of what this node served.

use lockd_proto::AdminAction;

use super::Services;
use crate::auth::{Access, Action, Denied, Principal};
use crate::raft::NodeId;
use crate::transport::tls::Identity;

/// A request the rules refuse, with who asked, for the log line that
/// names the principal and its roles.
#[derive(Debug)]
pub struct Refusal {
    pub denied: Denied,
    /// `""` when the caller is not known.
    pub principal: String,
    pub roles: String,
}

impl Services {
    /// Whether authentication is on (there is an auth file).
    pub(crate) fn auth_is_on(&self) -> bool {
        self.parts.auth.is_on()
    }

    /// Changes with every reload of the rules: a connection that settled
    /// its caller settles it again when this moves.
    pub(crate) fn rules_generation(&self) -> u64 {
        self.parts.auth.generation()
    }

    /// Who is calling: by its bearer `token`, else its certificate, else
    /// as the `member` node its certificate names (see
    /// [`Services::member_of`]), acting for `forwarded` when it forwards.
    pub(crate) fn authenticate(
        &self,
        token: Option<&str>,
        identity: Option<&Identity>,
        member: Option<NodeId>,
        forwarded: Option<&str>,
    ) -> Result<Principal, Denied> {
        self.parts.auth.authenticate(
            token,
            identity.and_then(|i| i.principal()),
            member,
            forwarded,
        )
    }

    /// Whether `who` presented a valid credential (or none is needed):
    /// what decides a connection's budget.
    pub(crate) fn is_authenticated(&self, who: &Result<Principal, Denied>) -> bool {
        !self.parts.auth.is_on() || matches!(who, Ok(p) if *p != Principal::Anonymous)
    }

    /// Whether `who` may do `action`; a refusal carries the principal and
    /// its roles for the caller's log line.
    pub(crate) fn authorize(
        &self,
        who: &Result<Principal, Denied>,
        action: &Action,
    ) -> Result<Access, Refusal> {
        let access = who
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|p| self.parts.auth.check(p, action));
        access.map_err(|denied| {
            let (principal, roles) = match who {
                Ok(p) => (p.name(), self.parts.auth.roles_of(p)),
                Err(_) => (String::new(), String::new()),
            };
            Refusal {
                denied,
                principal,
                roles,
            }
        })
    }

    /// Record an admin action this node served, for `/v1/status`.
    pub(crate) fn record_admin(&self, a: AdminAction) {
        self.admin_log.push(a);
    }
}
