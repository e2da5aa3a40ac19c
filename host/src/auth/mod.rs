//! Who is calling, and what they may do (docs/security.md, "Clients and
//! roles").
//!
//! Authentication is on when the node has an auth file (`--auth-file`).
//! A caller is then
//!
//! * the principal its **bearer token** names (HTTP `Authorization:
//!   Bearer …`, or the native hello), when it sends one: a token the file
//!   does not know is refused, whatever else the caller presents;
//! * else the name of its **client certificate** (its first DNS name);
//! * a **member node**, when its certificate names one (`node-N.lockd`
//!   with N in the membership): nodes read (the audit checker) and pass on
//!   the principal of a request they forward to the leader, which only a
//!   member node may do;
//! * else anonymous, and refused (401) everything but public routes.
//!
//! What a principal may do is what its roles grant ([`rules`]):
//! `admin` everything, `read` every read, a role of the file's own lock
//! use (and reads) under named key prefixes. Everything else is refused
//! (403) and the refusal is logged with the principal and its roles.
//!
//! The file is read at start and again on SIGHUP; a file that does not
//! parse is refused with the reason and the rules in force stay. A reload
//! takes effect at once on open connections too: HTTP requests are
//! checked one by one, and a native connection settles its caller again
//! before its next request ([`Auth::generation`]). A request a follower
//! forwards carries the caller's token to the leader, which checks it by
//! its own rules; so a revoked token or role is refused as soon as either
//! node has reloaded (docs/security.md, "Revocation").
//!
//! # Layout
//!
//! * [`rules`]: the file, parsed (principals, hashed tokens, roles).
//! * [`action`]: what each HTTP route and native request does.
//! * [`trail`]: the recent admin actions, for status.
//! * this file: [`Auth`], the rules in force, and [`Auth::check`].

pub mod action;
pub mod rules;
pub mod trail;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use thiserror::Error;

pub use action::Action;
pub use rules::{Grants, Rules, RulesError};

/// The header a node forwarding a request puts the caller's principal in.
/// Believed only from a member node's certificate.
pub(crate) const PRINCIPAL_HEADER: &str = "x-lockd-principal";

/// Who a caller is, as this node established it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    Anonymous,
    /// A client, by certificate or token (or as a forwarding node said).
    Client(String),
    /// A member node, by its certificate.
    Node(u64),
}

impl Principal {
    /// The name recorded in grants and log lines.
    pub fn name(&self) -> String {
        match self {
            Principal::Anonymous => String::new(),
            Principal::Client(n) => n.clone(),
            Principal::Node(id) => lockd_net::tls::node_name(*id),
        }
    }
}

/// What a request was allowed as: the principal to record, and whether it
/// may act on other principals' holdings (admin, or authentication off).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// Empty when authentication is off.
    pub principal: String,
    pub admin: bool,
}

impl Access {
    /// Authentication off: anyone may do anything, and nothing is recorded.
    pub fn open() -> Access {
        Access {
            principal: String::new(),
            admin: true,
        }
    }

    /// Whether this caller may see or act on a holding of `holder`
    /// (`None`: nobody recorded who holds it).
    pub fn owns(&self, holder: Option<&str>) -> bool {
        self.admin || holder.is_none_or(|h| h.is_empty() || h == self.principal)
    }
}

/// Why a request was refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum Denied {
    /// No credentials, or ones this node does not accept (401).
    #[error("{0}")]
    Unauthenticated(String),
    /// Known, but not allowed (403).
    #[error("{0}")]
    Forbidden(String),
}

#[derive(Debug, Error)]
#[error("auth file {path}: {reason}")]
pub struct AuthFileError {
    pub path: String,
    pub reason: String,
}

/// The rules in force on this node.
pub struct Auth {
    /// `None`: authentication is off.
    path: Option<PathBuf>,
    rules: RwLock<Arc<Rules>>,
    /// Bumped by every reload that took effect: a connection that settled
    /// its caller's principal under older rules settles it again.
    generation: std::sync::atomic::AtomicU64,
}

fn read_rules(path: &Path) -> Result<Rules, AuthFileError> {
    let err = |reason: String| AuthFileError {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    Rules::parse(&text).map_err(|e| err(e.to_string()))
}

impl Auth {
    /// Authentication off.
    pub fn off() -> Auth {
        Auth {
            path: None,
            rules: RwLock::new(Arc::new(Rules::default())),
            generation: Default::default(),
        }
    }

    /// Authentication on, with the rules in `path`.
    pub(crate) fn from_file(path: &Path) -> Result<Auth, AuthFileError> {
        let rules = read_rules(path)?;
        Ok(Auth {
            path: Some(path.to_path_buf()),
            rules: RwLock::new(Arc::new(rules)),
            generation: Default::default(),
        })
    }

    pub fn is_on(&self) -> bool {
        self.path.is_some()
    }

    /// Read the file again (on SIGHUP). On an error the rules in force
    /// stay. Returns how many principals the new rules name.
    pub fn reload(&self) -> Result<usize, AuthFileError> {
        let Some(path) = &self.path else {
            return Ok(0);
        };
        let rules = read_rules(path)?;
        let n = rules.principals();
        *self.rules.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(rules);
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(n)
    }

    /// Which rules are in force: changes with every reload.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn rules(&self) -> Arc<Rules> {
        self.rules.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Who the caller is. `token`: a bearer token it sent; `cert`: its
    /// certificate's name; `node`: the member node its certificate names
    /// (checked by the caller of this); `forwarded`: the principal a
    /// forwarding node says it forwards for.
    pub(crate) fn authenticate(
        &self,
        token: Option<&str>,
        cert: Option<String>,
        node: Option<u64>,
        forwarded: Option<&str>,
    ) -> Result<Principal, Denied> {
        if !self.is_on() {
            return Ok(Principal::Anonymous);
        }
        if forwarded.is_some() && token.is_some() {
            return Err(Denied::Unauthenticated(format!(
                "a request carries a bearer token or {PRINCIPAL_HEADER}, not both"
            )));
        }
        if let Some(name) = forwarded {
            let Some(id) = node else {
                return Err(Denied::Forbidden(format!(
                    "{PRINCIPAL_HEADER} is accepted only from a member node's certificate"
                )));
            };
            if name.is_empty() {
                return Err(Denied::Unauthenticated(format!(
                    "node {id} forwarded a request without a principal"
                )));
            }
            return Ok(Principal::Client(name.to_string()));
        }
        if let Some(token) = token {
            return match self.rules().principal_of_token(token) {
                Some(p) => Ok(Principal::Client(p.to_string())),
                None => Err(Denied::Unauthenticated(
                    "the bearer token is not known to this node".into(),
                )),
            };
        }
        if let Some(id) = node {
            return Ok(Principal::Node(id));
        }
        Ok(cert.map_or(Principal::Anonymous, Principal::Client))
    }

    /// Whether `who` may do `action`; what to record if so.
    pub fn check(&self, who: &Principal, action: &Action) -> Result<Access, Denied> {
        if !self.is_on() {
            return Ok(Access::open());
        }
        if *action == Action::Public {
            return Ok(Access {
                principal: who.name(),
                admin: false,
            });
        }
        let name = match who {
            Principal::Anonymous => {
                return Err(Denied::Unauthenticated(format!(
                    "authentication required for {}: send a client certificate or a bearer token",
                    action.describe()
                )))
            }
            Principal::Node(id) => {
                // Nodes read (audit points) and forward; they hold no locks.
                return match action {
                    Action::Any | Action::Read | Action::ReadKey(_) | Action::List(_) => {
                        Ok(Access {
                            principal: who.name(),
                            admin: false,
                        })
                    }
                    _ => Err(Denied::Forbidden(format!(
                        "node {id}'s certificate is not allowed {}",
                        action.describe()
                    ))),
                };
            }
            Principal::Client(name) => name,
        };
        let rules = self.rules();
        let none = Grants::default();
        let g = rules.grants(name).unwrap_or(&none);
        let allowed = g.admin
            || match action {
                Action::Public | Action::Any => true,
                Action::Read => g.read,
                Action::ReadKey(k) => g.read || g.may_lock(k),
                Action::List(p) => g.read || g.may_lock(p),
                Action::Lock(k) => g.may_lock(k),
                Action::Session => g.may_lock_some(),
                Action::Admin => false,
            };
        if allowed {
            return Ok(Access {
                principal: name.clone(),
                admin: g.admin,
            });
        }
        let roles = if g.roles.is_empty() {
            "no roles".to_string()
        } else {
            format!("roles {}", g.roles.join(", "))
        };
        Err(Denied::Forbidden(format!(
            "principal {name:?} ({roles}) is not allowed {}",
            action.describe()
        )))
    }

    /// The roles of `who`, for log lines.
    pub(crate) fn roles_of(&self, who: &Principal) -> String {
        match who {
            Principal::Client(name) => self
                .rules()
                .grants(name)
                .map(|g| g.roles.join(","))
                .unwrap_or_default(),
            Principal::Node(_) => "node".into(),
            Principal::Anonymous => String::new(),
        }
    }
}

#[cfg(test)]
mod tests;
