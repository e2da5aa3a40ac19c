//! How long a lease lasts on the leader's clock, and the test-only faults
//! that break that promise on purpose.
//!
//! The broken builds exist to show that the fault-injection checkers catch
//! a lock service that breaks mutual exclusion while every fencing token
//! stays unique and increasing — which the fenced register alone cannot
//! see. They are compiled in with the `faults` feature (the test suite's
//! build; a build of lockd alone has none), and each acts only when its
//! environment variable is set:
//!
//! * `LOCKD_FAULT_EARLY_EXPIRY`: every lease ends after a quarter of its
//!   time;
//! * `LOCKD_FAULT_DOUBLE_GRANT=N`: one grant in `N`
//!   expires at once, so the key can go to another client while its holder
//!   still holds it.

use std::time::Duration;

/// A lease of `ms`, as timed by the leader (grants, keepalives, and the
/// restart of every lease by a new leader).
pub(super) fn lease(ms: u64) -> Duration {
    #[cfg(feature = "faults")]
    if faults::early_expiry() {
        return Duration::from_millis(ms / 4);
    }
    Duration::from_millis(ms)
}

/// The lease of a grant that has just committed.
pub(super) fn granted(ms: u64) -> Duration {
    #[cfg(feature = "faults")]
    if faults::double_grant_now() {
        tracing::warn!("FAULT: expiring a grant at once");
        return Duration::ZERO;
    }
    lease(ms)
}

#[cfg(feature = "faults")]
mod faults {
    use std::sync::OnceLock;

    pub(super) fn early_expiry() -> bool {
        static ON: OnceLock<bool> = OnceLock::new();
        *ON.get_or_init(|| std::env::var_os("LOCKD_FAULT_EARLY_EXPIRY").is_some())
    }

    /// True for one call in `LOCKD_FAULT_DOUBLE_GRANT` (never when unset).
    pub(super) fn double_grant_now() -> bool {
        use std::sync::atomic::{AtomicU64, Ordering};
        static ONE_IN: OnceLock<u64> = OnceLock::new();
        static GRANTS: AtomicU64 = AtomicU64::new(0);
        let one_in = *ONE_IN.get_or_init(|| {
            std::env::var("LOCKD_FAULT_DOUBLE_GRANT")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        });
        one_in > 0 && GRANTS.fetch_add(1, Ordering::Relaxed) % one_in == one_in - 1
    }
}
