//! Why a snapshot was not built or exported (`services::state`): its own
//! leaf, so that the HTTP error mapping (`api::error`) can name it without
//! depending on the services it is built from.

use std::time::Duration;

use thiserror::Error;

use crate::service::ServiceError;

/// Why a snapshot was not built or exported.
#[derive(Debug, Error)]
pub enum SnapshotError {
    #[error("raft stopped: {0}")]
    RaftStopped(String),
    #[error("no snapshot built within {} s", .0.as_secs())]
    TimedOut(Duration),
    /// This node does not lead, or could not confirm it.
    #[error(transparent)]
    Leadership(#[from] ServiceError),
    /// The export task did not finish (it panicked or was cancelled).
    #[error("{0}")]
    Task(String),
    #[error("cannot snapshot the state: {0}")]
    Export(String),
}
