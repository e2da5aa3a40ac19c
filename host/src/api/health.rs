//! Health and readiness (docs/operations.md, "Health"), for supervisors
//! and load balancers.
//! Both are public (no credentials: a probe has none).
//!
//! | route | answer |
//! |---|---|
//! | `GET /healthz` | `200 {"status":"ok"}` while the process serves HTTP |
//! | `GET /readyz` | `200 {"ready":true,…}`; `503 {"ready":false,"reasons":[…],…}` while the node knows no leader, has not applied what it knows is committed, or its lock module is poisoned |
//!
//! Ready means this node can take its share of requests now: it knows a
//! leader (to answer or forward to), it has applied everything it knows
//! is committed (a restarted node replays its log first), and its state
//! machine is applying at all.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use super::paths;
use super::services::Services;

/// Whether a node is ready, and why not.
#[derive(Clone, Debug, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Readiness {
    pub ready: bool,
    /// Empty when ready.
    pub reasons: Vec<String>,
    pub leader: Option<u64>,
    pub applied_index: u64,
    pub commit_index: u64,
}

/// What readiness is judged from.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub leader: Option<u64>,
    pub applied_index: u64,
    pub commit_index: u64,
    pub poisoned: Option<String>,
    /// Why Raft stopped, if it did.
    pub stopped: Option<String>,
}

/// Ready, or why not: pure, so every reason is tested without a cluster
/// ([`Services::readiness`] reads what it judges).
pub fn judge(seen: Seen) -> Readiness {
    let mut reasons = Vec::new();
    if let Some(why) = seen.poisoned {
        reasons.push(format!("the lock module is poisoned: {why}"));
    }
    if let Some(why) = seen.stopped {
        reasons.push(format!("raft stopped: {why}"));
    }
    if seen.leader.is_none() {
        reasons.push("no leader known".into());
    }
    if seen.applied_index < seen.commit_index {
        reasons.push(format!(
            "catching up: applied {} of {} committed",
            seen.applied_index, seen.commit_index
        ));
    }
    Readiness {
        ready: reasons.is_empty(),
        reasons,
        leader: seen.leader,
        applied_index: seen.applied_index,
        commit_index: seen.commit_index,
    }
}

/// The process answers.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Health {
    /// Always `ok`.
    status: &'static str,
}

/// Liveness: the process answers (no credentials needed).
#[utoipa::path(get, path = paths::HEALTHZ, tag = "cluster",
    responses((status = 200, description = "alive", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// Readiness: a leader is known, this node has applied what is committed,
/// its module is not poisoned and Raft runs (no credentials needed).
#[utoipa::path(get, path = paths::READYZ, tag = "cluster",
    responses(
        (status = 200, description = "ready", body = Readiness),
        (status = 503, description = "not ready, with every reason", body = Readiness)))]
pub async fn readyz(State(node): State<Arc<Services>>) -> Response {
    let r = node.readiness();
    let status = if r.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(r)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen() -> Seen {
        Seen {
            leader: Some(2),
            applied_index: 7,
            commit_index: 7,
            ..Seen::default()
        }
    }

    #[test]
    fn ready_when_it_knows_a_leader_has_applied_what_is_committed_and_is_healthy() {
        let r = judge(seen());
        assert!(r.ready, "{r:?}");
        assert!(r.reasons.is_empty());
    }

    #[test]
    fn each_reason_alone_makes_it_not_ready_and_is_named() {
        let cases: [(Seen, &str); 4] = [
            (
                Seen {
                    leader: None,
                    ..seen()
                },
                "no leader known",
            ),
            (
                Seen {
                    applied_index: 5,
                    ..seen()
                },
                "catching up: applied 5 of 7 committed",
            ),
            (
                Seen {
                    poisoned: Some("trap".into()),
                    ..seen()
                },
                "the lock module is poisoned: trap",
            ),
            (
                Seen {
                    stopped: Some("fatal".into()),
                    ..seen()
                },
                "raft stopped: fatal",
            ),
        ];
        for (s, why) in cases {
            let r = judge(s);
            assert!(!r.ready);
            assert_eq!(r.reasons, vec![why.to_string()]);
        }
    }

    #[test]
    fn every_reason_is_listed() {
        let r = judge(Seen {
            leader: None,
            applied_index: 1,
            commit_index: 3,
            poisoned: Some("x".into()),
            stopped: None,
        });
        assert_eq!(r.reasons.len(), 3, "{:?}", r.reasons);
    }
}
