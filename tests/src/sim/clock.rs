//! Each node's lease clock in a run, behind the node's lease-clock seam
//! (`lockd::service::clock`): it runs at a rate of its own, drawn from the
//! seed, fast or slow by up to [`INSIDE`] (90 % of the drift bound lease
//! safety assumes); the negative control `fast-clock` runs every clock
//! [`BEYOND`] fast instead, and the holders' checker catches a lease that
//! ended early.
//!
//! Only the rate is modelled: the clock is monotonic, so an offset or a
//! wall-clock jump changes nothing the lease logic reads.

use std::time::Duration;

use lockd::service::clock::{LeaseClock, DRIFT_BOUND};
use tokio::time::Instant;

/// Parts per million.
const PPM: i64 = 1_000_000;

/// The largest drift of a clean run, ppm: 90 % of the bound.
pub const INSIDE: i64 = (DRIFT_BOUND.0 as i64) * PPM / (DRIFT_BOUND.1 as i64) * 9 / 10;
/// The control's drift, ppm: 20 % fast, far beyond the bound.
pub const BEYOND: i64 = PPM / 5;

/// A clock running `ppm` parts per million fast (slow when negative).
pub struct Drifting {
    epoch: Instant,
    ppm: i64,
}

impl Drifting {
    /// A clock that reads zero now (on the host's clock: call it inside the
    /// node's host).
    pub fn start(ppm: i64) -> Drifting {
        Drifting {
            epoch: Instant::now(),
            ppm,
        }
    }
}

fn scale(d: Duration, num: i64, den: i64) -> Duration {
    let ns = d.as_nanos() as i128 * num as i128 / den as i128;
    Duration::from_nanos(ns.clamp(0, u64::MAX as i128) as u64)
}

impl LeaseClock for Drifting {
    fn now(&self) -> Duration {
        let real = Instant::now().saturating_duration_since(self.epoch);
        scale(real, PPM + self.ppm, PPM)
    }

    fn when(&self, at: Duration) -> Instant {
        // Rounded up, so the clock reads at least `at` when woken.
        let real = scale(at, PPM, PPM + self.ppm) + Duration::from_nanos(1);
        self.epoch + real
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_inside_and_beyond() {
        assert_eq!(INSIDE, 9_000);
        const { assert!(BEYOND > 10_000) };
        let d = Duration::from_secs(1);
        assert_eq!(scale(d, PPM + INSIDE, PPM), Duration::from_millis(1009));
        assert_eq!(scale(d, PPM - INSIDE, PPM), Duration::from_millis(991));
    }
}
