//! The renewer: a lock with a lease shorter than the run, kept by
//! keepalives, so a keepalive that extends nothing shows.
//!
//! The keeper's lease outlasts every fault, and the workers never renew:
//! neither would notice a keepalive that answers without extending. The
//! renewer takes its own key with the run's lease and renews it every
//! quarter of it. A lease never ends early: it lasts at least its length
//! from when the last acknowledged keepalive (or the grant's acquire) was
//! sent, and a leader change only lengthens it. So a keepalive refused as
//! `not_held` or `wrong_token` that completed before that bound is a
//! violation ([`Checker::Keepalive`]). A keepalive without an answer may
//! or may not have extended the lease (only ever longer), so it moves
//! nothing. After a refusal in time (the faults kept the cluster without a
//! quorum for a whole lease), the renewer takes the key again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lockd_client::ClientError;
use lockd_proto::ErrorCode;

use crate::jepsen::check::{Checker, Violation};
use crate::jepsen::history::History;
use crate::jepsen::workload::Target;

/// The renewer's key (no worker uses it, and it is not in the history the
/// linearizability checker reads).
pub const RENEWER_KEY: &str = "renewer";

/// What the renewer saw.
#[derive(Default)]
pub struct Renewed {
    pub violations: Vec<Violation>,
    /// Keepalives acknowledged after the lease the grant alone promised
    /// had ended: the lock lived on keepalives only.
    pub past_first_lease: u64,
}

/// Renew `RENEWER_KEY` with leases of `lease_ms` until `stop`; what went
/// wrong. `history` is the clock.
pub async fn renew(
    target: Target,
    lease_ms: u64,
    history: Arc<History>,
    stop: Arc<AtomicBool>,
) -> Renewed {
    let client = target.client(Duration::from_secs(2), Duration::from_secs(1));
    let lease = Duration::from_millis(lease_ms);
    let mut found = Vec::new();
    let mut past_first_lease = 0;
    while !stop.load(Ordering::Relaxed) {
        let sent = history.now();
        // A failed acquire has spent the client's retry budget (its own
        // backoff) or waited for the key: try again at once.
        let Ok(g) = client
            .acquire_once(RENEWER_KEY, lease, Duration::from_secs(2))
            .await
        else {
            continue;
        };
        let token = g.token();
        std::mem::forget(g); // renewed and released by hand
                             // The lease's earliest end: the last acknowledged send + its lease.
        let mut until = sent + lease_ms as f64;
        let first_lease = until;
        let mut last = sent;
        while !stop.load(Ordering::Relaxed) {
            // The client's renewal schedule (it is what is tested, not a
            // wait for a condition): four times per lease.
            tokio::time::sleep(lease / 4).await;
            let sent = history.now();
            match client.keepalive(RENEWER_KEY, token).await {
                Ok(granted) => {
                    until = sent + granted.as_millis() as f64;
                    last = sent;
                    past_first_lease += u64::from(sent > first_lease);
                }
                Err(ClientError::Rejected {
                    code: ErrorCode::NotHeld | ErrorCode::WrongToken,
                    error,
                }) => {
                    let at = history.now();
                    if at < until {
                        found.push(Violation::new(
                            Checker::Keepalive,
                            format!(
                                "the keepalive of token {token} was refused at {at:.0} ms ({error}), inside the lease the renewal sent at {last:.0} ms promised until {until:.0} ms"
                            ),
                        ));
                    }
                    break;
                }
                Err(_) => {}
            }
        }
        if stop.load(Ordering::Relaxed) {
            let _ = client.release(RENEWER_KEY, token).await;
        }
    }
    Renewed {
        violations: found,
        past_first_lease,
    }
}
