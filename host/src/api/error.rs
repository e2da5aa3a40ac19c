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
}

impl ApiError {
    /// An answer with `code`, whose HTTP status (and `Retry-After`) the
    /// code's own table gives ([`ErrorCode::http_status`]): one place says
    /// what each code answers, over HTTP and the native protocol alike.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::from_u16(code.http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            code,
            message: message.into(),
            leader: None,
            details: Map::new(),
        }
    }

    /// Seconds for a `Retry-After` header: a bound reached for now
    /// ([`ErrorCode::retry_soon`]).
    pub(crate) fn retry_after(&self) -> Option<u64> {
        self.code.retry_soon().then_some(1)
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::NotFound, message)
    }

    pub fn with_leader(mut self, leader: Option<u64>) -> ApiError {
        self.leader = leader;
        self
    }

    /// The one code whose status depends on the case
    /// ([`ErrorCode::http_status`]: `bad_module_key`).
    pub(super) fn with_status(mut self, status: StatusCode) -> ApiError {
        self.status = status;
        self
    }
}

/// The body of every error answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody {
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
        let retry_after = self.retry_after();
        let body = ErrorBody {
            error: self.message,
            code: self.code,
            leader: self.leader,
            details: self.details,
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(s) = retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, s.into());
        }
        response
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> ApiError {
        ApiError::new(e.code(), e.to_string()).with_leader(e.leader())
    }
}

impl From<MembershipError> for ApiError {
    fn from(e: MembershipError) -> ApiError {
        use MembershipError as M;
        let code = match &e {
            M::BadAddress { .. } => ErrorCode::BadAddress,
            M::WrongNode { .. } | M::Refused { .. } => ErrorCode::NodeRefused,
            M::LastVoter(_) => ErrorCode::LastVoter,
            M::Unreached { .. } | M::Unreachable { .. } => ErrorCode::NodeUnreachable,
            M::NotMember(_) => ErrorCode::NotMember,
            M::NotLearner(_) => ErrorCode::NotLearner,
            M::NotAudited { .. } | M::Diverged { .. } => ErrorCode::NotAudited,
            M::CatchingUp { .. } => ErrorCode::CatchingUp,
            M::Raft(_) => ErrorCode::Unavailable,
        };
        ApiError::new(code, e.to_string())
    }
}

impl From<UpgradeError> for ApiError {
    fn from(e: UpgradeError) -> ApiError {
        use UpgradeError as U;
        let code = match &e {
            U::NotLeader { .. } => ErrorCode::NotLeader,
            U::Unavailable(_) => ErrorCode::Unavailable,
            U::Busy(_) => ErrorCode::Busy,
            U::Refused(MigrateError::Stale { .. } | MigrateError::NotThePrevious { .. }) => {
                ErrorCode::StaleModule
            }
            U::Refused(MigrateError::Signature(_)) | U::RollbackUnsigned { .. } => {
                ErrorCode::BadSignature
            }
            U::Refused(MigrateError::NotNewer { .. } | MigrateError::Unversioned { .. }) => {
                ErrorCode::ModuleNotNewer
            }
            U::Refused(MigrateError::NoPrevious) => ErrorCode::NoPreviousModule,
            U::Key(_) => ErrorCode::BadModuleKey,
            U::Refused(MigrateError::Load(
                EngineError::NotWasm
                | EngineError::NotAComponent
                | EngineError::Invalid(_)
                | EngineError::HasImports(_)
                | EngineError::WrongWorld(_),
            )) => ErrorCode::InvalidModule,
            U::Refused(_) | U::Rejected(_) => ErrorCode::ModuleRefused,
            U::NoShadow => ErrorCode::NoShadow,
            U::ShadowFailed(_) | U::AlreadyActive(_) => ErrorCode::ShadowConflict,
            U::PrecheckRefused { .. } => ErrorCode::PrecheckRefused,
            U::OverNodeBound { .. } => ErrorCode::BodyTooLarge,
            U::Internal(_) => ErrorCode::Internal,
        };
        let mut err = ApiError::new(code, e.to_string());
        // `bad_module_key`'s status says which case: a well-formed key
        // that is not usable (its default, 422), too many, or not trusted.
        match &e {
            U::Key(KeyError::Full { .. }) => err = err.with_status(StatusCode::CONFLICT),
            U::Key(KeyError::NotTrusted(_)) => err = err.with_status(StatusCode::NOT_FOUND),
            _ => {}
        }
        match &e {
            UpgradeError::NotLeader { leader, .. } => err.leader = *leader,
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
        let code = match e {
            // Not leading, or leadership not confirmed: as a lock read.
            SnapshotError::Leadership(e) => return ApiError::from(e),
            SnapshotError::RaftStopped(_) => ErrorCode::Unavailable,
            SnapshotError::TimedOut(_) => ErrorCode::Timeout,
            SnapshotError::Task(_) | SnapshotError::Export(_) => ErrorCode::Internal,
        };
        ApiError::new(code, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockd_proto::WireError;

    /// Each lock-service error's answer over HTTP (status, code,
    /// `Retry-After`) and its kind on the native protocol, as they were
    /// before both came from the code's one table; a change here is a
    /// change of the public contract.
    #[test]
    fn every_service_error_answers_as_it_always_has() {
        use ServiceError as S;
        let k = || "k".to_string();
        let cases: Vec<(ServiceError, u16, bool, &str)> = vec![
            (S::EmptyKey, 400, false, "BadRequest"),
            (S::KeyTooLong(2000), 400, false, "BadRequest"),
            (S::KeyNotUtf8, 400, false, "BadRequest"),
            (S::ZeroLease, 400, false, "BadRequest"),
            (S::LeaseTooLong { got: 2, max: 1 }, 400, false, "BadRequest"),
            (S::WaitTooLong { got: 2, max: 1 }, 400, false, "BadRequest"),
            (S::ZeroLimit, 400, false, "BadRequest"),
            (S::BadLimit { got: 0, max: 1 }, 400, false, "BadRequest"),
            (S::BadTtl { got: 0, max: 1 }, 400, false, "BadRequest"),
            (
                S::FieldTooLong {
                    field: "owner",
                    got: 2,
                    max: 1,
                },
                400,
                false,
                "BadRequest",
            ),
            (S::PolicyRefused("p".into()), 422, false, "Unsupported"),
            (S::Held { key: k() }, 409, false, "Held"),
            (S::NotHeld { key: k() }, 404, false, "NotHeld"),
            (
                S::WrongToken { key: k(), given: 1 },
                409,
                false,
                "WrongToken",
            ),
            (
                S::NotHolder {
                    key: k(),
                    token: 1,
                    holder: "a".into(),
                    caller: "b".into(),
                },
                403,
                false,
                "Forbidden",
            ),
            (S::NoSession { id: 1 }, 404, false, "NotHeld"),
            (
                S::NotSessionHolder {
                    id: 1,
                    holder: "a".into(),
                    caller: "b".into(),
                },
                403,
                false,
                "Forbidden",
            ),
            (
                S::Refused {
                    key: k(),
                    reason: k(),
                },
                403,
                false,
                "Refused",
            ),
            (
                S::Quota {
                    key: k(),
                    reason: k(),
                },
                429,
                false,
                "Quota",
            ),
            (
                S::Capacity {
                    key: k(),
                    reason: k(),
                },
                507,
                false,
                "Capacity",
            ),
            (
                S::Unsupported {
                    key: k(),
                    reason: k(),
                },
                422,
                false,
                "Unsupported",
            ),
            (
                S::TooManyWaiters {
                    key: k(),
                    reason: k(),
                },
                429,
                true,
                "TooManyWaiters",
            ),
            (
                S::NotLeader {
                    id: 1,
                    leader: Some(2),
                },
                503,
                false,
                "NotLeader",
            ),
            (S::Unavailable("u".into()), 503, false, "Unavailable"),
            (S::Overloaded("o".into()), 503, true, "Unavailable"),
            (S::StateMachine("s".into()), 500, false, "Internal"),
            (
                S::ModuleFailed {
                    key: k(),
                    reason: k(),
                },
                500,
                false,
                "Internal",
            ),
        ];
        for (e, status, retry, kind) in cases {
            let code = e.code();
            let wire = WireError::of_code(code, e.to_string());
            let wire_kind = format!("{wire:?}");
            assert!(wire_kind.starts_with(kind), "{e:?}: {wire_kind}");
            let api = ApiError::from(e.clone());
            assert_eq!(api.status.as_u16(), status, "{e:?}");
            assert_eq!(api.code, code, "{e:?}");
            assert_eq!(api.retry_after().is_some(), retry, "{e:?}");
        }
    }
}
