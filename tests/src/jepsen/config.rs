//! What a run does, and what it reports.

use std::path::PathBuf;
use std::time::Duration;

use super::check::Violation;
use super::nemesis::{Event, Fault, ALL_FAULTS};

/// A server other than the normal `lockd`: a deliberately broken build for
/// showing the checkers catch it.
#[derive(Clone, Debug)]
pub struct Server {
    pub bin: PathBuf,
    pub env: Vec<(String, String)>,
}

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub nodes: u64,
    pub clients: usize,
    pub keys: usize,
    pub duration: Duration,
    pub seed: u64,
    pub lease_ms: u64,
    /// One in this many holders pauses past its lease before writing.
    pub pause_one_in: u64,
    /// One in this many client operations is a ledger operation instead: a
    /// lock with a lease longer than the run on a key of its own, released
    /// half of the time, checked against the final state.
    pub ledger_one_in: u64,
    /// One in this many rounds the worker's process dies (0: never): within
    /// 40 ms of invoking its acquire, while the request is on its way or
    /// waits, or holding what it was granted; it is never released, and
    /// the worker goes on as a new process (a new client and connection).
    pub crash_one_in: u64,
    /// One in this many rounds on a mutex goes over the HTTP/JSON routes
    /// instead of the native protocol (0: never; `super::http_locks`).
    pub http_one_in: u64,
    pub faults: Vec<Fault>,
    /// Test-only: a register that does not check tokens.
    pub unfenced_register: bool,
    /// Run each node in its own network namespace (needed for partitions).
    pub hosts: bool,
    /// Upgrade the lock module to version 2 (`guest-sm-world01-v2`) this long into
    /// the run, between faults; retried until it is in (the request may
    /// meet a dying leader). The run then also checks that every node ends
    /// on version 2.
    pub upgrade_at: Option<Duration>,
    /// Every node runs this server instead of `lockd`.
    pub server: Option<Server>,
    /// Clients of every kind (mutexes, readers and writers, semaphore
    /// slots; see [`super::workload`]) on the reference module of world
    /// 0.2, put in by an upgrade before the clients start. Not with
    /// `upgrade_at`, whose version 2 is of world 0.1.
    pub mixed: bool,
    /// With `mixed`: the module is world 0.4's built-in one (0.3's, a
    /// superset of 0.2, with the election policy) instead, and the workers
    /// also hold keys in sessions ([`super::sessions`]) and campaign in
    /// elections at three priorities.
    pub sessions: bool,
    /// TLS between every node and client, and authentication on (the
    /// clients present the `worker` token, see [`crate::secure`]).
    pub secure: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            nodes: 3,
            clients: 6,
            keys: 2,
            duration: Duration::from_secs(12),
            seed: 1,
            lease_ms: 800,
            pause_one_in: 8,
            ledger_one_in: 8,
            crash_one_in: 0,
            http_one_in: 0,
            faults: ALL_FAULTS.to_vec(),
            unfenced_register: false,
            hosts: false,
            upgrade_at: None,
            server: None,
            mixed: false,
            sessions: false,
            secure: true,
        }
    }
}

#[derive(Debug)]
pub struct Report {
    pub ops: usize,
    pub granted: usize,
    /// What the nemesis did, in order.
    pub faults: Vec<Event>,
    /// How often the leader (or its term) changed between observations.
    pub leader_changes: usize,
    /// Reads and writes the fenced register refused as stale.
    pub rejected_stale: u64,
    /// Keepalives that renewed the lock held through the whole run.
    pub keeper_renewals: u64,
    /// Ledger locks checked against the final state.
    pub ledger_keys: usize,
    /// The most readers, and the most semaphore slots, that held one key
    /// at once as the clients saw it (0 in a run that is not mixed).
    pub most_readers: usize,
    pub most_slots: usize,
    pub violations: Vec<Violation>,
}
