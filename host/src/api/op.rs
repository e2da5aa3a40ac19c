//! What an HTTP request asks for, parsed once ([`super::parse`]): the one reading
//! of a request's method, path and query that authorisation and the
//! handlers share, by what the route table ([`super::routes`]) says its
//! method asks. The authorisation layer parses every request into an
//! [`Op`], decides on [`Op::action`] and hands the same [`Op`] to the
//! handler as an extension; no handler reads its path again. A request the
//! parser does not recognise never reaches a handler (404), and one that
//! names a route with a parameter spelled other than canonically is
//! answered 400 before any handler runs (docs/security.md, "Paths").
//!

use crate::auth::Action;

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Health checks, the console page and the API document.
    Public,
    /// Who the caller is.
    WhoAmI,
    /// Status, members, metrics, audit, and the policy, capacity and
    /// module-key reads.
    Read,
    /// A page of held keys.
    List(ListQuery),
    /// The changes under a prefix, as they are applied.
    Watch(WatchQuery),
    /// A lock route.
    Lock(LockOp),
    /// A session route.
    Session(SessionOp),
    /// An admin route without path parameters (its body and query are its
    /// handler's: admin is needed whatever they say).
    Admin,
    /// `DELETE /v1/admin/module-keys/{key}`: the key as sent.
    UntrustKey(String),
    /// No such route (404 once the caller is known, with the reason).
    Unknown(String),
}

/// A lock route: which key, and what to do with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockOp {
    pub key: String,
    pub verb: Verb,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Who holds it.
    Get,
    Acquire,
    Release,
    Keepalive,
    /// Replace the holding's value.
    Proclaim,
    /// End the holding with this token (admin).
    ForceRelease(u64),
}

/// A session route: `POST /v1/sessions` (open), `GET`, `DELETE` (close)
/// and `POST .../keepalive` of `/v1/sessions/{id}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionOp {
    Open,
    Get(u64),
    Keepalive(u64),
    Close(u64),
}

impl Op {
    /// What the rules must allow for it.
    pub fn action(&self) -> Action {
        match self {
            Op::Public => Action::Public,
            Op::WhoAmI | Op::Unknown(_) => Action::Any,
            Op::Read => Action::Read,
            Op::List(q) => Action::List(q.prefix.clone()),
            // Whoever may list a prefix may follow it.
            Op::Watch(q) => Action::List(q.prefix.clone()),
            Op::Lock(l) => match l.verb {
                Verb::Get => Action::ReadKey(l.key.clone()),
                Verb::Acquire | Verb::Release | Verb::Keepalive | Verb::Proclaim => {
                    Action::Lock(l.key.clone())
                }
                Verb::ForceRelease(_) => Action::Admin,
            },
            Op::Session(_) => Action::Session,
            Op::Admin | Op::UntrustKey(_) => Action::Admin,
        }
    }
}

/// The query of `GET /v1/locks`: one page of the held keys.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only keys that start with it.
    #[serde(default)]
    pub prefix: String,
    /// Only keys after it (the `next` of the page before).
    pub after: Option<String>,
    /// At most this many keys (default 100, at most 1000).
    pub limit: Option<u32>,
}

/// `GET /v1/watch`'s query.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WatchQuery {
    /// Only keys that start with it (empty or absent: every key).
    #[serde(default)]
    pub prefix: String,
    /// The first log index wanted (at least 1); absent: the next entry
    /// applied (or, on a reconnect, one past the `Last-Event-ID` header).
    #[param(minimum = 1)]
    pub from: Option<u64>,
}
