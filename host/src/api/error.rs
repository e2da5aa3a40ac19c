//! [`ApiError`]: every HTTP error answer, `{"error":"…"}` with a fitting
//! status code, plus the leader's id when it helps and any details.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::services::SnapshotError;
use crate::membership::MembershipError;
use crate::modules::submit::UpgradeError;
use crate::service::ServiceError;
use lockd_core::engine::EngineError;
use lockd_core::signature::KeyError;
use lockd_core::upgrade::MigrateError;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// The leader to ask instead, when this node knows it.
    pub leader: Option<u64>,
    /// More fields of the JSON body (an upgrade rejected at apply says where).
    pub details: Map<String, Value>,
    /// Seconds for a `Retry-After` header (a bound reached for now).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            leader: None,
            details: Map::new(),
            retry_after: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    pub fn with_leader(mut self, leader: Option<u64>) -> ApiError {
        self.leader = leader;
        self
    }
}

/// The body of every error answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub error: String,
    /// The leader to ask instead, when this node knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<u64>,
    /// More, by error (an upgrade rejected at apply says at which index).
    #[serde(flatten)]
    pub details: Map<String, Value>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.message,
            leader: self.leader,
            details: self.details,
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(s) = self.retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, s.into());
        }
        response
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> ApiError {
        let status = match &e {
            ServiceError::EmptyKey
            | ServiceError::KeyTooLong(_)
            | ServiceError::KeyNotUtf8
            | ServiceError::ZeroLease
            | ServiceError::LeaseTooLong { .. }
            | ServiceError::WaitTooLong { .. }
            | ServiceError::ZeroLimit
            | ServiceError::BadLimit { .. }
            | ServiceError::FieldTooLong { .. } => StatusCode::BAD_REQUEST,
            ServiceError::PolicyRefused(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ServiceError::TooManyWaiters { .. } => StatusCode::TOO_MANY_REQUESTS,
            ServiceError::Held { .. } | ServiceError::WrongToken { .. } => StatusCode::CONFLICT,
            ServiceError::NotHolder { .. } => StatusCode::FORBIDDEN,
            ServiceError::NotHeld { .. } => StatusCode::NOT_FOUND,
            ServiceError::Refused { .. } => StatusCode::FORBIDDEN,
            ServiceError::Quota { .. } => StatusCode::TOO_MANY_REQUESTS,
            ServiceError::Capacity { .. } => StatusCode::INSUFFICIENT_STORAGE,
            ServiceError::Unsupported { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ServiceError::NotLeader { .. }
            | ServiceError::Unavailable(_)
            | ServiceError::Overloaded(_) => StatusCode::SERVICE_UNAVAILABLE,
            ServiceError::StateMachine(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let leader = match &e {
            ServiceError::NotLeader { leader, .. } => *leader,
            _ => None,
        };
        let retry_after = matches!(
            e,
            ServiceError::TooManyWaiters { .. } | ServiceError::Overloaded(_)
        )
        .then_some(1);
        ApiError {
            retry_after,
            ..ApiError::new(status, e.to_string()).with_leader(leader)
        }
    }
}

impl From<MembershipError> for ApiError {
    fn from(e: MembershipError) -> ApiError {
        let status = match &e {
            MembershipError::BadAddress { .. } => StatusCode::BAD_REQUEST,
            MembershipError::WrongNode { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            MembershipError::LastVoter(_) => StatusCode::CONFLICT,
            MembershipError::Refused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            MembershipError::Unreached { .. } => StatusCode::BAD_GATEWAY,
            MembershipError::NotMember(_) => StatusCode::NOT_FOUND,
            MembershipError::NotLearner(_)
            | MembershipError::NotAudited { .. }
            | MembershipError::Diverged { .. } => StatusCode::CONFLICT,
            MembershipError::Unreachable { .. } => StatusCode::BAD_GATEWAY,
            MembershipError::CatchingUp { .. } => StatusCode::GATEWAY_TIMEOUT,
            MembershipError::Raft(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError::new(status, e.to_string())
    }
}

impl From<UpgradeError> for ApiError {
    fn from(e: UpgradeError) -> ApiError {
        let status = match &e {
            UpgradeError::NotLeader { .. }
            | UpgradeError::Unavailable(_)
            | UpgradeError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            UpgradeError::Refused(MigrateError::Stale { .. }) => StatusCode::CONFLICT,
            UpgradeError::Refused(MigrateError::Signature(_)) => StatusCode::FORBIDDEN,
            UpgradeError::Key(KeyError::NotAKey { .. }) => StatusCode::BAD_REQUEST,
            UpgradeError::Key(KeyError::Full { .. }) => StatusCode::CONFLICT,
            UpgradeError::Key(KeyError::NotTrusted(_)) => StatusCode::NOT_FOUND,
            UpgradeError::Refused(MigrateError::Load(
                EngineError::NotWasm
                | EngineError::NotAComponent
                | EngineError::Invalid(_)
                | EngineError::HasImports(_)
                | EngineError::WrongWorld(_),
            )) => StatusCode::BAD_REQUEST,
            UpgradeError::Refused(_) | UpgradeError::Rejected(_) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            UpgradeError::NoShadow => StatusCode::NOT_FOUND,
            UpgradeError::ShadowFailed(_) | UpgradeError::AlreadyActive(_) => StatusCode::CONFLICT,
            UpgradeError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let mut err = ApiError::new(status, e.to_string());
        match &e {
            UpgradeError::NotLeader { leader, .. } => err.leader = *leader,
            UpgradeError::Busy(_) => err.retry_after = Some(1),
            UpgradeError::Rejected(reply) => {
                err.details.insert("index".into(), json!(reply.index));
                err.details.insert("result".into(), json!(reply.result));
                err.details
                    .insert("module_hash".into(), json!(reply.module_hash));
                err.details.insert("reason".into(), json!(reply.reason));
            }
            _ => {}
        }
        err
    }
}

impl From<SnapshotError> for ApiError {
    fn from(e: SnapshotError) -> ApiError {
        let status = match e {
            // Not leading, or leadership not confirmed: as a lock read.
            SnapshotError::Leadership(e) => return ApiError::from(e),
            SnapshotError::RaftStopped(_) => StatusCode::SERVICE_UNAVAILABLE,
            SnapshotError::TimedOut(_) => StatusCode::GATEWAY_TIMEOUT,
            SnapshotError::Task(_) | SnapshotError::Export(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}
