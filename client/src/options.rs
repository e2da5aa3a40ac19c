//! Acquire with the options of world 0.2 ([`AcquireOptions`]): shared
//! locks, counting semaphores, an owner name, and a request id that makes
//! the acquire safe to retry; plus the holders of a key and listings.
//!
//! Retries: [`Client::acquire_with`] sends a request id (a fresh random one
//! unless given) and the client's owner name, so when an answer is lost (a
//! leader failed between commit and reply) the client asks again and gets
//! the grant that committed, same token, instead of a second grant or a
//! wait behind itself. That needs a lock module of world 0.2; a 0.1 module
//! ignores the id (its retried acquire waits like any other).

use tokio::time::Instant;

use std::time::Duration;

use crate::client::{Client, ClientError, LockGuard};
use crate::proto::{
    Acquire3, Acquire4, AcquireRequest, ClientRequest, ClientResponse, Holding, KeyHoldings,
    LockMode,
};

/// What [`Client::acquire_with`] asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcquireOptions {
    pub lease: Duration,
    /// How long to wait in the key's queue while it is busy.
    pub wait: Duration,
    pub mode: LockMode,
    /// Holders at once, the same for every holder of a key: 1 = mutex,
    /// N = semaphore of N (or N readers). 0: the server's default for the
    /// mode (exclusive 1; shared: the key's readers' limit, else
    /// [`crate::proto::DEFAULT_SHARED_LIMIT`] or the prefix policy's
    /// `max-holders`).
    pub limit: u32,
    /// The owner (session) name; the client's own when `None`.
    pub owner: Option<String>,
    /// The request id; a fresh random one when `None`.
    pub request_id: Option<String>,
    /// Hold it in this session (0: on a lease of its own; see
    /// [`crate::Session`]).
    pub session: u64,
    /// Enter again when this holder (owner, session) holds the key already
    /// in this mode: the same token, a count one higher.
    pub reentrant: bool,
    /// A value published with the holding (an election's leader value).
    pub value: String,
    /// A priority among the key's waiters: higher asks to go earlier when
    /// the key frees (0: none; what it means is the module's election
    /// policy, world 0.4; an older module keeps FIFO).
    pub priority: u32,
}

impl AcquireOptions {
    /// A mutex (the seed's lock).
    pub fn exclusive(lease: Duration) -> AcquireOptions {
        AcquireOptions {
            lease,
            wait: Duration::ZERO,
            mode: LockMode::Exclusive,
            limit: 1,
            owner: None,
            request_id: None,
            session: 0,
            reentrant: false,
            value: String::new(),
            priority: 0,
        }
    }

    /// A reader of a readers-writer lock with at most `readers` readers.
    pub fn shared(lease: Duration, readers: u32) -> AcquireOptions {
        AcquireOptions {
            mode: LockMode::Shared,
            limit: readers,
            ..AcquireOptions::exclusive(lease)
        }
    }

    /// A reader of a readers-writer lock, as many readers as the key's
    /// readers agreed on (the server's default; see [`Self::limit`]).
    pub fn reader(lease: Duration) -> AcquireOptions {
        AcquireOptions::shared(lease, 0)
    }

    /// One of `slots` slots of a counting semaphore.
    pub fn semaphore(lease: Duration, slots: u32) -> AcquireOptions {
        AcquireOptions {
            limit: slots,
            ..AcquireOptions::exclusive(lease)
        }
    }

    pub fn wait(self, wait: Duration) -> AcquireOptions {
        AcquireOptions { wait, ..self }
    }

    pub fn owner(self, owner: impl Into<String>) -> AcquireOptions {
        AcquireOptions {
            owner: Some(owner.into()),
            ..self
        }
    }

    pub fn request_id(self, id: impl Into<String>) -> AcquireOptions {
        AcquireOptions {
            request_id: Some(id.into()),
            ..self
        }
    }

    /// Enter again if this holder holds the key already (needs a module of
    /// world 0.3).
    pub fn reentrant(self) -> AcquireOptions {
        AcquireOptions {
            reentrant: true,
            ..self
        }
    }

    /// Publish `value` with the holding (needs a module of world 0.3).
    pub fn value(self, value: impl Into<String>) -> AcquireOptions {
        AcquireOptions {
            value: value.into(),
            ..self
        }
    }

    /// Ask to go before other waiters when the key frees (see
    /// [`AcquireOptions::priority`]).
    pub fn priority(self, priority: u32) -> AcquireOptions {
        AcquireOptions { priority, ..self }
    }

    /// Hold it in session `id` (see [`crate::Session::acquire`]).
    pub fn in_session(self, id: u64) -> AcquireOptions {
        AcquireOptions {
            session: id,
            ..self
        }
    }

    /// The request for `key`, by `owner` unless the options name one:
    /// world 0.2's unless an option needs 0.3, so a client talks to older
    /// servers for everything they can do.
    pub(crate) fn request(self, owner: &str, key: &str) -> ClientRequest {
        let v3 = self.session != 0 || self.reentrant || !self.value.is_empty();
        let base = AcquireRequest {
            key: key.as_bytes().to_vec(),
            lease_ms: self.lease.as_millis() as u64,
            wait_ms: self.wait.as_millis() as u64,
            mode: self.mode,
            limit: self.limit,
            owner: self.owner.unwrap_or_else(|| owner.to_string()),
            request_id: self.request_id.unwrap_or_else(crate::id::random_id),
        };
        let with = Acquire3 {
            base,
            session: self.session,
            reentrant: self.reentrant,
            value: self.value,
        };
        if self.priority != 0 {
            ClientRequest::AcquireRanked(Acquire4 {
                base: with,
                priority: self.priority,
            })
        } else if v3 {
            ClientRequest::AcquireIn(with)
        } else {
            ClientRequest::AcquireWith(with.base)
        }
    }
}

impl Client {
    /// Take a slot of `key` as `opts` asks, retrying through leader
    /// changes without ever taking a second grant (see the module docs).
    pub async fn acquire_with(
        &self,
        key: &str,
        opts: AcquireOptions,
    ) -> Result<LockGuard, ClientError> {
        let sent = Instant::now();
        let asked = opts.lease;
        let wait = opts.wait;
        let req = opts.request(self.owner(), key);
        let resp = self.call(req, wait).await?;
        Ok(self.guard(key, sent, asked, resp)?.fresh().await)
    }

    /// Take `key` as one of at most `readers` readers.
    pub async fn acquire_shared(
        &self,
        key: &str,
        readers: u32,
        lease: Duration,
        wait: Duration,
    ) -> Result<LockGuard, ClientError> {
        self.acquire_with(key, AcquireOptions::shared(lease, readers).wait(wait))
            .await
    }

    /// Take one of `slots` slots of the semaphore `key`.
    pub async fn semaphore(
        &self,
        key: &str,
        slots: u32,
        lease: Duration,
        wait: Duration,
    ) -> Result<LockGuard, ClientError> {
        self.acquire_with(key, AcquireOptions::semaphore(lease, slots).wait(wait))
            .await
    }

    /// Every holding of `key` in token order, read linearizably.
    pub async fn holders(&self, key: &str) -> Result<Vec<Holding>, ClientError> {
        let req = ClientRequest::Holders {
            key: key.as_bytes().to_vec(),
        };
        match self.call(req, Duration::ZERO).await? {
            ClientResponse::Holders(h) => Ok(h),
            ClientResponse::Error(e) => Err(e.into()),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// Held keys under `prefix` after `after`, at most `limit`.
    pub async fn list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<KeyHoldings>, ClientError> {
        let req = ClientRequest::List {
            prefix: prefix.as_bytes().to_vec(),
            after: after.map(|a| a.as_bytes().to_vec()),
            limit,
        };
        match self.call(req, Duration::ZERO).await? {
            ClientResponse::Listed(k) => Ok(k),
            ClientResponse::Error(e) => Err(e.into()),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }
}
