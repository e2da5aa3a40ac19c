//! Operations as the clients saw them.

use std::sync::Mutex;
use std::time::Instant;

pub use lockd_proto::LockMode;

/// What a client asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// `limit` holders at once in `mode`: exclusive with limit 1 is a
    /// mutex, exclusive with limit N a semaphore of N, shared with limit N
    /// one of N readers.
    /// `lease_ms` of an acquire in a session is what was left of the
    /// session's promise when it was invoked.
    Acquire {
        lease_ms: u64,
        wait_ms: u64,
        mode: LockMode,
        limit: u32,
        session: bool,
    },
    Release {
        token: u64,
    },
}

impl Call {
    /// A mutex acquire (the seed's lock).
    pub fn acquire(lease_ms: u64, wait_ms: u64) -> Call {
        Call::Acquire {
            lease_ms,
            wait_ms,
            mode: LockMode::Exclusive,
            limit: 1,
            session: false,
        }
    }

    /// An acquire of anything but a mutex.
    pub fn is_shared_or_counted(&self) -> bool {
        matches!(self, Call::Acquire { mode, limit, .. } if *mode != LockMode::Exclusive || *limit != 1)
    }

    /// An acquire in a session, whose end moves with the session's
    /// keepalives (see [`super::sessions`]).
    pub fn in_session(&self) -> bool {
        matches!(self, Call::Acquire { session: true, .. })
    }
}

/// What it got back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ret {
    Granted(u64),
    Released,
    /// The key was held (acquire after its wait).
    Held,
    /// Not held, or not by this token.
    Refused,
    /// Refused by policy, a quota, or as unsupported: never right in a run
    /// without policy data, on a module that has every feature asked for.
    Denied(String),
    /// No answer (timeout, unreachable, leadership change): it may or may
    /// not have taken effect.
    Unknown,
}

#[derive(Clone, Debug)]
pub struct Op {
    pub client: usize,
    pub key: String,
    pub call: Call,
    /// Milliseconds since the run started.
    pub invoke: f64,
    pub complete: f64,
    pub ret: Ret,
}

/// A time a client held a key by the server's promise: from the grant's
/// answer to the earlier of its release's invoke and the end of the lease
/// promised (the lease asked, from the acquire's invocation; the workload's
/// holders do not renew) — the window in which it may touch what the lock
/// protects. Never the client library's deadline: it is under test too.
#[derive(Clone, Debug)]
pub struct Holding {
    pub client: usize,
    pub key: String,
    pub token: u64,
    pub mode: LockMode,
    pub limit: u32,
    pub from: f64,
    pub until: f64,
}

/// The history of a run, shared by all clients.
pub struct History {
    /// Milliseconds since the run started: the machine's clock, or the
    /// simulation's.
    clock: Box<dyn Fn() -> f64 + Send + Sync>,
    ops: Mutex<Vec<Op>>,
    holdings: Mutex<Vec<Holding>>,
    /// The acquires answered at their first try (client, invoke bits):
    /// no earlier try of theirs can have been granted unseen.
    first_try: Mutex<std::collections::HashSet<(usize, u64)>>,
    /// Counts of what happened to the clients ([`History::note`]).
    notes: Mutex<std::collections::BTreeMap<&'static str, u64>>,
}

impl History {
    /// A history on the machine's clock, from now.
    pub fn new() -> History {
        let start = Instant::now();
        History::with_clock(move || start.elapsed().as_secs_f64() * 1e3)
    }

    /// A history on `clock` (milliseconds since the run started).
    pub fn with_clock(clock: impl Fn() -> f64 + Send + Sync + 'static) -> History {
        History {
            clock: Box::new(clock),
            ops: Mutex::new(Vec::new()),
            holdings: Mutex::new(Vec::new()),
            first_try: Mutex::default(),
            notes: Mutex::default(),
        }
    }

    pub fn now(&self) -> f64 {
        (self.clock)()
    }

    pub fn record_holding(&self, h: Holding) {
        self.holdings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(h);
    }

    pub fn holdings(&self) -> Vec<Holding> {
        self.holdings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Say that `client`'s acquire invoked at `invoke` was answered at
    /// its first try.
    pub fn answered_first_try(&self, client: usize, invoke: f64) {
        self.first_try
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((client, invoke.to_bits()));
    }

    /// Count one more of `what` (a worker's process died, an answer over
    /// HTTP): for the simulation's coverage.
    pub fn note(&self, what: &'static str) {
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        *notes.entry(what).or_default() += 1;
    }

    /// How many of `what` were noted.
    pub fn noted(&self, what: &str) -> u64 {
        let notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        notes.get(what).copied().unwrap_or(0)
    }

    /// The acquires answered at their first try.
    pub fn first_tries(&self) -> std::collections::HashSet<(usize, u64)> {
        self.first_try
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Record `client`'s `call` on `key`, invoked at `invoke` and
    /// completing now with `ret`.
    pub fn completed(&self, client: usize, key: &str, call: Call, invoke: f64, ret: Ret) {
        self.record(Op {
            client,
            key: key.to_string(),
            call,
            invoke,
            complete: self.now(),
            ret,
        });
    }

    pub fn record(&self, op: Op) {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).push(op);
    }

    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Default for History {
    fn default() -> Self {
        Self::new()
    }
}
