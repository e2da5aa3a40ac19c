//! Every HTTP route, in one table ([`ROUTES`]): for each path, the methods
//! it serves, and for each method what it asks for ([`Asks`]: the kind of
//! [`Op`](super::op::Op) it parses to, which decides its authorisation),
//! which node answers it ([`By`]: the node asked, or the leader within the
//! route's body limit) and its handler. Each path is written once, in
//! [`super::paths`].
//!
//! Whatever knows a route is built from the table: the router ([`router`]),
//! the parse of a request ([`super::parse::parse_found`] finds its route here; a
//! path with parameters has its canonical parser there), the requests a
//! forwarded principal may come with ([`answered_by_leader`]), the paths
//! that need no credentials ([`public`]), and the paths and methods of the
//! OpenAPI document (which must be exactly these: unit tests in
//! [`super::openapi`]). A live test probes every path with every method
//! both ways (`tests/cluster/api_contract.rs`).

use std::sync::Arc;

use axum::http::Method;
use axum::routing::{on, MethodFilter, MethodRouter};

use super::body::{MAX_BODY, MAX_MODULE};
use super::paths::*;
use super::services::Services;
use super::{admin, cluster, health, locks, metrics, openapi, policy, sessions, watch};
use Asks::*;

/// A handler routed for one method.
pub(crate) type Methods = MethodRouter<Arc<Services>>;

/// What a method of a route asks for: the kind of its
/// [`Op`](super::op::Op), before its query or its path's parameters are
/// read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asks {
    Public,
    WhoAmI,
    Read,
    List,
    Watch,
    Admin,
    /// A new session.
    Open,
    /// The routes with parameters: a lock, a session, a trusted key. The
    /// route's canonical parser reads the parameters and the method (any
    /// method: it says which are not served), so every method of such a
    /// route asks the same.
    Lock,
    Session,
    UntrustKey,
}

/// Which node answers a method of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// The node asked.
    Node,
    /// The leader: any other node forwards it ([`super::forward`]), with a
    /// body of at most `limit` bytes (`what` names the body at the limit).
    Leader { limit: usize, what: &'static str },
}

/// Answered by the leader; JSON bodies up to 64 KiB.
const JSON: By = By::Leader {
    limit: MAX_BODY,
    what: "request body",
};

/// Answered by the leader; module bodies up to `--max-module-bytes`.
const MODULE: By = By::Leader {
    limit: MAX_MODULE,
    what: "module",
};

/// One method of a route.
pub struct Serve {
    pub method: MethodFilter,
    pub asks: Asks,
    pub by: By,
    /// The handler, routed for `method`: `|m| on(m, handler)` (each
    /// handler has a type of its own; the table holds function pointers).
    pub handler: fn(MethodFilter) -> Methods,
}

/// A path and its methods. HEAD is served as GET.
pub struct Route {
    /// As the router matches it: `{name}` and `{*name}` are parameters.
    pub path: &'static str,
    pub methods: &'static [Serve],
}

const GET: MethodFilter = MethodFilter::GET;
const POST: MethodFilter = MethodFilter::POST;
const PUT: MethodFilter = MethodFilter::PUT;
const DELETE: MethodFilter = MethodFilter::DELETE;

const fn route(path: &'static str, methods: &'static [Serve]) -> Route {
    Route { path, methods }
}

/// A method answered by the node asked.
const fn node(method: MethodFilter, asks: Asks, handler: fn(MethodFilter) -> Methods) -> Serve {
    Serve {
        method,
        asks,
        by: By::Node,
        handler,
    }
}

/// A method answered by the leader, with a body of `body` ([`JSON`] or
/// [`MODULE`]).
const fn leader(
    method: MethodFilter,
    asks: Asks,
    body: By,
    handler: fn(MethodFilter) -> Methods,
) -> Serve {
    Serve {
        method,
        asks,
        by: body,
        handler,
    }
}

/// Every route the node serves.
pub(crate) const ROUTES: &[Route] = &[
    // Answered by the node asked.
    route(STATUS, &[node(GET, Read, |m| on(m, cluster::status))]),
    route(HEALTHZ, &[node(GET, Public, |m| on(m, health::healthz))]),
    route(READYZ, &[node(GET, Public, |m| on(m, health::readyz))]),
    route(UI, &[node(GET, Public, |m| on(m, cluster::console))]),
    route(OPENAPI, &[node(GET, Public, |m| on(m, openapi::serve))]),
    route(WHOAMI, &[node(GET, WhoAmI, |m| on(m, cluster::whoami))]),
    route(
        MEMBERS,
        &[node(GET, Read, |m| on(m, cluster::members_list))],
    ),
    route(WATCH, &[node(GET, Watch, |m| on(m, watch::watch))]),
    route(METRICS, &[node(GET, Read, |m| on(m, metrics::metrics))]),
    route(AUDIT, &[node(GET, Read, |m| on(m, admin::audit))]),
    // A backup comes from the leader; a snapshot build happens here.
    route(
        SNAPSHOT,
        &[
            leader(GET, Admin, JSON, |m| on(m, admin::snapshot_save)),
            node(POST, Admin, |m| on(m, admin::snapshot_build)),
        ],
    ),
    // Answered by the leader.
    route(
        MEMBERS_ADD,
        &[leader(POST, Admin, JSON, |m| on(m, cluster::members_add))],
    ),
    route(
        MEMBERS_PROMOTE,
        &[leader(POST, Admin, JSON, |m| {
            on(m, cluster::members_promote)
        })],
    ),
    route(
        MEMBERS_REMOVE,
        &[leader(POST, Admin, JSON, |m| {
            on(m, cluster::members_remove)
        })],
    ),
    route(
        LOCKS,
        &[leader(GET, List, JSON, |m| on(m, locks::lock_list))],
    ),
    // Keys may contain `/`: the action is the path's end (`locks`).
    route(
        LOCK,
        &[
            leader(GET, Lock, JSON, |m| on(m, locks::lock_get)),
            leader(POST, Lock, JSON, |m| on(m, locks::lock_post)),
            leader(DELETE, Lock, JSON, |m| on(m, locks::lock_delete)),
        ],
    ),
    route(
        SESSIONS,
        &[leader(POST, Open, JSON, |m| on(m, sessions::open))],
    ),
    route(
        SESSION,
        &[
            leader(GET, Session, JSON, |m| on(m, sessions::get)),
            leader(POST, Session, JSON, |m| on(m, sessions::post)),
            leader(DELETE, Session, JSON, |m| on(m, sessions::close)),
        ],
    ),
    route(
        POLICY,
        &[
            leader(GET, Read, JSON, |m| on(m, policy::policy_get)),
            leader(PUT, Admin, JSON, |m| on(m, policy::policy_put)),
        ],
    ),
    route(
        CAPACITY,
        &[
            leader(GET, Read, JSON, |m| on(m, admin::capacity_get)),
            leader(PUT, Admin, JSON, |m| on(m, admin::capacity_put)),
        ],
    ),
    route(
        MODULE_KEYS,
        &[
            leader(GET, Read, JSON, |m| on(m, admin::module_keys_get)),
            leader(POST, Admin, JSON, |m| on(m, admin::module_keys_post)),
        ],
    ),
    route(
        MODULE_KEY,
        &[leader(DELETE, UntrustKey, JSON, |m| {
            on(m, admin::module_keys_delete)
        })],
    ),
    route(
        UPGRADE,
        &[leader(POST, Admin, MODULE, |m| on(m, admin::upgrade))],
    ),
    route(
        ROLLBACK,
        &[leader(POST, Admin, JSON, |m| on(m, admin::rollback))],
    ),
    route(
        SHADOW,
        &[leader(POST, Admin, MODULE, |m| on(m, admin::shadow_start))],
    ),
    route(
        SHADOW_PROMOTE,
        &[leader(POST, Admin, MODULE, |m| {
            on(m, admin::shadow_promote)
        })],
    ),
    route(
        SHADOW_ABORT,
        &[leader(POST, Admin, MODULE, |m| on(m, admin::shadow_abort))],
    ),
];

impl Route {
    /// The method of the route that serves `method`: HEAD is served as
    /// GET unless the route names HEAD itself.
    pub fn serving(&self, method: &Method) -> Option<&'static Serve> {
        let methods: &'static [Serve] = self.methods;
        let find = |f: MethodFilter| methods.iter().find(|s| s.method == f);
        let filter = MethodFilter::try_from(method.clone()).ok()?;
        find(filter).or_else(|| (filter == MethodFilter::HEAD).then(|| find(GET)).flatten())
    }
}

/// What [`find`] found: the route, and for a route with parameters the
/// part of the path after its fixed beginning.
pub type Found<'a> = Option<(&'static Route, Option<&'a str>)>;

/// The route that `path` names, and for a route with parameters the part
/// of the path after its fixed beginning (its parser reads the rest).
pub fn find(path: &str) -> Found<'_> {
    ROUTES.iter().find_map(|r| match r.path.split_once('{') {
        None => (r.path == path).then_some((r, None)),
        Some((fixed, _)) => path.strip_prefix(fixed).map(|rest| (r, Some(rest))),
    })
}

/// Whether any node passes `method path` on to the leader, so that a
/// forwarded principal may come with it: a method the leader answers, or
/// a method the path does not serve (405) when the leader answers all it
/// does.
#[cfg(test)]
pub(crate) fn answered_by_leader(method: &Method, path: &str) -> bool {
    leader_answers(find(path), method)
}

/// [`answered_by_leader`] for a route already found.
pub(crate) fn leader_answers(found: Found, method: &Method) -> bool {
    let leads = |s: &Serve| matches!(s.by, By::Leader { .. });
    found.is_some_and(|(r, _)| match r.serving(method) {
        Some(s) => leads(s),
        None => r.methods.iter().all(leads),
    })
}

/// Whether `path` needs no credentials: every method its route serves is
/// public (docs/security.md, "Clients and roles"); the OpenAPI document
/// reads the same from [`super::paths::PUBLIC`] (a unit test holds them
/// equal).
#[cfg(test)]
pub fn public(path: &str) -> bool {
    find(path).is_some_and(|(r, _)| r.methods.iter().all(|s| s.asks == Public))
}

#[cfg(test)]
mod tests;
