//! The router: every route of the table ([`super::routes::ROUTES`]) with
//! its handler, the methods the leader answers behind the forwarding
//! layer, and the authorisation layer in front of all of them.

use std::sync::Arc;

use axum::middleware;
use axum::routing::MethodRouter;
use axum::Router;

use super::error::ApiError;
use super::forward::{to_leader, Forwarding};
use super::routes::{By, Methods, Route, ROUTES};
use super::services::Services;

/// Every route, behind the authorisation layer (which needs the
/// connection's [`crate::transport::listener::Caller`] as an extension).
pub fn router(node: Arc<Services>) -> Router {
    ROUTES
        .iter()
        .fold(Router::new(), |r, route| {
            r.route(route.path, methods(route, &node))
        })
        .fallback(|| async { ApiError::not_found("no such route") })
        .layer(middleware::from_fn_with_state(
            node.clone(),
            super::authorize::authorize,
        ))
        .with_state(node)
}

/// A route's methods, each answered by the leader behind the forwarding
/// layer (a layer on one method only: a path can mix the node's answers
/// and the leader's).
fn methods(route: &Route, node: &Arc<Services>) -> Methods {
    route.methods.iter().fold(MethodRouter::new(), |all, s| {
        let one = (s.handler)(s.method);
        all.merge(match s.by {
            By::Node => one,
            By::Leader { limit, what } => one.route_layer(middleware::from_fn_with_state(
                Forwarding {
                    node: node.clone(),
                    limit,
                    what,
                },
                to_leader,
            )),
        })
    })
}
