//! The lease clock: the time the leader's lock table runs on, and the
//! drift bound lease safety assumes.
//!
//! A lease is timed on the leader's clock and promised on the caller's:
//! the caller may count its lease from when it sent the acquire, for the
//! lease it asked. If the leader's clock ran fast by a factor `1 + ρ`, a
//! lease of `L` timed by it would end after `L / (1 + ρ)` of real time:
//! early, while the holder still holds. So the leader times every lease
//! (grants, keepalives, the restart of inherited leases) `L` plus
//! [`DRIFT_BOUND`] of `L`: safe for any leader clock that runs fast by up
//! to that bound, the price being a lease that may end up to 1 % late.
//! Only the rate matters: the clock is monotonic (tokio's `Instant`), so
//! an offset or a jump of the wall clock changes nothing. A paused leader
//! is no danger to it either: the clock counts the pause, so on waking the
//! leader ends the leases that ran out meanwhile, and it grants nothing
//! without committing and refuses nothing without its read barrier.
//!
//! Production uses [`Monotonic`]. The simulation gives each node a clock
//! that runs at a rate of its own (`lockd::node::Seams::lease_clock`),
//! inside the bound in every run and beyond it in a negative control.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// The largest rate error of the leader's clock that lease safety allows,
/// as a fraction (1 %: far beyond a quartz oscillator's 0.01 %, to leave
/// room for virtual machines' clocks).
pub const DRIFT_BOUND: (u64, u64) = (1, 100);

/// The time the lock table runs on.
pub trait LeaseClock: Send + Sync + 'static {
    /// Time since the clock started.
    fn now(&self) -> Duration;
    /// When, on tokio's clock, this clock will read `at` (for sleeping).
    fn when(&self, at: Duration) -> Instant;
}

/// The machine's monotonic clock, through tokio (so that the simulation's
/// paused clock is the one read there).
pub struct Monotonic {
    epoch: Instant,
}

impl Monotonic {
    /// A clock that reads zero now.
    pub fn start() -> Monotonic {
        Monotonic {
            epoch: Instant::now(),
        }
    }
}

impl LeaseClock for Monotonic {
    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.epoch)
    }

    fn when(&self, at: Duration) -> Instant {
        self.epoch + at
    }
}

/// The lock table's time: the lease clock slowed by the drift bound, so
/// that every lease, wait and timer of the table lasts that much longer
/// on the clock (the table and its scenario scripts keep exact times).
pub(crate) struct TableClock(Arc<dyn LeaseClock>);

impl TableClock {
    pub fn new(clock: Arc<dyn LeaseClock>) -> TableClock {
        TableClock(clock)
    }

    /// Table time now: the clock's, times `den / (den + num)`.
    pub fn now(&self) -> Duration {
        let (num, den) = DRIFT_BOUND;
        scale(self.0.now(), den, den + num, false)
    }

    /// When, on tokio's clock, the table's time will read `at`.
    pub fn when(&self, at: Duration) -> Instant {
        let (num, den) = DRIFT_BOUND;
        self.0.when(scale(at, den + num, den, true))
    }
}

/// `d * num / den`, rounded down or up to the nanosecond, saturating.
fn scale(d: Duration, num: u64, den: u64, up: bool) -> Duration {
    let n = d.as_nanos() * u128::from(num);
    let den = u128::from(den.max(1));
    let ns = if up { n.div_ceil(den) } else { n / den };
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock stopped at a given reading, its epoch at tokio's zero.
    struct Stopped(Duration, Instant);

    impl LeaseClock for Stopped {
        fn now(&self) -> Duration {
            self.0
        }
        fn when(&self, at: Duration) -> Instant {
            self.1 + at
        }
    }

    #[test]
    fn the_tables_time_runs_slower_by_the_bound() {
        let epoch = Instant::now();
        let at = |ms| TableClock::new(Arc::new(Stopped(Duration::from_millis(ms), epoch)));
        // 1 % bound: 1010 ms on the clock are 1000 ms of table time...
        assert_eq!(at(1010).now(), Duration::from_millis(1000));
        assert_eq!(at(0).now(), Duration::ZERO);
        // ...and a lease of 800 ms on the table wakes at 808 ms of clock.
        assert_eq!(
            at(0).when(Duration::from_millis(800)),
            epoch + Duration::from_millis(808)
        );
        let huge = at(0).when(Duration::from_secs(u64::MAX / 4));
        assert!(huge > epoch);
    }
}
