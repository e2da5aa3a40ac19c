//! HTTP routes of the lock module's policy data: rules per key prefix
//! (reserved prefixes, lease caps, holder and held quotas) that a module
//! of world 0.2 keeps in its state and enforces at every grant.
//!
//! | route | body | answer |
//! |---|---|---|
//! | `GET /v1/admin/policy` | | `{"rules":[…]}` |
//! | `PUT /v1/admin/policy` | `{"rules":[{"prefix":"…","reserved":bool,"max_lease_ms":N?,"max_holders":N?,"max_held":N?}]}` | `200`; `422` the module refused the rules (or keeps no policy data) |

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::body::JsonBody;
use super::error::{ApiError, ErrorBody};
use super::lock_json::Done;
use super::paths;
use super::services::Services;
use lockd_core::command::PrefixPolicy;

/// A rule for the keys under `prefix`, which the module enforces.
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleJson {
    prefix: String,
    #[serde(default)]
    reserved: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_lease_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_holders: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_held: Option<u64>,
}

#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyJson {
    rules: Vec<RuleJson>,
}

/// The active module's policy data, read linearizably.
#[utoipa::path(get, path = paths::POLICY, tag = "locks",
    responses(
        (status = 200, description = "the rules", body = PolicyJson),
        (status = 503, description = "no leader, or leadership not confirmed", body = ErrorBody)))]
pub(crate) async fn policy_get(
    State(node): State<Arc<Services>>,
) -> Result<Json<PolicyJson>, ApiError> {
    let rules = node.locks().policy().await?;
    Ok(Json(PolicyJson {
        rules: rules
            .into_iter()
            .map(|r| RuleJson {
                prefix: r.prefix,
                reserved: r.reserved,
                max_lease_ms: r.max_lease_ms,
                max_holders: r.max_holders,
                max_held: r.max_held,
            })
            .collect(),
    }))
}

/// Replace the policy data through the log (the module checks the rules).
#[utoipa::path(put, path = paths::POLICY, tag = "locks", request_body = PolicyJson,
    responses(
        (status = 200, description = "once the entry applied", body = Done),
        (status = 400, description = "a malformed body", body = ErrorBody),
        (status = 422, description = "the module refused the rules, or keeps no policy data", body = ErrorBody),
        (status = 503, description = "no leader known", body = ErrorBody)))]
pub(crate) async fn policy_put(
    State(node): State<Arc<Services>>,
    JsonBody(body): JsonBody<PolicyJson>,
) -> Result<Json<Done>, ApiError> {
    let rules = body
        .rules
        .into_iter()
        .map(|r| PrefixPolicy {
            prefix: r.prefix,
            reserved: r.reserved,
            max_lease_ms: r.max_lease_ms,
            max_holders: r.max_holders,
            max_held: r.max_held,
        })
        .collect();
    node.locks().set_policy(rules).await?;
    Ok(Json(Done {}))
}
