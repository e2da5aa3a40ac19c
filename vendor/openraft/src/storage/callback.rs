//! Callbacks used by Storage API

use std::io;

use tokio::sync::oneshot;

use tokio::sync::mpsc;

use crate::async_runtime::AsyncOneshotSendExt;
use crate::core::notify::Notify;
use crate::raft_state::io_state::log_io_id::LogIOId;
use crate::type_config::alias::OneshotSenderOf;
use crate::LogId;
use crate::RaftTypeConfig;
use crate::StorageIOError;
use crate::Vote;

/// A oneshot callback for completion of log io operation.
pub struct LogFlushed<C>
where C: RaftTypeConfig
{
    log_io_id: LogIOId<C::NodeId>,
    to: FlushTo<C>,
}

/// Who learns that a flush completed.
// lockd: a leader's own append reports to the core instead of to a caller
// that waits, so the leader replicates while it syncs (vendor/openraft/PATCHED.md).
enum FlushTo<C>
where C: RaftTypeConfig
{
    /// A caller waiting on a oneshot (a follower's append, the test suite).
    Caller(OneshotSenderOf<C, Result<LogIOId<C::NodeId>, io::Error>>),
    /// The core, as a notification: a leader's own append, which it did
    /// not wait for.
    Core {
        tx: mpsc::UnboundedSender<Notify<C>>,
        vote: Vote<C::NodeId>,
        last_log_id: LogId<C::NodeId>,
    },
}

impl<C> LogFlushed<C>
where C: RaftTypeConfig
{
    pub(crate) fn new(
        log_io_id: LogIOId<C::NodeId>,
        tx: OneshotSenderOf<C, Result<LogIOId<C::NodeId>, io::Error>>,
    ) -> Self {
        Self {
            log_io_id,
            to: FlushTo::Caller(tx),
        }
    }

    /// A callback that reports the flush of a leader's own append to the
    /// core as [`Notify::LocalLogFlushed`].
    pub(crate) fn to_core(
        tx: mpsc::UnboundedSender<Notify<C>>,
        vote: Vote<C::NodeId>,
        last_log_id: LogId<C::NodeId>,
    ) -> Self {
        Self {
            log_io_id: LogIOId::new(vote.clone(), Some(last_log_id.clone())),
            to: FlushTo::Core { tx, vote, last_log_id },
        }
    }

    /// Report log io completion event.
    ///
    /// It will be called when the log is successfully appended to the storage or an error occurs.
    pub fn log_io_completed(self, result: Result<(), io::Error>) {
        if let Err(e) = &result {
            tracing::error!("LogFlush error: {}, while flushing upto {}", e, self.log_io_id);
        }
        match self.to {
            FlushTo::Caller(tx) => {
                let res = tx.send(result.map(|_| self.log_io_id));
                if let Err(e) = res {
                    tracing::error!("failed to send log io completion event: {:?}", e);
                }
            }
            FlushTo::Core { tx, vote, last_log_id } => {
                let res = tx.send(Notify::LocalLogFlushed {
                    vote,
                    last_log_id,
                    result,
                });
                if res.is_err() {
                    tracing::error!("failed to send log io completion event: the core has stopped");
                }
            }
        }
    }
}

/// A oneshot callback for completion of applying logs to state machine.
pub struct LogApplied<C>
where C: RaftTypeConfig
{
    last_log_id: LogId<C::NodeId>,
    tx: oneshot::Sender<Result<(LogId<C::NodeId>, Vec<C::R>), StorageIOError<C::NodeId>>>,
}

impl<C> LogApplied<C>
where C: RaftTypeConfig
{
    #[allow(dead_code)]
    pub(crate) fn new(
        last_log_id: LogId<C::NodeId>,
        tx: oneshot::Sender<Result<(LogId<C::NodeId>, Vec<C::R>), StorageIOError<C::NodeId>>>,
    ) -> Self {
        Self { last_log_id, tx }
    }

    /// Report apply io completion event.
    ///
    /// It will be called when the log is successfully applied to the state machine or an error
    /// occurs.
    pub fn completed(self, result: Result<Vec<C::R>, StorageIOError<C::NodeId>>) {
        let res = match result {
            Ok(x) => {
                tracing::debug!("LogApplied upto {}", self.last_log_id);
                let resp = (self.last_log_id.clone(), x);
                self.tx.send(Ok(resp))
            }
            Err(e) => {
                tracing::error!("LogApplied error: {}, while applying upto {}", e, self.last_log_id);
                self.tx.send(Err(e))
            }
        };

        if let Err(_e) = res {
            tracing::error!("failed to send apply complete event, last_log_id: {}", self.last_log_id);
        }
    }
}
