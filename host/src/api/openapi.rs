//! The OpenAPI 3 document of the HTTP API, served at `GET
//! /v1/openapi.json` (no credentials needed, like `/ui`).
//!
//! Nothing in it is written twice: every schema is derived (utoipa) from
//! the type the handler (de)serializes, and every operation is declared by
//! `#[utoipa::path]` on the handler that serves it, with the route table's
//! path ([`super::paths`]) where it has one. What could still
//! drift is checked: the document names exactly the paths and methods of
//! [`super::routes::ROUTES`] (unit tests below), and a live test probes
//! every path with every method both ways and checks real answers
//! against the schemas (`tests/cluster/api_contract.rs`). The readable
//! reference `docs/api.md` is rendered from this document, and a test
//! fails when it is stale.
//!
//! Keys may contain `/`, which OpenAPI path parameters cannot express:
//! the document names the lock routes `/v1/locks/{key}…` and says so; the
//! router serves them as `/v1/locks/{*path}` and splits off the action.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{OpenApi as Document, Ref, Response, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use super::error::ErrorBody;
use super::paths;
use super::{admin, cluster, health, locks, metrics, policy, sessions, watch};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "lockd",
        description = "The HTTP/JSON API of lockd, a Raft-replicated lock service whose lock logic is a deterministic WebAssembly module. Every error is `{\"error\": \"…\", \"code\": \"…\"}` with a fitting status code: `code` is stable and is what programs match (the list: ErrorCode), `error` is for people (and `leader` names the leader when another node leads). Lock, admin and membership routes are answered by the leader; any other node forwards them. With authentication on, every route but the public ones needs `Authorization: Bearer TOKEN` or a client certificate (401 without, 403 when the roles do not allow it). A request whose `Host` names none of the node's names (an IP address, `localhost`, its advertised or listen address, `--allowed-hosts`) is refused with 421 and the code `unknown_host`: every request with authentication off, a browser's request that can change state with it on (DNS rebinding).",
        license(name = "Apache-2.0")
    ),
    paths(
        locks::acquire,
        locks::release,
        locks::keepalive,
        sessions::proclaim,
        locks::lock_get,
        locks::lock_list,
        watch::watch,
        locks::lock_delete,
        sessions::open,
        sessions::get,
        sessions::post,
        sessions::close,
        policy::policy_get,
        policy::policy_put,
        cluster::status,
        cluster::whoami,
        cluster::members_list,
        cluster::members_add,
        cluster::members_promote,
        cluster::members_remove,
        health::healthz,
        health::readyz,
        cluster::console,
        serve,
        metrics::metrics,
        admin::audit,
        admin::snapshot_save,
        admin::snapshot_build,
        admin::capacity_get,
        admin::capacity_put,
        admin::module_keys_get,
        admin::module_keys_post,
        admin::module_keys_delete,
        admin::upgrade,
        admin::rollback,
        admin::shadow_start,
        admin::shadow_promote,
        admin::shadow_abort,
    ),
    components(schemas(ErrorBody)),
    modifiers(&Secured),
    tags(
        (name = "locks", description = "Acquire, renew, release and read locks, and the module's policy data."),
        (name = "sessions", description = "One lease for many holdings: open, renew, read and close sessions."),
        (name = "cluster", description = "Status, membership, health and metrics."),
        (name = "admin", description = "Hot upgrade, shadow mode, signed modules, capacity, snapshots and the determinism audit."),
    )
)]
struct ApiDoc;

/// The bearer scheme, and what every non-public operation may answer
/// with authentication on.
struct Secured;

impl Modify for Secured {
    fn modify(&self, doc: &mut Document) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A token from `lockd auth token` (or a client certificate over TLS)",
                    ))
                    .build(),
            ),
        );
        let error = |what: &str| -> Response {
            ResponseBuilder::new()
                .description(what)
                .content(
                    "application/json",
                    utoipa::openapi::ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ErrorBody")))
                        .build(),
                )
                .build()
        };
        for (path, item) in doc.paths.paths.iter_mut() {
            if paths::PUBLIC.contains(&path.as_str()) {
                continue;
            }
            for op in operations(item) {
                let r = &mut op.responses.responses;
                r.entry("401".into())
                    .or_insert_with(|| error("no credentials (authentication on)").into());
                r.entry("403".into())
                    .or_insert_with(|| error("the caller's roles do not allow it").into());
                op.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
                    "bearer",
                    Vec::<String>::new(),
                )]);
            }
        }
    }
}

fn operations(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.patch,
        &mut item.head,
    ]
    .into_iter()
    .filter_map(Option::as_mut)
}

/// The document, with this build's version.
pub fn document() -> Document {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").into();
    doc
}

/// The document as JSON, made once.
pub fn json() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        document()
            .to_pretty_json()
            .unwrap_or_else(|e| format!("{{\"error\":\"the document does not serialize: {e}\"}}"))
    })
}

/// The OpenAPI document of this API.
#[utoipa::path(
    get,
    path = paths::OPENAPI,
    tag = "cluster",
    responses((status = 200, description = "this document (OpenAPI 3.1)", content_type = "application/json", body = Object))
)]
pub async fn serve() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], json())
}

#[cfg(test)]
mod tests;
