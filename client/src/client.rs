//! [`Client`]: endpoints, leader discovery, retries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::conn::{Conn, ConnError};
pub use crate::guard::LockGuard;
use crate::proto::{ClientRequest, ClientResponse, ErrorCode, WireError};

mod calls;

#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub connect_timeout: Duration,
    /// How long one request may take beyond any wait it asks for.
    pub request_timeout: Duration,
    /// How long to keep retrying through leader changes and dead nodes.
    pub retry_for: Duration,
    /// TLS settings and bearer token (default: plaintext, anonymous).
    pub credentials: crate::security::Credentials,
    /// Renew every guard's lease in the background from the moment it is
    /// granted ([`LockGuard::keep_alive`]); on by default. Off: a guard's
    /// lease runs out unless renewed by hand (a history checker that
    /// records every renewal, a holder that renews on its own schedule).
    pub keepalive: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            retry_for: Duration::from_secs(10),
            credentials: crate::security::Credentials::default(),
            keepalive: true,
        }
    }
}

#[derive(Clone, Debug, thiserror::Error)]
pub enum ClientError {
    /// The node said no (held, not held, wrong token, bad input), with the
    /// error's stable code (the node's precise one, or the kind's).
    #[error("{error}")]
    Rejected { error: WireError, code: ErrorCode },
    /// No node could be reached or no leader answered in time.
    #[error("no leader reachable within {ms} ms; last error: {last}")]
    Unreachable { ms: u64, last: String },
    /// The request reached a leader but no answer came back (the leader
    /// failed or lost leadership): it may or may not have taken effect. An
    /// acquire that ends like this may have granted a lock that nobody
    /// knows the token of; its lease ends it.
    #[error("outcome unknown, the request may have taken effect: {0}")]
    Unknown(String),
    #[error("unexpected answer from the node: {0}")]
    Protocol(String),
    /// A watch ended in a way resuming cannot mend (its code says why:
    /// `compacted`, `watch_behind`, `too_many_watchers`, …).
    #[error("watch ended ({}): {}", .0.code, .0.message)]
    WatchCut(crate::proto::WatchCut),
}

impl From<WireError> for ClientError {
    /// A refusal with the code of its kind.
    fn from(error: WireError) -> ClientError {
        let code = error.code();
        ClientError::Rejected { error, code }
    }
}

impl ClientError {
    /// The lock was still held after the wait.
    pub fn is_held(&self) -> bool {
        self.code() == Some(ErrorCode::Held)
    }

    /// The stable code of a refusal by the node (docs/api.md, "Error
    /// codes"); `None` when no node answered, or a watch was cut.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Rejected { code, .. } => Some(*code),
            _ => None,
        }
    }
}

struct Inner {
    /// This client's owner (session) name: random, one per [`Client`].
    owner: String,
    endpoints: Vec<String>,
    options: ClientOptions,
    /// The connection in use, and the address to try first.
    conn: tokio::sync::Mutex<Option<Conn>>,
    preferred: Mutex<Option<String>>,
    /// Tries sent again after one that got no answer ([`Client::retries`]).
    retries: std::sync::atomic::AtomicU64,
}

/// A client of a lockd cluster. Cheap to clone; clones share a connection.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// A client for a cluster reachable at any of `endpoints`. Connects
    /// lazily and follows the leader.
    pub fn new<I, S>(endpoints: I) -> Client
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Client::with_options(endpoints, ClientOptions::default())
    }

    pub fn with_options<I, S>(endpoints: I, options: ClientOptions) -> Client
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Client {
            inner: Arc::new(Inner {
                owner: format!("client-{}", crate::id::random_id()),
                endpoints: endpoints.into_iter().map(Into::into).collect(),
                options,
                conn: tokio::sync::Mutex::new(None),
                preferred: Mutex::new(None),
                retries: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// How many times this client (and its clones) sent a request again
    /// after a try that got no answer, since it was made. A call between
    /// two equal readings was answered at its first try: a retry-safe
    /// acquire then had no earlier try whose answer was lost (the
    /// simulation's checker uses this to model lost grants only where
    /// there can be one).
    pub fn retries(&self) -> u64 {
        self.inner
            .retries
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The credentials this client presents (what [`crate::admin::Admin`]
    /// presents too).
    pub fn credentials(&self) -> &crate::security::Credentials {
        &self.inner.options.credentials
    }

    pub(crate) fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    pub(crate) fn endpoints(&self) -> &[String] {
        &self.inner.endpoints
    }

    /// The owner name [`Client::acquire_with`] uses unless told otherwise.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    async fn connection(&self, attempt: usize) -> Result<Conn, ConnError> {
        let mut conn = self.inner.conn.lock().await;
        if let Some(c) = conn.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let preferred = self
            .inner
            .preferred
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let eps = &self.inner.endpoints;
        let addr = preferred.unwrap_or_else(|| eps[attempt % eps.len().max(1)].clone());
        let opts = &self.inner.options;
        let c = Conn::open(&addr, opts.connect_timeout, &opts.credentials).await?;
        *conn = Some(c.clone());
        Ok(c)
    }

    async fn forget(&self, addr: &str) {
        let mut conn = self.inner.conn.lock().await;
        if conn.as_ref().is_some_and(|c| c.addr == addr) {
            *conn = None;
        }
    }

    /// Send `req` to the leader, retrying through leader changes. A request
    /// that is not idempotent (acquire, release) is retried only when it
    /// certainly did not take effect (no connection, or a node that is not
    /// the leader); otherwise the caller learns the outcome is unknown,
    /// rather than a retry taking a second lock or reporting a release as
    /// "not held".
    pub(crate) async fn call(
        &self,
        req: ClientRequest,
        extra: Duration,
    ) -> Result<ClientResponse, ClientError> {
        // An acquire with a request id returns the grant that committed
        // when retried (world 0.2), so it is retried like a read.
        let idempotent = match &req {
            ClientRequest::Get { .. }
            | ClientRequest::Status
            | ClientRequest::Keepalive { .. }
            | ClientRequest::Holders { .. }
            | ClientRequest::Leader { .. }
            | ClientRequest::List { .. }
            | ClientRequest::Watch(_) => true,
            ClientRequest::AcquireWith(a) => !a.request_id.is_empty(),
            ClientRequest::AcquireIn(a) => !a.base.request_id.is_empty(),
            ClientRequest::AcquireRanked(a) => !a.base.base.request_id.is_empty(),
            ClientRequest::OpenSession { request_id, .. } => !request_id.is_empty(),
            // A renewal, and a value set again, change nothing twice.
            ClientRequest::KeepSession { .. } | ClientRequest::Proclaim { .. } => true,
            ClientRequest::Acquire { .. }
            | ClientRequest::Release { .. }
            | ClientRequest::ReleaseCount { .. }
            | ClientRequest::CloseSession { .. } => false,
        };
        if self.inner.endpoints.is_empty() {
            return Err(ClientError::Unreachable {
                ms: 0,
                last: "no endpoints given".into(),
            });
        }
        let opts = &self.inner.options;
        let deadline = Instant::now() + opts.retry_for + extra;
        let mut attempt = 0usize;
        let mut last = String::new();
        loop {
            // Set when a node named another node as the leader: go there
            // at once instead of waiting.
            let mut redirected = false;
            let result: Result<(), String> = match self.connection(attempt).await {
                Ok(conn) => match conn
                    .call_coded(req.clone(), opts.request_timeout + extra)
                    .await
                {
                    Ok((
                        ClientResponse::Error(WireError::NotLeader {
                            leader_addr,
                            message,
                            ..
                        }),
                        _,
                    )) => {
                        self.forget(&conn.addr).await;
                        redirected = leader_addr.as_ref().is_some_and(|a| *a != conn.addr);
                        *self
                            .inner
                            .preferred
                            .lock()
                            .unwrap_or_else(|p| p.into_inner()) = leader_addr;
                        Err(message)
                    }
                    Ok((ClientResponse::Error(WireError::Unavailable(m)), _)) if !idempotent => {
                        return Err(ClientError::Unknown(m));
                    }
                    // Ask the next endpoint: a node that cannot reach a
                    // quorum (cut off, or removed and still believing it
                    // leads) would answer so for the whole retry budget
                    // (found by the simulation, seed 9259).
                    Ok((ClientResponse::Error(WireError::Unavailable(m)), _)) => {
                        self.forget(&conn.addr).await;
                        Err(m)
                    }
                    Ok((ClientResponse::Error(error), code)) => {
                        let code = code.unwrap_or_else(|| error.code());
                        return Err(ClientError::Rejected { error, code });
                    }
                    Ok((resp, _)) => return Ok(resp),
                    Err(e) => {
                        self.forget(&conn.addr).await;
                        if !idempotent && !matches!(e, ConnError::NotSent { .. }) {
                            return Err(ClientError::Unknown(e.to_string()));
                        }
                        Err(e.to_string())
                    }
                },
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = result {
                last = e;
            }
            attempt += 1;
            if Instant::now() >= deadline {
                return Err(ClientError::Unreachable {
                    ms: (opts.retry_for + extra).as_millis() as u64,
                    last,
                });
            }
            self.inner
                .retries
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if redirected && !attempt.is_multiple_of(4) {
                continue; // (a hint that keeps pointing at a dead node still waits)
            }
            // Short steps: a leader change takes well under a second, and a
            // client should notice the new leader soon after it exists.
            tokio::time::sleep(Duration::from_millis((5 * attempt as u64).min(25))).await;
        }
    }
}
