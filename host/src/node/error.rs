//! Why a node did not start ([`NodeError`]).

use thiserror::Error;

use crate::auth::AuthFileError;
use crate::raft::log_store::LogOpenError;
use crate::raft::state_machine::SmOpenError;
use lockd_core::engine::EngineError;

#[derive(Debug, Error)]
pub enum NodeError {
    #[error("invalid configuration: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("data dir {path}: {reason}")]
    DataDir { path: String, reason: String },
    #[error("data dir {path} belongs to node {found}, not node {want}")]
    WrongNode { path: String, found: u64, want: u64 },
    #[error("data dir {path} was written by a node with a different wasm engine; refusing to start. Differences (data dir != this binary): {differences}")]
    EngineMismatch { path: String, differences: String },
    #[error("wasm engine: {0}")]
    Engine(#[from] EngineError),
    #[error("state machine: {0}")]
    StateMachine(#[from] SmOpenError),
    #[error("raft log: {0}")]
    Log(#[from] LogOpenError),
    #[error("raft: {0}")]
    Raft(String),
    #[error("TLS: {0}")]
    Tls(#[from] lockd_net::tls::TlsError),
    #[error("{0}")]
    Auth(#[from] AuthFileError),
    #[error("cluster id: {0}")]
    Cluster(#[from] crate::cluster_id::ClusterIdError),
}
