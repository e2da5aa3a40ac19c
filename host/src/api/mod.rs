//! What a node answers on its one address.
//!
//! # Layout
//!
//! * [`services`]: [`Services`], what requests may ask of the node, through
//!   methods that say what each needs.
//! * [`caller`]: who a framed connection's caller is, and what it may do.
//! * [`framed`]: the server side of the framed protocol — hello and
//!   fingerprint check, then Raft RPC from peers and the client protocol.
//! * [`health`]: `/healthz` and `/readyz`.
//! * [`routes`]: the table of every HTTP route (its methods, what each asks
//!   for, which node answers it), and the router built from it.
//! * [`openapi`]: the OpenAPI document of those routes, from the handlers.
//! * [`http`]: one HTTP connection, served by the router.
//! * [`cluster`]: the status, membership, whoami and console routes.
//! * [`locks`], [`lock_json`], [`policy`]: the lock routes, their bodies
//!   and answers, and the module's policy data.
//! * [`watch`]: the changes under a prefix as Server-Sent Events.
//! * [`native_locks`]: the framed protocol's lock requests of world 0.2
//!   and their answers (what a caller may see of a holding).
//! * [`native_watch`]: the watch on the framed protocol, a stream of
//!   responses under one request id.
//! * [`admin`]: hot upgrade, shadow mode and audit routes.
//! * [`op`]: what an HTTP request asks for, parsed once for the
//!   authorisation layer and the handlers alike.
//! * [`origin`]: cross-site and untyped requests, refused.
//! * [`hosts`]: requests sent to a name that is not the node's (DNS
//!   rebinding), refused.
//! * [`authorize`]: the layer that authenticates and authorises every
//!   HTTP request, and the admin audit trail.
//! * [`forward`]: the layer that passes leader-only requests to the leader.
//! * [`body`]: request bodies, read and checked once.
//! * [`error`]: [`ApiError`], every HTTP error answer.
//! * [`status`]: the node's status report, shared by HTTP and the CLI.
//! * [`metrics`]: Prometheus text.

pub mod admin;
pub(crate) mod authorize;
pub mod body;
pub mod caller;
pub mod cluster;
pub mod error;
pub mod forward;
pub mod framed;
pub mod health;
pub mod hosts;
pub mod http;
pub(crate) mod lock_json;
pub mod locks;
pub(crate) mod marks;
pub mod metrics;
pub(crate) mod native_locks;
pub mod native_watch;
pub mod op;
pub mod openapi;
pub mod origin;
mod parse;
pub(crate) mod paths;
pub mod policy;
pub(crate) mod reauth;
mod router;
pub mod routes;
pub mod services;
pub mod sessions;
pub mod status;
pub mod watch;

pub use error::ApiError;
pub use services::Services;

use std::sync::Arc;

use crate::transport::listener::{Incoming, Protocol};

/// Serve one connection the listener accepted, by its protocol.
pub async fn serve(node: Arc<Services>, c: Incoming) {
    match c.protocol {
        Protocol::Framed => framed::serve(node, c).await,
        Protocol::Http => http::serve(node, c).await,
    }
}
