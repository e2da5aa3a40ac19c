//! [`ApiError`]: every HTTP error answer, `{"error":"…","code":"…"}` with a
//! fitting status code, plus the leader's id when it helps and any
//! details. The code is stable ([`ErrorCode`]): from the error's own kind
//! where one is known, else from the status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::services::snapshot_error::SnapshotError;
use crate::membership::MembershipError;
use crate::modules::submit::UpgradeError;
use crate::service::ServiceError;
use lockd_core::engine::EngineError;
use lockd_core::signature::KeyError;
use lockd_core::upgrade::MigrateError;
use lockd_proto::ErrorCode;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
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
            code: code_of_status(status),
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

    pub fn with_code(mut self, code: ErrorCode) -> ApiError {
        self.code = code;
        self
    }
}

/// The code of an error that has no more precise one.
fn code_of_status(status: StatusCode) -> ErrorCode {
    match status.as_u16() {
        400 => ErrorCode::BadRequest,
        401 => ErrorCode::Unauthenticated,
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        408 => ErrorCode::RequestTimeout,
        413 => ErrorCode::BodyTooLarge,
        415 => ErrorCode::BadContentType,
        429 => ErrorCode::Overloaded,
        502 => ErrorCode::NodeUnreachable,
        503 => ErrorCode::Unavailable,
        504 => ErrorCode::Timeout,
        _ => ErrorCode::Internal,
    }
}

/// The body of every error answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub error: String,
    /// What went wrong, for a program: stable (docs/api.md, "Error codes").
    pub code: ErrorCode,
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
            code: self.code,
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
            | ServiceError::FieldTooLong { .. }
            | ServiceError::BadTtl { .. } => StatusCode::BAD_REQUEST,
            ServiceError::PolicyRefused(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ServiceError::TooManyWaiters { .. } => StatusCode::TOO_MANY_REQUESTS,
            ServiceError::Held { .. } | ServiceError::WrongToken { .. } => StatusCode::CONFLICT,
            ServiceError::NotHolder { .. } | ServiceError::NotSessionHolder { .. } => {
                StatusCode::FORBIDDEN
            }
            ServiceError::NoSession { .. } => StatusCode::NOT_FOUND,
            ServiceError::NotHeld { .. } => StatusCode::NOT_FOUND,
            ServiceError::Refused { .. } => StatusCode::FORBIDDEN,
            ServiceError::Quota { .. } => StatusCode::TOO_MANY_REQUESTS,
            ServiceError::Capacity { .. } => StatusCode::INSUFFICIENT_STORAGE,
            ServiceError::Unsupported { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ServiceError::NotLeader { .. }
            | ServiceError::Unavailable(_)
            | ServiceError::Overloaded(_) => StatusCode::SERVICE_UNAVAILABLE,
            ServiceError::StateMachine(_) | ServiceError::ModuleFailed { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
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
            ..ApiError::new(status, e.to_string())
                .with_leader(leader)
                .with_code(e.code())
        }
    }
}

impl From<MembershipError> for ApiError {
    fn from(e: MembershipError) -> ApiError {
        use MembershipError as M;
        let (status, code) = match &e {
            M::BadAddress { .. } => (StatusCode::BAD_REQUEST, ErrorCode::BadAddress),
            M::WrongNode { .. } | M::Refused { .. } => {
                (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::NodeRefused)
            }
            M::LastVoter(_) => (StatusCode::CONFLICT, ErrorCode::LastVoter),
            M::Unreached { .. } | M::Unreachable { .. } => {
                (StatusCode::BAD_GATEWAY, ErrorCode::NodeUnreachable)
            }
            M::NotMember(_) => (StatusCode::NOT_FOUND, ErrorCode::NotMember),
            M::NotLearner(_) => (StatusCode::CONFLICT, ErrorCode::NotLearner),
            M::NotAudited { .. } | M::Diverged { .. } => {
                (StatusCode::CONFLICT, ErrorCode::NotAudited)
            }
            M::CatchingUp { .. } => (StatusCode::GATEWAY_TIMEOUT, ErrorCode::CatchingUp),
            M::Raft(_) => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable),
        };
        ApiError::new(status, e.to_string()).with_code(code)
    }
}

impl From<UpgradeError> for ApiError {
    fn from(e: UpgradeError) -> ApiError {
        use UpgradeError as U;
        let (status, code) = match &e {
            U::NotLeader { .. } => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::NotLeader),
            U::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable),
            U::Busy(_) => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Busy),
            U::Refused(MigrateError::Stale { .. }) => {
                (StatusCode::CONFLICT, ErrorCode::StaleModule)
            }
            U::Refused(MigrateError::Signature(_)) | U::RollbackUnsigned { .. } => {
                (StatusCode::FORBIDDEN, ErrorCode::BadSignature)
            }
            U::Refused(MigrateError::NotNewer { .. } | MigrateError::Unversioned { .. }) => {
                (StatusCode::CONFLICT, ErrorCode::ModuleNotNewer)
            }
            U::Refused(MigrateError::NoPrevious) => {
                (StatusCode::NOT_FOUND, ErrorCode::NoPreviousModule)
            }
            U::Refused(MigrateError::NotThePrevious { .. }) => {
                (StatusCode::CONFLICT, ErrorCode::StaleModule)
            }
            // Well-formed (64 hex digits) but not a usable key.
            U::Key(KeyError::NotAKey { .. }) => {
                (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::BadModuleKey)
            }
            U::Key(KeyError::Full { .. }) => (StatusCode::CONFLICT, ErrorCode::BadModuleKey),
            U::Key(KeyError::NotTrusted(_)) => (StatusCode::NOT_FOUND, ErrorCode::BadModuleKey),
            U::Refused(MigrateError::Load(
                EngineError::NotWasm
                | EngineError::NotAComponent
                | EngineError::Invalid(_)
                | EngineError::HasImports(_)
                | EngineError::WrongWorld(_),
            )) => (StatusCode::BAD_REQUEST, ErrorCode::InvalidModule),
            U::Refused(_) | U::Rejected(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::ModuleRefused)
            }
            U::NoShadow => (StatusCode::NOT_FOUND, ErrorCode::NoShadow),
            U::ShadowFailed(_) | U::AlreadyActive(_) => {
                (StatusCode::CONFLICT, ErrorCode::ShadowConflict)
            }
            U::PrecheckRefused { .. } => (StatusCode::CONFLICT, ErrorCode::PrecheckRefused),
            U::OverNodeBound { .. } => (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::BodyTooLarge),
            U::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal),
        };
        let mut err = ApiError::new(status, e.to_string()).with_code(code);
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
            UpgradeError::PrecheckRefused {
                index, verdicts, ..
            } => {
                err.details.insert("index".into(), json!(index));
                err.details.insert("verdicts".into(), json!(verdicts));
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
