//! The keeper: one lock taken before the faults start and renewed through
//! all of them with a lease longer than any of them, so only a service
//! that drops a renewed lock (or cannot renew one for that long) loses it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use lockd_client::{Client, ClientError};

use super::check::{Checker, Violation};
use super::workload::{Target, KEEPER_KEY, KEEPER_LEASE};

/// How often the keeper renews, and retries after a failed renewal.
const RENEW_EVERY: Duration = Duration::from_millis(1000);
const RETRY_EVERY: Duration = Duration::from_millis(200);

/// The keeper's lock, taken before the faults start.
pub struct Keeper {
    client: Client,
    key: String,
    token: u64,
    lease: Duration,
}

impl Keeper {
    pub async fn take(target: Target) -> Result<Keeper, ClientError> {
        Keeper::take_for(target, KEEPER_KEY, KEEPER_LEASE).await
    }

    /// The keeper's lock on `key` with a lease of `lease`: longer than any
    /// time the faults may leave the cluster without a quorum.
    pub async fn take_for(
        target: Target,
        key: &str,
        lease: Duration,
    ) -> Result<Keeper, ClientError> {
        let client = target.client(Duration::from_secs(3), Duration::from_secs(2));
        let g = client
            .acquire_once(key, lease, Duration::from_secs(15))
            .await?;
        let token = g.token();
        std::mem::forget(g); // renewed and released by hand
        Ok(Keeper {
            client,
            key: key.to_string(),
            token,
            lease,
        })
    }

    /// Renew until `stop`, then check the lock is still ours with the same
    /// token and release it. Returns the renewals and what went wrong.
    pub async fn hold(self, stop: Arc<AtomicBool>) -> (u64, Vec<Violation>) {
        let bad = |what: String| vec![Violation::new(Checker::Survived, what)];
        let mut deadline = Instant::now() + self.lease;
        let mut renewals = 0;
        let mut last_error = String::new();
        while !stop.load(Ordering::Relaxed) {
            // The keeper's renewal schedule (it is the client under test,
            // not a wait for a condition): well inside the lease, sooner
            // after a failed renewal.
            let every = if last_error.is_empty() {
                RENEW_EVERY
            } else {
                RETRY_EVERY
            };
            tokio::time::sleep(every).await;
            let sent = Instant::now();
            match self.client.keepalive(&self.key, self.token).await {
                Ok(lease) => {
                    renewals += 1;
                    deadline = sent + lease;
                    last_error.clear();
                }
                Err(e @ ClientError::Rejected { .. }) => {
                    return (
                        renewals,
                        bad(format!(
                            "the keeper's lock (token {}) was refused a keepalive after {renewals} renewals: {e}",
                            self.token
                        )),
                    )
                }
                Err(e) => last_error = e.to_string(),
            }
            if Instant::now() > deadline {
                return (
                    renewals,
                    bad(format!(
                        "no keepalive of the keeper's lock succeeded for its whole lease ({:?}); last error: {last_error}",
                        self.lease
                    )),
                );
            }
        }
        match self.client.get(&self.key).await {
            Ok(Some(v)) if v.token == self.token => {}
            other => {
                return (
                    renewals,
                    bad(format!(
                        "after the faults the keeper's key reads {other:?}, not token {}",
                        self.token
                    )),
                )
            }
        }
        match self.client.release(&self.key, self.token).await {
            Ok(()) => (renewals, Vec::new()),
            Err(e) => (
                renewals,
                bad(format!("the keeper's final release failed: {e}")),
            ),
        }
    }
}

/// The keeper task's renewals, its violations added to `violations` (a
/// keeper that panicked is a broken run).
pub fn keeper_outcome(
    joined: Result<(u64, Vec<Violation>), tokio::task::JoinError>,
    violations: &mut Vec<Violation>,
) -> u64 {
    match joined {
        Ok((renewals, v)) => {
            violations.extend(v);
            renewals
        }
        Err(e) => {
            violations.push(Violation::new(
                Checker::Harness,
                format!("the keeper failed: {e}"),
            ));
            0
        }
    }
}
