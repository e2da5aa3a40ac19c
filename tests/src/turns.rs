//! Turns on the machine for tests that share one test process.
//!
//! The process tests live in one test binary, and libtest runs its tests on
//! `RUST_TEST_THREADS` threads (the number of cores by default), so two
//! clusters of real `lockd` processes usually run at once. That is fine for
//! most tests: their waits are generous, and tests have always run two at a
//! time within a file. It is not fine for a test that
//!
//! * measures a time window (a lease that must still be held at one moment
//!   and gone by another, keepalives that must arrive within a lease), where
//!   a second cluster competing for two cores moves the result; or
//! * loads the whole machine (continuous client load, guests burning their
//!   whole fuel budget, a nested `cargo build`), which would move the time
//!   windows of whatever runs beside it.
//!
//! Such a test takes the machine [`alone`] for as long as it needs it; every
//! [`Cluster`](crate::cluster::Cluster) holds a [`shared`] turn, so clusters
//! run side by side but never beside a test that is alone. A test waiting to
//! be alone goes before shared turns asked for after it, so it is not
//! starved.
//!
//! Other processes are not counted: nothing must run beside this test
//! binary (`scripts/test.sh` runs the other suites after it; even at idle
//! priority, a CPU-bound process beside it slowed these tests by half).
//!
//! Turns are per thread: a thread that is alone, or already holds a shared
//! turn, gets further turns at once. A test that is alone must therefore
//! start its clusters on its own thread (a cluster started on a thread it
//! spawned would wait for the test to end).

use std::collections::HashMap;
use std::sync::{Condvar, LazyLock, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;

#[derive(Default)]
struct State {
    /// Shared turns held, per thread.
    shared: HashMap<ThreadId, usize>,
    /// The thread that is alone, if any.
    alone: Option<ThreadId>,
    /// Threads waiting to be alone.
    waiting: usize,
}

#[derive(Default)]
struct Turns {
    state: Mutex<State>,
    changed: Condvar,
}

static TURNS: LazyLock<Turns> = LazyLock::new(Turns::default);

impl Turns {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait(guard)
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A turn on the machine; released when dropped.
#[must_use = "the turn ends when this is dropped"]
pub struct Turn {
    kind: Kind,
}

enum Kind {
    Shared(ThreadId),
    Alone,
    /// Asked for by a thread that is alone: nothing to release.
    Within,
}

/// A turn beside other shared turns, never beside a test that is alone.
pub fn shared() -> Turn {
    let me = std::thread::current().id();
    let mut st = TURNS.lock();
    loop {
        if st.alone == Some(me) {
            return Turn { kind: Kind::Within };
        }
        // A thread that already holds a shared turn must not wait for a
        // test that waits for that very turn to end.
        let mine = st.shared.contains_key(&me);
        if st.alone.is_none() && (st.waiting == 0 || mine) {
            *st.shared.entry(me).or_insert(0) += 1;
            return Turn {
                kind: Kind::Shared(me),
            };
        }
        st = TURNS.wait(st);
    }
}

/// The machine to this test alone: waits until no other turn is held, and
/// keeps every other test's clusters from starting until it is dropped.
pub fn alone() -> Turn {
    let me = std::thread::current().id();
    let mut st = TURNS.lock();
    if st.alone == Some(me) {
        return Turn { kind: Kind::Within };
    }
    assert!(
        !st.shared.contains_key(&me),
        "take the machine alone before starting a cluster, not while one runs"
    );
    st.waiting += 1;
    loop {
        if st.alone.is_none() && st.shared.is_empty() {
            st.waiting -= 1;
            st.alone = Some(me);
            return Turn { kind: Kind::Alone };
        }
        st = TURNS.wait(st);
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut st = TURNS.lock();
        match self.kind {
            Kind::Shared(id) => {
                if let Some(n) = st.shared.get_mut(&id) {
                    *n -= 1;
                    if *n == 0 {
                        st.shared.remove(&id);
                    }
                }
            }
            Kind::Alone => st.alone = None,
            Kind::Within => return,
        }
        drop(st);
        TURNS.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn alone_excludes_shared_turns_and_nests() {
        let t = alone();
        let inner = shared();
        let again = alone();
        drop((inner, again));
        let running = Arc::new(AtomicUsize::new(0));
        let r = running.clone();
        let other = std::thread::spawn(move || {
            let _turn = shared();
            r.fetch_add(1, Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(running.load(Ordering::SeqCst), 0, "ran beside a test alone");
        drop(t);
        other.join().unwrap();
        assert_eq!(running.load(Ordering::SeqCst), 1);
    }
}
