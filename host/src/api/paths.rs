//! Every route's path, named once: the route table ([`super::routes`]) and the handlers'
//! OpenAPI declarations (`#[utoipa::path(…, path = paths::…)]`) take them
//! from here. The lock and session routes are documented by their
//! actions' paths, which the router serves as one wildcard route each.

pub(crate) const HEALTHZ: &str = "/healthz";
pub(crate) const READYZ: &str = "/readyz";
pub(crate) const UI: &str = "/ui";
pub(crate) const OPENAPI: &str = "/v1/openapi.json";
pub(crate) const WHOAMI: &str = "/v1/whoami";
pub(crate) const STATUS: &str = "/v1/status";
pub(crate) const MEMBERS: &str = "/v1/members";
pub(crate) const WATCH: &str = "/v1/watch";
pub(crate) const METRICS: &str = "/metrics";
pub const AUDIT: &str = "/v1/audit";
pub(crate) const SNAPSHOT: &str = "/v1/admin/snapshot";
pub(crate) const MEMBERS_ADD: &str = "/v1/members/add";
pub(crate) const MEMBERS_PROMOTE: &str = "/v1/members/promote";
pub(crate) const MEMBERS_REMOVE: &str = "/v1/members/remove";
pub const LOCKS: &str = "/v1/locks";
pub const LOCK: &str = "/v1/locks/{*path}";
pub(crate) const SESSIONS: &str = "/v1/sessions";
pub const SESSION: &str = "/v1/sessions/{*path}";
pub(crate) const POLICY: &str = "/v1/admin/policy";
pub(crate) const CAPACITY: &str = "/v1/admin/capacity";
pub(crate) const MODULE_KEYS: &str = "/v1/admin/module-keys";
pub(crate) const MODULE_KEY: &str = "/v1/admin/module-keys/{key}";
pub const UPGRADE: &str = "/v1/admin/upgrade";
pub(crate) const ROLLBACK: &str = "/v1/admin/rollback";
pub(crate) const SHADOW: &str = "/v1/admin/shadow";
pub(crate) const SHADOW_PROMOTE: &str = "/v1/admin/shadow/promote";
pub(crate) const SHADOW_ABORT: &str = "/v1/admin/shadow/abort";

/// The paths that need no credentials (docs/security.md, "Clients and
/// roles"), for the OpenAPI document: the route table gives every method
/// of exactly these `Asks::Public` (a unit test in `routes`).
pub(crate) const PUBLIC: [&str; 4] = [HEALTHZ, READYZ, UI, OPENAPI];
