//! [`Session`]: one lease for many holdings (docs/sessions.md). Acquires
//! made through a session ([`Session::acquire`]) live as long as it does;
//! one background keepalive renews them all, and when the session ends
//! (closed, or expired on the leader after a TTL without a keepalive, as
//! when this process stops) every holding in it is released in one log
//! entry. Each holding keeps its own fencing token.
//!
//! Also the calls sessions and elections use on their own: renew or close
//! a session by id, publish a holding's value (`proclaim`), release one
//! count of a reentrant holding.

use std::time::Duration;

use tokio::time::Instant;

use crate::client::{Client, ClientError, LockGuard};
use crate::guard::Shared;
use crate::proto::{ClientRequest, ClientResponse, LeaderView};
use crate::AcquireOptions;

/// A live session: its id, its TTL, and a conservative local view of when
/// it ends, renewed in the background every third of its TTL (unless
/// [`crate::ClientOptions::keepalive`] is off). Dropping it stops the
/// renewals; the session then ends a TTL later. [`Session::close`] ends it
/// at once.
pub struct Session {
    client: Client,
    id: u64,
    ttl: Duration,
    shared: Shared,
    keepalive: Option<tokio::task::JoinHandle<()>>,
}

fn protocol(other: ClientResponse) -> ClientError {
    ClientError::Protocol(format!("{other:?}"))
}

impl Client {
    /// Open a session of `ttl` (needs a module of world 0.3). Safe to
    /// retry: the request carries a fresh request id, so a lost answer is
    /// asked for again and the session that opened comes back.
    pub async fn open_session(&self, ttl: Duration) -> Result<Session, ClientError> {
        let sent = Instant::now();
        let req = ClientRequest::OpenSession {
            ttl_ms: ttl.as_millis() as u64,
            owner: self.owner().to_string(),
            request_id: crate::id::random_id(),
        };
        let (id, ttl_ms) = match self.call(req, Duration::ZERO).await? {
            ClientResponse::SessionOpened { id, ttl_ms } => (id, ttl_ms),
            ClientResponse::Error(e) => return Err(e.into()),
            other => return Err(protocol(other)),
        };
        // Never believe a longer TTL than asked.
        let ttl = Duration::from_millis(ttl_ms).min(ttl);
        let mut session = Session {
            client: self.clone(),
            id,
            ttl,
            shared: Shared::until(sent + ttl),
            keepalive: None,
        };
        if self.options().keepalive {
            session.keep_alive();
        }
        Ok(session)
    }

    /// Renew session `id` (every holding in it); answers its TTL.
    pub async fn keep_session(&self, id: u64) -> Result<Duration, ClientError> {
        match self
            .call(ClientRequest::KeepSession { id }, Duration::ZERO)
            .await?
        {
            ClientResponse::KeptAlive { lease_ms } => Ok(Duration::from_millis(lease_ms)),
            ClientResponse::Error(e) => Err(e.into()),
            other => Err(protocol(other)),
        }
    }

    /// Close session `id`: every holding in it is released. Answers those
    /// holdings, `(key, token)`.
    pub async fn close_session(&self, id: u64) -> Result<Vec<(String, u64)>, ClientError> {
        match self
            .call(ClientRequest::CloseSession { id }, Duration::ZERO)
            .await?
        {
            ClientResponse::SessionClosed(released) => Ok(released),
            ClientResponse::Error(e) => Err(e.into()),
            other => Err(protocol(other)),
        }
    }

    /// Publish `value` for the holding `(key, token)` (an election's
    /// leader value; needs a module of world 0.3).
    pub async fn proclaim(&self, key: &str, token: u64, value: &str) -> Result<(), ClientError> {
        let req = ClientRequest::Proclaim {
            key: key.as_bytes().to_vec(),
            token,
            value: value.to_string(),
        };
        match self.call(req, Duration::ZERO).await? {
            ClientResponse::Done => Ok(()),
            ClientResponse::Error(e) => Err(e.into()),
            other => Err(protocol(other)),
        }
    }

    /// The leader of election `name` (its first holding, with its value)
    /// and the log index it was read at, read linearizably.
    pub async fn leader(&self, name: &str) -> Result<(u64, Option<LeaderView>), ClientError> {
        let req = ClientRequest::Leader {
            key: name.as_bytes().to_vec(),
        };
        match self.call(req, Duration::ZERO).await? {
            ClientResponse::Leader { index, leader } => Ok((index, leader)),
            ClientResponse::Error(e) => Err(e.into()),
            other => Err(protocol(other)),
        }
    }

    /// Release one count of the holding `(key, token)`: answers what is
    /// left (0: the holding ended).
    pub async fn release_count(&self, key: &str, token: u64) -> Result<u32, ClientError> {
        let req = ClientRequest::ReleaseCount {
            key: key.as_bytes().to_vec(),
            token,
        };
        match self.call(req, Duration::ZERO).await? {
            ClientResponse::ReleasedCount(n) => Ok(n),
            ClientResponse::Error(e) => Err(e.into()),
            other => Err(protocol(other)),
        }
    }
}

impl Session {
    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// When the session ends at the earliest, as far as this client
    /// knows (counted from before the request that opened or renewed it).
    pub fn deadline(&self) -> Instant {
        self.shared.deadline()
    }

    /// Still live: before the local deadline and never refused a renewal.
    pub fn is_valid(&self) -> bool {
        self.shared.is_valid()
    }

    /// Take `key` in this session: it lives as long as the session (the
    /// options' lease is the session's TTL).
    pub async fn acquire(&self, key: &str, opts: AcquireOptions) -> Result<LockGuard, ClientError> {
        let opts = AcquireOptions {
            lease: self.ttl,
            ..opts.in_session(self.id)
        };
        let wait = opts.wait;
        let req = opts.request(self.client.owner(), key);
        let resp = self.client.call(req, wait).await?;
        self.client.guard_in(key, &self.shared, resp)
    }

    /// Resolves once the session is over as far as this client can tell:
    /// a renewal was refused, or the local deadline passed without one.
    pub async fn lost(&self) {
        self.shared.lost().await
    }

    /// Renew the session in the background every third of its TTL (already
    /// so unless [`crate::ClientOptions::keepalive`] is off). A refused
    /// renewal (the session ended) marks it, and its guards, lost.
    pub fn keep_alive(&mut self) {
        if self.keepalive.is_some() {
            return;
        }
        let (client, id) = (self.client.clone(), self.id);
        let what = format!("session {id}");
        self.keepalive = Some(self.shared.keep(self.ttl / 3, self.ttl, what, move || {
            let client = client.clone();
            async move { client.keep_session(id).await }
        }));
    }

    /// Renew it now; answers its TTL.
    pub async fn keepalive(&self) -> Result<Duration, ClientError> {
        let sent = Instant::now();
        let ttl = self.client.keep_session(self.id).await?;
        self.shared.renewed(sent, ttl, self.ttl);
        Ok(ttl)
    }

    /// Close it: every holding in it is released, in one log entry.
    pub async fn close(mut self) -> Result<Vec<(String, u64)>, ClientError> {
        if let Some(k) = self.keepalive.take() {
            k.abort();
        }
        let released = self.client.close_session(self.id).await?;
        self.shared.mark_lost();
        Ok(released)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(k) = self.keepalive.take() {
            k.abort();
        }
    }
}
