//! The [`Client`]'s calls of one request each, made through
//! [`Client::call`]: acquire, release, keepalive and get; and a node's
//! status, asked of that node alone.

use std::time::Duration;

use tokio::time::Instant;

use super::{Client, ClientError, LockGuard};
use crate::conn::Conn;
use crate::proto::{ClientRequest, ClientResponse, LockView, Status};

impl Client {
    /// Take `key` for `lease`, waiting up to `wait` if it is held. Safe to
    /// retry: the request carries a fresh request id, so an answer lost
    /// in a leader change is asked for again and the grant that committed
    /// comes back, never a second one ([`Client::acquire_with`]). The guard
    /// renews its lease until dropped or released (unless
    /// [`ClientOptions::keepalive`](super::ClientOptions::keepalive) is off).
    pub async fn acquire(
        &self,
        key: &str,
        lease: Duration,
        wait: Duration,
    ) -> Result<LockGuard, ClientError> {
        self.acquire_with(key, crate::AcquireOptions::exclusive(lease).wait(wait))
            .await
    }

    /// The protocol's first acquire, without a request id: when the answer
    /// is lost after the request reached a leader, the outcome is
    /// [`ClientError::Unknown`] rather than a retry (which could wait
    /// behind its own grant). For modules and tests that exercise that
    /// command; [`Client::acquire`] is the one to use.
    pub async fn acquire_once(
        &self,
        key: &str,
        lease: Duration,
        wait: Duration,
    ) -> Result<LockGuard, ClientError> {
        let sent = Instant::now();
        let req = ClientRequest::Acquire {
            key: key.as_bytes().to_vec(),
            lease_ms: lease.as_millis() as u64,
            wait_ms: wait.as_millis() as u64,
        };
        let resp = self.call(req, wait).await?;
        self.guard(key, sent, lease, resp)
    }

    /// Take `key` if it is free now; `None` if it is held.
    pub async fn try_acquire(
        &self,
        key: &str,
        lease: Duration,
    ) -> Result<Option<LockGuard>, ClientError> {
        match self.acquire(key, lease, Duration::ZERO).await {
            Ok(g) => Ok(Some(g)),
            Err(e) if e.is_held() => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn release(&self, key: &str, token: u64) -> Result<(), ClientError> {
        match self
            .call(
                ClientRequest::Release {
                    key: key.as_bytes().to_vec(),
                    token,
                },
                Duration::ZERO,
            )
            .await?
        {
            ClientResponse::Released => Ok(()),
            ClientResponse::Error(e) => Err(e.into()),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// Renew the lease of `token` on `key`; returns the lease.
    pub async fn keepalive(&self, key: &str, token: u64) -> Result<Duration, ClientError> {
        match self
            .call(
                ClientRequest::Keepalive {
                    key: key.as_bytes().to_vec(),
                    token,
                },
                Duration::ZERO,
            )
            .await?
        {
            ClientResponse::KeptAlive { lease_ms: 0 } => Err(ClientError::Protocol(format!(
                "the keepalive of {key:?} (token {token}) answered a lease of 0 ms"
            ))),
            ClientResponse::KeptAlive { lease_ms } => Ok(Duration::from_millis(lease_ms)),
            ClientResponse::Error(e) => Err(e.into()),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// The holder of `key`, read linearizably.
    pub async fn get(&self, key: &str) -> Result<Option<LockView>, ClientError> {
        match self
            .call(
                ClientRequest::Get {
                    key: key.as_bytes().to_vec(),
                },
                Duration::ZERO,
            )
            .await?
        {
            ClientResponse::Lock(v) => Ok(v),
            ClientResponse::Error(e) => Err(e.into()),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// The status of the node at `addr` (not necessarily the leader).
    pub async fn status_of(&self, addr: &str) -> Result<Status, ClientError> {
        let opts = &self.inner.options;
        let conn = Conn::open(addr, opts.connect_timeout, &opts.credentials)
            .await
            .map_err(|e| ClientError::Unreachable {
                ms: opts.connect_timeout.as_millis() as u64,
                last: e.to_string(),
            })?;
        match conn.call(ClientRequest::Status, opts.request_timeout).await {
            Ok(ClientResponse::Status(s)) => Ok(*s),
            Ok(ClientResponse::Error(e)) => Err(e.into()),
            Ok(other) => Err(ClientError::Protocol(format!("{other:?}"))),
            Err(e) => Err(ClientError::Unreachable {
                ms: opts.request_timeout.as_millis() as u64,
                last: e.to_string(),
            }),
        }
    }
}
