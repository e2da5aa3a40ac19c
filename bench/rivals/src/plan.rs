//! What every driver's clients share (`drive`, `zk_drive`): one client's
//! plan (its keys, when it starts and stops), the run's progress (for the
//! failover measurement) and what the client did.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one client did in a run.
#[derive(Default)]
pub struct ClientRun {
    pub cycles: u64,
    pub errors: u64,
    pub last_error: Option<String>,
    /// The first errors, with when they happened.
    pub error_log: Vec<(Instant, String)>,
    /// When each successful acquire started and finished.
    pub acquired: Vec<(Instant, Instant)>,
}

/// Shared by a run's clients: the start of the latest successful acquire,
/// so that a failover measurement can stop as soon as service is back.
pub struct Progress {
    base: Instant,
    last_success_start_ns: AtomicU64,
}

impl Progress {
    pub fn new() -> Arc<Progress> {
        Arc::new(Progress {
            base: Instant::now(),
            last_success_start_ns: AtomicU64::new(0),
        })
    }

    fn record(&self, start: Instant) {
        let ns = start.saturating_duration_since(self.base).as_nanos() as u64;
        self.last_success_start_ns.fetch_max(ns, Ordering::Relaxed);
    }

    /// Whether an acquire that started at or after `t` has succeeded.
    pub fn succeeded_since(&self, t: Instant) -> bool {
        let ns = t.saturating_duration_since(self.base).as_nanos() as u64;
        self.last_success_start_ns.load(Ordering::Relaxed) >= ns
    }
}

/// One client's part in a run: its number (its keys), whether all want
/// one key, and when to stop.
pub struct Plan {
    pub i: usize,
    pub contended: bool,
    pub until: Instant,
    pub stop: Arc<AtomicBool>,
    pub progress: Arc<Progress>,
    /// For a timed run: every client waits here once connected, and then
    /// runs this long (its `until` is set then).
    pub start: Option<(Arc<tokio::sync::Barrier>, Duration)>,
}

impl Plan {
    /// This plan for client number `i`.
    pub fn for_client(&self, i: usize) -> Plan {
        Plan {
            i,
            contended: self.contended,
            until: self.until,
            stop: self.stop.clone(),
            progress: self.progress.clone(),
            start: self.start.clone(),
        }
    }

    /// Connected: wait for every other client of a timed run, then start
    /// the clock. Nothing to wait for in a run that ends at a given time.
    pub async fn begin(&mut self) {
        if let Some((ready, length)) = self.start.take() {
            ready.wait().await;
            self.until = Instant::now() + length;
        }
    }
}

/// The keys of one client. After a failure whose outcome is unknown (the
/// lock may have been taken, e.g. its leader died while answering), an
/// uncontended client moves on to a fresh key rather than wait for its own
/// orphaned lock's lease.
pub struct Keys {
    client: usize,
    contended: bool,
    generation: u64,
}

impl Keys {
    pub fn new(client: usize, contended: bool) -> Keys {
        Keys {
            client,
            contended,
            generation: 0,
        }
    }

    pub fn current(&self) -> String {
        if self.contended {
            "bench/contended".into()
        } else {
            format!("bench/own/{}/{}", self.client, self.generation)
        }
    }

    pub fn next(&mut self) -> String {
        self.generation += 1;
        self.current()
    }
}

impl ClientRun {
    /// An acquire that started at `start` holds the lock now.
    pub fn acquired(&mut self, start: Instant, progress: &Progress) {
        self.acquired.push((start, Instant::now()));
        progress.record(start);
    }

    /// A failed operation; the first few that `log` are kept with a time.
    pub fn fail(&mut self, error: String, log: bool) {
        self.errors += 1;
        if log && self.error_log.len() < 20 {
            self.error_log.push((Instant::now(), error.clone()));
        }
        self.last_error = Some(error);
    }
}

/// Whether a client's run is over: its time is up or it was stopped.
pub fn done(until: Instant, stop: &AtomicBool) -> bool {
    Instant::now() >= until || stop.load(Ordering::Relaxed)
}
