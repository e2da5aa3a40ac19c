//! [`LockGuard`]: a held lock's token and a conservative local view of its
//! lease, renewed in the background on request; and the guard's
//! construction from an acquire's answer, which believes no lease longer
//! than the one asked for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::client::{Client, ClientError};
use crate::proto::ClientResponse;

impl Client {
    /// The guard of an acquire's answer (sent at `sent`).
    ///
    /// The guard keeps the smaller of the lease asked for and the lease
    /// granted: a module may shorten a lease (a policy's cap), never
    /// lengthen it, so a longer answer is not believed. A lease of 0 is
    /// refused: it would be over before the answer arrived.
    pub(crate) fn guard(
        &self,
        key: &str,
        sent: Instant,
        asked: Duration,
        resp: ClientResponse,
    ) -> Result<LockGuard, ClientError> {
        let (token, lease_ms, count) = match resp {
            ClientResponse::Acquired { token, lease_ms } => (token, lease_ms, None),
            ClientResponse::Granted {
                token,
                lease_ms,
                count,
            } => (token, lease_ms, Some(count)),
            ClientResponse::Error(e) => return Err(e.into()),
            other => return Err(ClientError::Protocol(format!("{other:?}"))),
        };
        let lease = Duration::from_millis(lease_ms).min(asked);
        if lease.is_zero() {
            return Err(ClientError::Protocol(format!(
                "{key:?} was granted (token {token}) with a lease of {lease_ms} ms, of {} ms asked",
                asked.as_millis()
            )));
        }
        let mut guard = LockGuard {
            client: self.clone(),
            key: key.to_string(),
            token,
            lease,
            // Conservative: counted from before the request was sent,
            // so it never outlasts the lease the leader tracks.
            shared: Shared::until(sent + lease),
            keepalive: None,
            release_on_drop: false,
            count,
        };
        if self.options().keepalive {
            guard.keep_alive();
        }
        Ok(guard)
    }
}

/// A conservative local view of a lease: when it ends at the earliest,
/// whether a renewal was refused, and a wake-up when either changes. A
/// guard's own, or its session's (shared by every guard in it).
#[derive(Clone)]
pub(crate) struct Shared {
    deadline: Arc<Mutex<Instant>>,
    lost: Arc<AtomicBool>,
    changed: Arc<tokio::sync::Notify>,
}

impl Shared {
    pub(crate) fn until(deadline: Instant) -> Shared {
        Shared {
            deadline: Arc::new(Mutex::new(deadline)),
            lost: Arc::new(AtomicBool::new(false)),
            changed: Arc::new(tokio::sync::Notify::new()),
        }
    }

    pub(crate) fn deadline(&self) -> Instant {
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn is_valid(&self) -> bool {
        !self.lost.load(Ordering::Relaxed) && Instant::now() < self.deadline()
    }

    /// A renewal sent at `sent` answered `renewed`; never believed longer
    /// than `cap` (the lease granted).
    pub(crate) fn renewed(&self, sent: Instant, renewed: Duration, cap: Duration) {
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner()) = sent + renewed.min(cap);
        self.changed.notify_waiters();
    }

    pub(crate) fn mark_lost(&self) {
        self.lost.store(true, Ordering::Relaxed);
        self.changed.notify_waiters();
    }

    /// Resolves once the lease is over as far as this client can tell.
    pub(crate) async fn lost(&self) {
        loop {
            // Registered before the check, so a change between the two
            // still wakes the wait.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let deadline = self.deadline();
            if self.lost.load(Ordering::Relaxed) || Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                _ = changed => {}
            }
        }
    }

    /// Renew every `every` with `renew` (sent at the time of each call)
    /// until a renewal is refused: then it is lost.
    pub(crate) fn keep<F, Fut>(
        &self,
        every: Duration,
        cap: Duration,
        what: String,
        renew: F,
    ) -> tokio::task::JoinHandle<()>
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<Duration, ClientError>> + Send,
    {
        let shared = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let sent = Instant::now();
                match renew().await {
                    Ok(renewed) => shared.renewed(sent, renewed, cap),
                    Err(ClientError::Rejected { .. }) => return shared.mark_lost(),
                    Err(e) => tracing::warn!(what, error = %e, "renewal failed; retrying"),
                }
            }
        })
    }
}

impl Client {
    /// The guard of a grant in a session: no renewals of its own (the
    /// session's keepalive renews every holding in it), valid while the
    /// session is.
    pub(crate) fn guard_in(
        &self,
        key: &str,
        shared: &Shared,
        resp: ClientResponse,
    ) -> Result<LockGuard, ClientError> {
        match resp {
            ClientResponse::Granted {
                token,
                lease_ms,
                count,
            } => Ok(LockGuard {
                client: self.clone(),
                key: key.to_string(),
                token,
                lease: Duration::from_millis(lease_ms),
                shared: shared.clone(),
                keepalive: None,
                release_on_drop: false,
                count: Some(count),
            }),
            ClientResponse::Error(e) => Err(e.into()),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }
}

/// A held lock: its fencing token, and a conservative local view of its
/// lease, renewed in the background (unless
/// [`crate::ClientOptions::keepalive`] is off). [`LockGuard::lost`]
/// resolves when the lock is no longer ours. Dropping the guard stops the
/// renewals but does **not** release the lock unless
/// [`LockGuard::release_on_drop`] was asked for; the lease ends it otherwise.
pub struct LockGuard {
    client: Client,
    key: String,
    token: u64,
    lease: Duration,
    /// Its own lease, or its session's.
    shared: Shared,
    keepalive: Option<tokio::task::JoinHandle<()>>,
    release_on_drop: bool,
    /// Times its holder holds it, when the server said (world 0.3's
    /// answer): its release then takes one count off.
    count: Option<u32>,
}

impl LockGuard {
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The fencing token. A protected resource must refuse writes carrying a
    /// token lower than the highest it has seen.
    pub fn token(&self) -> u64 {
        self.token
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// How many times its holder holds it (above 1: a reentrant holder
    /// entered again); 1 when the server did not say.
    pub fn count(&self) -> u32 {
        self.count.unwrap_or(1)
    }

    /// When the lease ends at the earliest, as far as this client knows:
    /// counted from *before* the request that granted or renewed it.
    pub fn deadline(&self) -> Instant {
        self.shared.deadline()
    }

    /// Renew now when the local deadline is less than a third of the lease
    /// away: after a wait in the key's queue, the deadline (counted from
    /// before the request, which is all the client knows) may have passed
    /// while the lease the leader counts from the grant has barely begun.
    /// Only with background renewals on ([`crate::ClientOptions::keepalive`]):
    /// without them every renewal is the caller's. The grant stands
    /// whatever the renewal says: a refused one marks the guard lost.
    pub(crate) async fn fresh(self) -> LockGuard {
        if !self.client.options().keepalive || self.deadline() > Instant::now() + self.lease / 3 {
            return self;
        }
        let sent = Instant::now();
        match self.client.keepalive(&self.key, self.token).await {
            Ok(renewed) => self.shared.renewed(sent, renewed, self.lease),
            Err(ClientError::Rejected { .. }) => self.shared.mark_lost(),
            // Unknown: the background renewals go on trying.
            Err(_) => {}
        }
        self
    }

    /// Still ours: before the local deadline and never refused a renewal.
    pub fn is_valid(&self) -> bool {
        self.shared.is_valid()
    }

    /// Resolves once the lock is no longer ours as far as this client can
    /// tell: a renewal was refused, or the local deadline passed without a
    /// renewal (with [`Self::keep_alive`] running, only if renewals failed
    /// for a whole lease). Stop using the fencing token when it does:
    /// `tokio::select!` it against the work the lock protects.
    pub async fn lost(&self) {
        self.shared.lost().await
    }

    /// Renew the lease in the background every third of it (already so
    /// when [`crate::ClientOptions::keepalive`] is on, the default). A
    /// refused renewal (the lock expired or was taken) marks the guard
    /// invalid.
    pub fn keep_alive(&mut self) {
        if self.keepalive.is_some() {
            return;
        }
        let (client, key, token) = (self.client.clone(), self.key.clone(), self.token);
        let what = format!("lock {key} (token {token})");
        self.keepalive = Some(self.shared.keep(self.lease / 3, self.lease, what, move || {
            let (client, key) = (client.clone(), key.clone());
            async move { client.keepalive(&key, token).await }
        }));
    }

    /// Release the lock when the guard is dropped (needs a tokio runtime).
    pub fn release_on_drop(mut self, yes: bool) -> Self {
        self.release_on_drop = yes;
        self
    }

    /// Give it up: the holding ends, or for a reentrant holding entered
    /// more than once, one count comes off (the holding stays, still
    /// renewed by the other guards of it).
    pub async fn release(mut self) -> Result<(), ClientError> {
        self.release_on_drop = false;
        if let Some(k) = self.keepalive.take() {
            k.abort();
        }
        match self.count {
            Some(_) => self
                .client
                .release_count(&self.key, self.token)
                .await
                .map(|_| ()),
            None => self.client.release(&self.key, self.token).await,
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(k) = self.keepalive.take() {
            k.abort();
        }
        if self.release_on_drop {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let (client, key, token) = (self.client.clone(), self.key.clone(), self.token);
                rt.spawn(async move {
                    let _ = client.release(&key, token).await;
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(asked_ms: u64, lease_ms: u64) -> Result<LockGuard, ClientError> {
        // No renewals: these are about the guard's own view of the lease.
        let options = crate::ClientOptions {
            keepalive: false,
            ..Default::default()
        };
        let c = Client::with_options(["127.0.0.1:1"], options);
        let resp = ClientResponse::Acquired { token: 7, lease_ms };
        c.guard("k", Instant::now(), Duration::from_millis(asked_ms), resp)
    }

    #[test]
    fn a_longer_lease_than_asked_is_not_believed() {
        let g = granted(1000, 3_600_000).expect("granted");
        assert_eq!(g.lease(), Duration::from_millis(1000));
        assert!(g.deadline() <= Instant::now() + Duration::from_millis(1000));
    }

    #[test]
    fn a_shortened_lease_is_kept() {
        // A module's policy may cap the lease.
        let g = granted(10_000, 2_000).expect("granted");
        assert_eq!(g.lease(), Duration::from_millis(2000));
    }

    #[tokio::test]
    async fn lost_resolves_at_the_local_deadline_without_renewals() {
        let g = granted(40, 40).expect("granted");
        assert!(g.is_valid());
        g.lost().await;
        assert!(!g.is_valid());
        assert!(Instant::now() >= g.deadline());
    }

    #[test]
    fn a_lease_of_zero_is_refused() {
        match granted(1000, 0) {
            Err(ClientError::Protocol(m)) => assert!(m.contains("lease of 0 ms"), "{m}"),
            Err(e) => panic!("expected a protocol error, got {e}"),
            Ok(_) => panic!("a lease of 0 ms was believed"),
        }
    }
}
