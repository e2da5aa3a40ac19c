//! [`ServiceTasks`]: the tasks the lock service starts (its actor, the
//! proposer, each proposal, read-index and load), tracked so that the
//! node's shutdown (`lockd::node::Node::shutdown`) waits for them as for
//! everything else it started.
//!
//! They are stopped after Raft: a proposal or a read-index in flight ends
//! when Raft does (with an error its caller sees), and the two loops (the
//! actor and the proposer, which hold their own senders and so would never
//! see their channels close) end on [`ServiceTasks::stop`].

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The lock service's tasks and the signal that ends its loops. Cheap to
/// clone.
#[derive(Clone, Default)]
pub struct ServiceTasks {
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl ServiceTasks {
    pub fn new() -> ServiceTasks {
        ServiceTasks::default()
    }

    /// Run `task` on the tracker.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn(task);
    }

    /// Run `task`, a loop that never ends by itself (it holds a sender of
    /// its own channel), until [`ServiceTasks::stop`].
    pub(crate) fn spawn_loop<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = task => {}
                () = stop.cancelled() => {}
            }
        });
    }

    /// End the loops and wait for every task, at most `grace`; returns how
    /// many were still running then.
    pub async fn stop(&self, grace: std::time::Duration) -> usize {
        self.stop.cancel();
        self.tracker.close();
        match tokio::time::timeout(grace, self.tracker.wait()).await {
            Ok(()) => 0,
            Err(_) => self.tracker.len(),
        }
    }

    /// Tasks running now.
    pub fn running(&self) -> usize {
        self.tracker.len()
    }
}
