//! [`LockService`]: what the HTTP and framed APIs call. Requests are
//! checked here — key and lease rules — and tokens in the actor, **before**
//! anything is proposed, so bad input never reaches the log.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::actor::{self, Msg, ServiceStats};
use super::error::{check_key, Acquired, ServiceError};
use super::proposer::Proposer;
use super::read;
use crate::command::LockInfo;
use crate::raft::state_machine::StateMachineStore;
use crate::raft::{NodeId, Raft};

/// The lock service of a node. Cheap to clone.
#[derive(Clone)]
pub struct LockService {
    tx: mpsc::UnboundedSender<Msg>,
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
            stats,
            id,
            raft,
            sm,
            max_lease_ms,
            election_max,
        }
    }

    /// Send the actor a request and wait for its answer.
    async fn ask<T>(
        &self,
        msg: impl FnOnce(oneshot::Sender<Result<T, ServiceError>>) -> Msg,
    ) -> Result<T, ServiceError> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(msg(reply)).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
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
        self.ask(|reply| Msg::Acquire {
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
        self.ask(|reply| Msg::Release {
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
        self.ask(|reply| Msg::Extend {
            key: key.to_string(),
            token,
            from,
            reply,
        })
        .await
    }

    /// The holder of `key`, read linearizably (read-index through the leader).
    pub async fn get(&self, key: &str) -> Result<Option<LockInfo>, ServiceError> {
        check_key(key)?;
        read::confirm(&self.raft, self.id).await?;
        self.sm
            .get(key)
            .map_err(|e| ServiceError::StateMachine(e.to_string()))
    }
}
