//! [`LockService`]: what the HTTP and framed APIs call. Requests are
//! checked here — key and lease rules — and tokens in the actor, **before**
//! anything is proposed, so bad input never reaches the log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::actor::{self, Msg};
use super::error::{check_key, Acquired, ServiceError};
use super::proposer::Proposer;
use super::read;
use super::stats::ServiceStats;
use crate::command::HolderInfo;
use crate::raft::state_machine::StateMachineStore;
use crate::raft::{NodeId, Raft};

/// The lock service of a node. Cheap to clone.
#[derive(Clone)]
pub struct LockService {
    tx: mpsc::UnboundedSender<Msg>,
    /// Numbers the requests sent to the actor.
    next_req: Arc<AtomicU64>,
    pub stats: Arc<ServiceStats>,
    id: NodeId,
    raft: Raft,
    sm: StateMachineStore,
    max_lease_ms: u64,
    /// The longest an election can take.
    election_max: Duration,
}

fn gone() -> ServiceError {
    ServiceError::Unavailable("the node is shutting down".into())
}

impl LockService {
    /// Start the leader's actor. `election_max` is the longest an election
    /// can take: a new leader adds it to every held lease it inherits.
    pub fn start(
        id: NodeId,
        raft: Raft,
        sm: StateMachineStore,
        proposer: Proposer,
        election_max: Duration,
        max_lease_ms: u64,
    ) -> LockService {
        let stats = Arc::new(ServiceStats::default());
        let tx = actor::spawn(
            id,
            raft.clone(),
            sm.clone(),
            proposer,
            election_max,
            stats.clone(),
        );
        LockService {
            tx,
            next_req: Arc::new(AtomicU64::new(1)),
            stats,
            id,
            raft,
            sm,
            max_lease_ms,
            election_max,
        }
    }

    /// Send the actor a request and wait for its answer. A caller that
    /// stops waiting (its connection closed, so this future is dropped)
    /// is reported to the actor, which then skips it in the queue or
    /// releases the grant it was about to get.
    async fn ask<T>(
        &self,
        msg: impl FnOnce(u64, oneshot::Sender<Result<T, ServiceError>>) -> Msg,
    ) -> Result<T, ServiceError> {
        let req = self.next_req.fetch_add(1, Ordering::Relaxed);
        let (reply, rx) = oneshot::channel();
        self.tx.send(msg(req, reply)).map_err(|_| gone())?;
        let mut watch = GoneGuard {
            tx: &self.tx,
            req,
            waiting: true,
        };
        let answer = rx.await;
        watch.waiting = false;
        answer.map_err(|_| gone())?
    }

    fn check_lease(&self, lease_ms: u64) -> Result<(), ServiceError> {
        match lease_ms {
            0 => Err(ServiceError::ZeroLease),
            n if n > self.max_lease_ms => Err(ServiceError::LeaseTooLong {
                got: n,
                max: self.max_lease_ms,
            }),
            _ => Ok(()),
        }
    }

    /// Take `key`, waiting up to `wait` in the key's FIFO queue if it is held.
    pub async fn acquire(
        &self,
        key: &str,
        lease_ms: u64,
        wait: Duration,
    ) -> Result<Acquired, ServiceError> {
        check_key(key)?;
        self.check_lease(lease_ms)?;
        self.ask(|req, reply| Msg::Acquire {
            req,
            key: key.to_string(),
            lease_ms,
            wait,
            reply,
        })
        .await
    }

    /// Free `key`, if `token` is its holder's (checked before proposing).
    pub async fn release(&self, key: &str, token: u64) -> Result<(), ServiceError> {
        check_key(key)?;
        self.ask(|req, reply| Msg::Release {
            req,
            key: key.to_string(),
            token,
            reply,
        })
        .await
    }

    /// Extend the lease of `token` on `key` by its full `lease_ms`, counted
    /// from before this node confirmed with a quorum that it is still the
    /// leader (read-index). A deposed or partitioned leader cannot confirm,
    /// so it cannot extend. Returns the lease in ms.
    pub async fn keepalive(&self, key: &str, token: u64) -> Result<u64, ServiceError> {
        check_key(key)?;
        let from = Instant::now();
        let limit = self.election_max;
        match tokio::time::timeout(limit, read::confirm(&self.raft, self.id)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(ServiceError::Unavailable(format!(
                    "node {} could not confirm its leadership with a quorum within {} ms",
                    self.id,
                    limit.as_millis()
                )))
            }
        }
        self.ask(|req, reply| Msg::Extend {
            req,
            key: key.to_string(),
            token,
            from,
            reply,
        })
        .await
    }

    /// The holders of `key` in token order (empty: free), read
    /// linearizably (read-index through the leader).
    pub async fn holders(&self, key: &str) -> Result<Vec<HolderInfo>, ServiceError> {
        check_key(key)?;
        read::confirm(&self.raft, self.id).await?;
        self.sm
            .holders(key)
            .map_err(|e| ServiceError::StateMachine(e.to_string()))
    }
}

/// Tells the actor when a caller stops waiting before its answer came.
struct GoneGuard<'a> {
    tx: &'a mpsc::UnboundedSender<Msg>,
    req: u64,
    waiting: bool,
}

impl Drop for GoneGuard<'_> {
    fn drop(&mut self) {
        if self.waiting {
            let _ = self.tx.send(Msg::Gone { req: self.req });
        }
    }
}
