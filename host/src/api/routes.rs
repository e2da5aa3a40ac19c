//! Every HTTP route, in one table ([`ROUTES`]).
//!
//! The router is built from the table and nothing else, so the table is
//! what the node serves; the OpenAPI document ([`super::openapi`]) must
//! name exactly its paths (a unit test there), and a live test probes
//! every path with every method both ways (`tests/cluster/api_contract.rs`).
//! Each entry says which node answers it: the node asked, or the leader
//! (any other node forwards the request, [`super::forward`]), with the
//! body limit of the route.

use std::sync::Arc;

use axum::middleware;
use axum::routing::{delete, get, post, MethodRouter};
use axum::Router;

use super::body::{MAX_BODY, MAX_MODULE};
use super::error::ApiError;
use super::forward::{to_leader, Forwarding};
use super::services::Services;
use super::{admin, cluster, health, locks, metrics, openapi, policy, sessions, watch};

type Methods = MethodRouter<Arc<Services>>;

/// What a route needs to be answered by the leader.
pub struct Leader {
    node: Arc<Services>,
}

impl Leader {
    fn forward(&self, limit: usize, what: &'static str, methods: Methods) -> Methods {
        methods.route_layer(middleware::from_fn_with_state(
            Forwarding {
                node: self.node.clone(),
                limit,
                what,
            },
            to_leader,
        ))
    }

    /// Answered by the leader; JSON bodies up to 64 KiB.
    fn json(&self, methods: Methods) -> Methods {
        self.forward(MAX_BODY, "request body", methods)
    }

    /// Answered by the leader; module bodies up to `--max-module-bytes`.
    fn module(&self, methods: Methods) -> Methods {
        self.forward(MAX_MODULE, "module", methods)
    }
}

/// A path and its methods. A method router's layer wraps only the methods
/// before it, so one path can mix the node's and the leader's answers.
pub type Route = (&'static str, fn(&Leader) -> Methods);

/// Every route the node serves.
pub const ROUTES: &[Route] = &[
    // Answered by the node asked.
    ("/v1/status", |_| get(cluster::status)),
    ("/healthz", |_| get(health::healthz)),
    ("/readyz", |_| get(health::readyz)),
    ("/ui", |_| get(cluster::console)),
    ("/v1/openapi.json", |_| get(openapi::serve)),
    ("/v1/whoami", |_| get(cluster::whoami)),
    ("/v1/members", |_| get(cluster::members_list)),
    ("/v1/watch", |_| get(watch::watch)),
    ("/metrics", |_| get(metrics::metrics)),
    ("/v1/audit", |_| get(admin::audit)),
    // A backup comes from the leader; a snapshot build happens here.
    ("/v1/admin/snapshot", |l| {
        l.json(get(admin::snapshot_save))
            .post(admin::snapshot_build)
    }),
    // Answered by the leader.
    ("/v1/members/add", |l| l.json(post(cluster::members_add))),
    ("/v1/members/promote", |l| {
        l.json(post(cluster::members_promote))
    }),
    ("/v1/members/remove", |l| {
        l.json(post(cluster::members_remove))
    }),
    ("/v1/locks", |l| l.json(get(locks::lock_list))),
    // Keys may contain `/`: the action is the path's end (`locks`).
    ("/v1/locks/{*path}", |l| {
        l.json(
            get(locks::lock_get)
                .post(locks::lock_post)
                .delete(locks::lock_delete),
        )
    }),
    ("/v1/sessions", |l| l.json(post(sessions::open))),
    ("/v1/sessions/{*path}", |l| {
        l.json(
            get(sessions::get)
                .post(sessions::post)
                .delete(sessions::close),
        )
    }),
    ("/v1/admin/policy", |l| {
        l.json(get(policy::policy_get).put(policy::policy_put))
    }),
    ("/v1/admin/capacity", |l| {
        l.json(get(admin::capacity_get).put(admin::capacity_put))
    }),
    ("/v1/admin/module-keys", |l| {
        l.json(get(admin::module_keys_get).post(admin::module_keys_post))
    }),
    ("/v1/admin/module-keys/{key}", |l| {
        l.json(delete(admin::module_keys_delete))
    }),
    ("/v1/admin/upgrade", |l| l.module(post(admin::upgrade))),
    ("/v1/admin/rollback", |l| l.json(post(admin::rollback))),
    ("/v1/admin/shadow", |l| l.module(post(admin::shadow_start))),
    ("/v1/admin/shadow/promote", |l| {
        l.module(post(admin::shadow_promote))
    }),
    ("/v1/admin/shadow/abort", |l| {
        l.module(post(admin::shadow_abort))
    }),
];

/// Every route, behind the authorisation layer (which needs the
/// connection's [`crate::transport::listener::Caller`] as an extension).
pub fn router(node: Arc<Services>) -> Router {
    let leader = Leader { node: node.clone() };
    ROUTES
        .iter()
        .fold(Router::new(), |r, (path, methods)| {
            r.route(path, methods(&leader))
        })
        .fallback(|| async { ApiError::not_found("no such route") })
        .layer(middleware::from_fn_with_state(
            node.clone(),
            super::authorize::authorize,
        ))
        .with_state(node)
}

#[cfg(test)]
mod tests;
