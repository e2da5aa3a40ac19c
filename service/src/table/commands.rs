//! The table's own lock commands ([`Cmd`], an acquire's [`Spec`]) and
//! what applying one returned ([`Outcome`]), which the actor maps onto
//! the active module's world.

use std::fmt;

use lockd_core::command::Mode;

/// What an acquire asks for, passed to the module unchanged. The table
/// reads `mode` and `limit` only to skip proposals the world's contract
/// makes certain to be `busy` (see [`super::holders::Holders::room`]) and
/// to size the batch of waiters behind a release.
#[derive(Clone, PartialEq, Eq)]
pub struct Spec {
    pub lease_ms: u64,
    pub mode: Mode,
    pub limit: u32,
    /// `Some(fallback)`: a shared acquire that gave no limit. It joins the
    /// key's readers at their limit, taken from the mirror whenever the
    /// table is about to propose it ([`Spec::resolve`]), or uses
    /// `fallback` on a key without readers. Every reader of a key must give
    /// the module the same limit, so a default that two readers resolved
    /// apart would refuse the second.
    pub adopt: Option<u32>,
    /// Set by the service from the caller's credentials (empty without
    /// authentication), never by the caller.
    pub principal: String,
    pub owner: String,
    /// Empty: the grant is not idempotent.
    pub request_id: String,
    /// 0: a holding on its own lease; else the session it lives in (its
    /// lease is the session's).
    pub session: u64,
    /// Enter again when this holder (principal, owner, session) holds the
    /// key already: same token, count one higher.
    pub reentrant: bool,
    /// The holding's published value (elections).
    pub value: String,
    /// The priority asked for (0: none): what the module's `pick` weighs
    /// when the key frees and several wait ([`super::pick`]). The leader's
    /// alone: not part of the grant.
    pub priority: u32,
}

/// Who holds a holding and under which request id (kept only for grants
/// with a request id: the ones a retry can repeat).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    pub principal: String,
    pub owner: String,
    pub request_id: String,
}

impl Spec {
    /// An exclusive lock of limit 1 (the seed's lock), for nobody in
    /// particular.
    pub fn exclusive(lease_ms: u64) -> Spec {
        Spec {
            lease_ms,
            mode: Mode::Exclusive,
            limit: 1,
            adopt: None,
            principal: String::new(),
            owner: String::new(),
            request_id: String::new(),
            session: 0,
            reentrant: false,
            value: String::new(),
            priority: 0,
        }
    }

    /// Whether a holding of `h` is this spec's holder entering again.
    pub(super) fn reenters(&self, h: &super::Holder) -> bool {
        self.reentrant
            && h.mode == self.mode
            && h.session == self.session
            && h.owner == self.owner
            && h.principal == self.principal
            && (self.session != 0 || !self.owner.is_empty())
    }

    /// Settle an adopting limit against the key's holders as the mirror
    /// has them now (which, when the table proposes, are all of them).
    pub(super) fn resolve(&mut self, holders: &super::holders::Holders) {
        if let Some(fallback) = self.adopt {
            self.limit = holders.shared_limit().unwrap_or(fallback);
        }
    }

    /// The same holder and request id as a holding with `ident`.
    pub(super) fn repeats(&self, ident: &Option<Ident>) -> bool {
        !self.request_id.is_empty()
            && ident.as_ref().is_some_and(|i| {
                i.request_id == self.request_id
                    && i.owner == self.owner
                    && i.principal == self.principal
            })
    }
}

impl fmt::Debug for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}ms {}/{}",
            self.lease_ms,
            self.mode.as_str(),
            self.limit
        )?;
        if let Some(fallback) = self.adopt {
            write!(f, " (default, else {fallback})")?;
        }
        for (name, v) in [
            ("principal", &self.principal),
            ("owner", &self.owner),
            ("request", &self.request_id),
        ] {
            if !v.is_empty() {
                write!(f, " {name}={v}")?;
            }
        }
        if self.session != 0 {
            write!(f, " session={}", self.session)?;
        }
        if self.reentrant {
            f.write_str(" reentrant")?;
        }
        if self.priority != 0 {
            write!(f, " priority={}", self.priority)?;
        }
        Ok(())
    }
}

/// A lock command as the table proposes it; release and expire name
/// `(key, token)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cmd {
    Grant {
        key: String,
        spec: Spec,
    },
    Release {
        key: String,
        token: u64,
    },
    Expire {
        key: String,
        token: u64,
    },
    OpenSession(super::sessions::SessionSpec),
    CloseSession {
        id: u64,
    },
    ExpireSession {
        id: u64,
    },
    Proclaim {
        key: String,
        token: u64,
        value: String,
    },
}

/// Why a grant was not granted: the module's own reason, unchanged.
pub use lockd_core::command::Reason as Reject;

/// What applying a [`Cmd`] returned, as the table needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Granted {
        token: u64,
        /// The lease granted (the module may shorten the one asked for).
        lease_ms: u64,
        /// A retry of a grant that had committed: the same holding.
        repeat: bool,
        /// Times its holder holds it now (above 1: entered again).
        count: u32,
    },
    Rejected(Reject),
    /// `freed`: the key can take more holders; `count`: what is left of a
    /// reentrant holding (0: removed).
    Released {
        freed: bool,
        count: u32,
    },
    SessionOpened {
        id: u64,
        ttl_ms: u64,
    },
    /// The holdings a session's end removed, and the keys it freed.
    SessionEnded {
        released: Vec<(String, u64)>,
        freed: Vec<String>,
    },
    Proclaimed,
    Expired {
        existed: bool,
        freed: bool,
    },
    NotFound,
    Noop,
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cmd::Grant { key, spec } => {
                write!(f, "grant {key} lease={}", spec.lease_ms)?;
                if spec.mode != Mode::Exclusive || spec.limit != 1 {
                    write!(f, " {} limit={}", spec.mode.as_str(), spec.limit)?;
                }
                if !spec.owner.is_empty() {
                    write!(f, " owner={}", spec.owner)?;
                }
                if !spec.request_id.is_empty() {
                    write!(f, " request={}", spec.request_id)?;
                }
                if spec.session != 0 {
                    write!(f, " session={}", spec.session)?;
                }
                if spec.reentrant {
                    f.write_str(" reentrant")?;
                }
                if !spec.value.is_empty() {
                    write!(f, " value={}", spec.value)?;
                }
                Ok(())
            }
            Cmd::Release { key, token } => write!(f, "release {key} token={token}"),
            Cmd::Expire { key, token } => write!(f, "expire {key} token={token}"),
            Cmd::OpenSession(s) => write!(f, "open-session ttl={} owner={}", s.ttl_ms, s.owner),
            Cmd::CloseSession { id } => write!(f, "close-session {id}"),
            Cmd::ExpireSession { id } => write!(f, "expire-session {id}"),
            Cmd::Proclaim { key, token, value } => {
                write!(f, "proclaim {key} token={token} value={value}")
            }
        }
    }
}
