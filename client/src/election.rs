//! Leader election (docs/elections.md): an election named NAME is the
//! exclusive lock of key NAME. Its holder is the leader, its fencing token
//! the leadership's epoch, its value what the leader publishes.
//!
//! * [`Client::campaign`]: wait to become leader, publishing a value; the
//!   [`LockGuard`] is the leadership (renewed in the background, resigned
//!   by [`LockGuard::release`]).
//! * [`Client::proclaim`] (in [`crate::session`]): the leader publishes a
//!   new value.
//! * [`Client::observe`]: the leader now, then each change, from one
//!   linearizable read and a watch from the index it was read at, so no
//!   change is missed and none is seen twice.
//!
//! Candidates queue in FIFO order (the lock's waiters): resigning hands
//! the leadership to the next candidate in one commit.

use std::time::Duration;

use futures::StreamExt;

use crate::client::{Client, ClientError, LockGuard};
use crate::proto::{ChangeKind, HolderId, LeaderView};
use crate::watch::{Watch, WatchEvent};
use crate::AcquireOptions;

/// An election's leader as observers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leader {
    /// The leadership's epoch (its fencing token; 0 when this caller may
    /// not see it).
    pub epoch: u64,
    pub holder: Option<HolderId>,
    pub value: String,
}

impl From<LeaderView> for Leader {
    fn from(v: LeaderView) -> Leader {
        Leader {
            epoch: v.token,
            holder: v.holder,
            value: v.value,
        }
    }
}

/// The leaders of one election, as they change ([`Client::observe`]).
pub struct Observe {
    name: String,
    watch: Watch,
    /// The leader as last reported (`None`: no leader).
    current: Option<Leader>,
    /// The first answer: the leader at the read, before any change.
    first: Option<Option<Leader>>,
}

impl Client {
    /// Campaign in election `name`: wait up to `wait` to become its leader,
    /// publishing `value`, with a leadership lease of `ttl` (renewed by
    /// the guard until dropped or released).
    pub async fn campaign(
        &self,
        name: &str,
        value: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<LockGuard, ClientError> {
        let opts = AcquireOptions::exclusive(ttl).wait(wait).value(value);
        self.acquire_with(name, opts).await
    }

    /// Follow election `name`: its leader now, then each change.
    pub async fn observe(&self, name: &str) -> Result<Observe, ClientError> {
        let (index, leader) = self.leader(name).await?;
        let leader = leader.map(Leader::from);
        Ok(Observe {
            name: name.to_string(),
            watch: self.watch(name, Some(index + 1)),
            current: leader.clone(),
            first: Some(leader),
        })
    }
}

impl Observe {
    /// The next leader: first the one at the read, then one answer per
    /// change of leader or of its value (`None` inside: no leader now).
    /// Ends (`None`) when the watch ends; an error when it is cut.
    pub async fn next(&mut self) -> Option<Result<Option<Leader>, ClientError>> {
        if let Some(first) = self.first.take() {
            return Some(Ok(first));
        }
        loop {
            let batch = match self.watch.next().await? {
                Err(e) => return Some(Err(e)),
                Ok(WatchEvent::Progress(_)) => continue,
                Ok(WatchEvent::Changes(b)) => b,
            };
            let before = self.current.clone();
            // The watch is by prefix: only this election's key counts.
            for c in batch.changes.into_iter().filter(|c| c.key == self.name) {
                self.current = match (c.kind, self.current.take()) {
                    (ChangeKind::Granted { token, holder, .. }, _) => Some(Leader {
                        epoch: token,
                        holder: Some(holder),
                        value: String::new(),
                    }),
                    // The key is exclusive: whatever ends or changes a
                    // holding of it is the leader's (a hidden epoch is 0,
                    // so tokens are not compared).
                    (ChangeKind::Value { value, .. }, Some(l)) => Some(Leader { value, ..l }),
                    (ChangeKind::Released { .. } | ChangeKind::Expired { .. }, _) => None,
                    (ChangeKind::Value { .. }, None) => None,
                };
            }
            if self.current != before {
                return Some(Ok(self.current.clone()));
            }
        }
    }
}
