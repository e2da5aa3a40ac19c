//! The replicated state as the admin routes and metrics read it: the
//! audit report, capacity and module keys; snapshots built or exported on
//! request; and the counters and latencies of the log and state machine.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::snapshot_error::SnapshotError;

/// Counts of one instance of a node ([`Services::instance_counts`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct InstanceCounts {
    /// A torn tail its log cut when it opened (0 or 1).
    pub torn_tails_cut: u64,
    pub snapshots_built: u64,
    pub snapshots_installed: u64,
    /// Grants it released as leader because their caller had gone.
    pub phantom_releases: u64,
}
use super::Services;
use crate::raft::log_store::LogStats;
use crate::raft::state_machine::SmLatency;
use crate::service::ServiceError;
use lockd_proto::signature::ModuleKeys;
use lockd_proto::{AuditReport, CapacityStatus, SnapshotBuilt};

impl Services {
    /// This node's determinism audit points.
    pub fn audit_report(&self) -> AuditReport {
        self.parts.sm.audit_report()
    }

    /// The capacity bounds and their use, at this node's applied index.
    pub fn capacity(&self) -> CapacityStatus {
        self.parts.sm.capacity()
    }

    /// The trusted module keys, hex, in key order.
    pub fn module_keys(&self) -> ModuleKeys {
        ModuleKeys {
            keys: self.parts.sm.module_keys().hex(),
        }
    }

    /// Build a snapshot of this node's state now (and compact its log),
    /// waiting up to `wait` for it. openraft builds one at a time: asked
    /// during a build, this waits for that build.
    pub async fn build_snapshot(&self, wait: Duration) -> Result<SnapshotBuilt, SnapshotError> {
        let before = self.parts.sm.snapshot_stats().built;
        self.parts
            .raft
            .trigger()
            .snapshot()
            .await
            .map_err(|e| SnapshotError::RaftStopped(e.to_string()))?;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let s = self.parts.sm.snapshot_stats();
            if s.built > before {
                return Ok(SnapshotBuilt {
                    node: self.parts.id,
                    index: s.last_index,
                    bytes: s.last_bytes,
                    build_ms: s.last_build_us / 1000,
                });
            }
            if tokio::time::Instant::now() > deadline {
                return Err(SnapshotError::TimedOut(wait));
            }
            // The stats move when the build ends; nothing to await on.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The state as a snapshot file, with its index: after a read barrier
    /// (this node leads, and has applied everything committed when asked),
    /// so it holds every grant acknowledged before.
    pub(crate) async fn export_snapshot(&self) -> Result<(u64, Vec<u8>), SnapshotError> {
        self.parts
            .raft
            .ensure_linearizable()
            .await
            .map_err(|e| ServiceError::from_raft(self.parts.id, e, |e| e.to_string()))?;
        let sm = self.parts.sm.clone();
        // Serialising the whole state blocks: off the async workers.
        crate::blocking::run(move || sm.export())
            .await
            .map_err(SnapshotError::Task)?
            .map_err(SnapshotError::Export)
    }

    /// Times the leader this node knows changed (to another node or to
    /// none).
    pub fn leader_changes(&self) -> u64 {
        self.parts.leader_changes.load(Ordering::Relaxed)
    }

    /// Snapshot sends this node made as leader: (installed, failed,
    /// abandoned) (`raft::snapshot_send`).
    pub fn snapshot_sends(&self) -> (u64, u64, u64) {
        self.parts.snapshot_sends.read()
    }

    /// Snapshot sends under way now.
    pub(crate) fn snapshot_sends_in_flight(&self) -> u64 {
        self.parts.snapshot_sends.in_flight()
    }

    /// Pre-vote rounds this node asked: (won, lost) (`raft::stand`).
    pub(crate) fn prevote_rounds(&self) -> (u64, u64) {
        self.parts.silence.rounds()
    }

    /// What this instance counted since it started (the simulation's
    /// coverage reads it from every instance of a node).
    pub fn instance_counts(&self) -> InstanceCounts {
        let snaps = self.parts.sm.snapshot_stats();
        InstanceCounts {
            torn_tails_cut: self.wal_stats().torn_tails_cut.load(Ordering::Relaxed),
            snapshots_built: snaps.built,
            snapshots_installed: snaps.installed,
            phantom_releases: self
                .parts
                .locks
                .stats
                .phantom_releases
                .load(Ordering::Relaxed),
        }
    }

    /// The log's counters and fsync latency.
    pub(crate) fn wal_stats(&self) -> &LogStats {
        self.parts.log.stats()
    }

    /// Every entry the log holds in memory (all after the last purge),
    /// each as its log id and its encoded bytes: for checkers that compare
    /// logs across nodes (the simulation's log matching).
    pub fn log_entries(&self) -> Vec<(crate::raft::LogId, Vec<u8>)> {
        self.parts.log.entries_encoded()
    }

    /// The state machine's apply and module swap latencies.
    pub(crate) fn apply_latency(&self) -> &SmLatency {
        self.parts.sm.latency()
    }

    /// Where each write's time goes (`telemetry::stages`).
    pub fn stages(&self) -> &crate::telemetry::Stages {
        &self.parts.sm.latency().stages
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;
    use crate::api::ApiError;

    /// The snapshot routes answer as they did when the handlers built
    /// these errors themselves.
    #[test]
    fn each_snapshot_error_keeps_its_http_answer() {
        let cases = [
            (
                SnapshotError::RaftStopped("gone".into()),
                StatusCode::SERVICE_UNAVAILABLE,
                "raft stopped: gone",
            ),
            (
                SnapshotError::TimedOut(Duration::from_secs(300)),
                StatusCode::GATEWAY_TIMEOUT,
                "no snapshot built within 300 s",
            ),
            (
                SnapshotError::Task("panicked".into()),
                StatusCode::INTERNAL_SERVER_ERROR,
                "panicked",
            ),
            (
                SnapshotError::Export("disk full".into()),
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot snapshot the state: disk full",
            ),
        ];
        for (e, status, message) in cases {
            let a = ApiError::from(e);
            assert_eq!((a.status, a.message.as_str()), (status, message));
        }
        let why = || ServiceError::Unavailable("no leader".into());
        let (a, b) = (
            ApiError::from(SnapshotError::from(why())),
            ApiError::from(why()),
        );
        assert_eq!(
            (a.status, a.message, a.leader),
            (b.status, b.message, b.leader)
        );
    }
}
