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
//! * early expiry: every lease ends after a quarter of its time;
//! * double grant: one grant in `N` expires at once, so the key can go to
//!   another client while its holder still holds it;
//! * never expire: no lease ends by itself (a late expiry without bound);
//! * late expiry: every lease lasts a fixed time longer than asked;
//! * session early expiry: every session ends after a quarter of its TTL.
//!
//! Their switches: `lockd_core::faults`.

use std::time::Duration;

/// Far beyond any run: a lease that never ends by itself.
#[cfg(feature = "faults")]
const FOREVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// A lease of `ms`, as timed by the leader (grants, keepalives, and the
/// restart of every lease by a new leader).
pub(super) fn lease(ms: u64) -> Duration {
    #[cfg(feature = "faults")]
    {
        let on = lockd_core::faults::get();
        if on.never_expire {
            return FOREVER;
        }
        if on.early_expiry {
            return Duration::from_millis(ms / 4);
        }
        if on.late_expiry_ms > 0 {
            return Duration::from_millis(ms.saturating_add(on.late_expiry_ms));
        }
    }
    Duration::from_millis(ms)
}

/// The lease of a grant that has just committed.
pub(super) fn granted(ms: u64) -> Duration {
    #[cfg(feature = "faults")]
    if lockd_core::faults::double_grant_now() {
        tracing::warn!("FAULT: expiring a grant at once");
        return Duration::ZERO;
    }
    lease(ms)
}

/// A session's TTL of `ms`, as timed by the leader: a lease (and its
/// faults), and with the session early expiry fault a quarter of it.
pub(super) fn session(ms: u64) -> Duration {
    #[cfg(feature = "faults")]
    if lockd_core::faults::get().session_early_expiry {
        return lease(ms / 4);
    }
    lease(ms)
}

/// The TTL of a session that has just opened (see [`granted`]).
pub(super) fn session_opened(ms: u64) -> Duration {
    #[cfg(feature = "faults")]
    if lockd_core::faults::get().session_early_expiry {
        return granted(ms / 4);
    }
    granted(ms)
}
