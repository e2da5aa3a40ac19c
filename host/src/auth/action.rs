//! What a request does, in the terms the rules speak ([`Action`]). An
//! HTTP request's action comes from its parsed route
//! (`crate::api::op::Op::action`), a native request's from [`of_native`]:
//! neither can be added without saying who may call it.

use lockd_proto::ClientRequest;

/// What a request does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Needs no credentials: the health checks.
    Public,
    /// Any authenticated principal (an unknown route, answered 404 once
    /// the caller is known).
    Any,
    /// Status, members, metrics, audit, policy and capacity reads.
    Read,
    /// Who holds a key.
    ReadKey(String),
    /// Held keys under a prefix.
    List(String),
    /// Acquire, release, keepalive or proclaim on a key.
    Lock(String),
    /// Open, read, renew or close a session: any principal that may lock
    /// some key (a session holds nothing by itself; each acquire in it is
    /// checked against its key, and only the session's principal may use
    /// it).
    Session,
    /// Upgrade, shadow, membership, snapshot, force release, policy and
    /// capacity changes, trusted module keys.
    Admin,
}

impl Action {
    /// How the log line of a refusal names it.
    pub fn describe(&self) -> String {
        match self {
            Action::Public => "a public route".into(),
            Action::Any => "this route".into(),
            Action::Read => "reads (role read)".into(),
            Action::ReadKey(k) => format!("reading key {k:?}"),
            Action::List(p) => format!("listing prefix {p:?}"),
            Action::Lock(k) => format!("locking key {k:?}"),
            Action::Session => "sessions (a role that may lock some key)".into(),
            Action::Admin => "admin actions (role admin)".into(),
        }
    }
}

/// The action of a native request.
/// A key or prefix that is not UTF-8 names no key the rules can speak of;
/// it needs admin (and the service then refuses it as not UTF-8), so no
/// lossy reading of it can match a rule meant for another key.
pub(crate) fn of_native(req: &ClientRequest) -> Action {
    let key = |k: &[u8], f: fn(String) -> Action| match std::str::from_utf8(k) {
        Ok(k) => f(k.to_string()),
        Err(_) => Action::Admin,
    };
    match req {
        ClientRequest::Acquire { key: k, .. }
        | ClientRequest::Release { key: k, .. }
        | ClientRequest::Keepalive { key: k, .. } => key(k, Action::Lock),
        ClientRequest::AcquireWith(a) => key(&a.key, Action::Lock),
        ClientRequest::AcquireIn(a) => key(&a.base.key, Action::Lock),
        ClientRequest::AcquireRanked(a) => key(&a.base.base.key, Action::Lock),
        ClientRequest::Proclaim { key: k, .. } | ClientRequest::ReleaseCount { key: k, .. } => {
            key(k, Action::Lock)
        }
        ClientRequest::OpenSession { .. }
        | ClientRequest::KeepSession { .. }
        | ClientRequest::CloseSession { .. } => Action::Session,
        ClientRequest::Get { key: k }
        | ClientRequest::Holders { key: k }
        | ClientRequest::Leader { key: k } => key(k, Action::ReadKey),
        ClientRequest::List { prefix, .. } => key(prefix, Action::List),
        // Whoever may list a prefix may follow it (as over HTTP).
        ClientRequest::Watch(w) => key(&w.prefix, Action::List),
        ClientRequest::Status => Action::Read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_that_is_not_utf8_needs_admin() {
        let get = |k: &[u8]| of_native(&ClientRequest::Get { key: k.to_vec() });
        assert_eq!(get(b"jobs/a"), Action::ReadKey("jobs/a".into()));
        assert_eq!(get(b"jobs/\xff"), Action::Admin);
    }
}
