//! Who writes the log: a thread of its own with group commit
//! (production), the caller, or a task whose syncs take time (the
//! deterministic simulation).

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use openraft::storage::LogFlushed;
use tokio::sync::oneshot;

use super::Shared;
use crate::TypeConfig;
use lockd_log::{Wal, WalOp};

/// A request to the writer.
pub(super) enum WriteReq {
    Append {
        entries: Vec<(u64, Vec<u8>)>,
        callback: LogFlushed<TypeConfig>,
    },
    Truncate {
        since: u64,
        done: oneshot::Sender<Result<(), String>>,
    },
    Purge {
        upto: u64,
        done: oneshot::Sender<Result<(), String>>,
    },
}

/// How long the next batch's write and sync take (drawn per batch).
pub type SyncTime = Arc<dyn Fn() -> Duration + Send + Sync>;

/// Who carries out the log's writes.
#[derive(Clone, Default)]
pub enum Writer {
    /// A thread of its own, with group commit: the runtime never waits on
    /// the disk.
    #[default]
    Thread,
    /// The caller, before its write returns: one batch per request. For
    /// the deterministic simulation, where a thread's timing would be a
    /// source of randomness outside the seed.
    Inline,
    /// A task on the caller's runtime, with group commit like the thread,
    /// that waits the given time before each batch's write and sync. For
    /// the deterministic simulation: under its clock a sync takes time, a
    /// leader's replication runs beside its own sync as in production,
    /// and a crash can fall while appends wait for the disk (they are
    /// then lost, as unsynced writes are).
    Task(SyncTime),
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Writer::Thread => "Thread",
            Writer::Inline => "Inline",
            Writer::Task(_) => "Task",
        })
    }
}

/// Where requests go: the writer thread's or task's queue, or the log
/// itself.
#[derive(Clone)]
pub(super) enum Sink {
    Thread(mpsc::Sender<WriteReq>),
    Inline(Arc<Mutex<Wal>>),
    Task(tokio::sync::mpsc::UnboundedSender<WriteReq>),
}

fn io_err(e: impl ToString) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Encoded entries (index, bytes) and who waits for them to be durable.
type Appended = (Vec<(u64, Vec<u8>)>, LogFlushed<TypeConfig>);

/// The writer thread: group commit.
pub(super) fn writer(mut wal: Wal, rx: mpsc::Receiver<WriteReq>, shared: Arc<Shared>) {
    let mut pending: Option<WriteReq> = None;
    loop {
        let first = match pending.take() {
            Some(r) => r,
            None => match rx.recv() {
                Ok(r) => r,
                Err(_) => return, // every LogStore is gone
            },
        };
        pending = carry_out(&mut wal, &shared, first, || rx.try_recv().ok());
    }
}

/// The writer task: group commit, each batch after its sync time.
pub(super) async fn task_writer(
    mut wal: Wal,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<WriteReq>,
    shared: Arc<Shared>,
    sync_time: SyncTime,
) {
    let mut pending: Option<WriteReq> = None;
    loop {
        let first = match pending.take() {
            Some(r) => r,
            None => match rx.recv().await {
                Some(r) => r,
                None => return, // every LogStore is gone
            },
        };
        let takes = sync_time();
        // A zero wait would still wait for the timer's next turn.
        if !takes.is_zero() {
            tokio::time::sleep(takes).await;
        }
        pending = carry_out(&mut wal, &shared, first, || rx.try_recv().ok());
    }
}

/// Carry out `first`; an append takes every append already queued
/// (`next`) into the same batch. The request that ended the batch, if
/// one did, is returned to go next.
fn carry_out(
    wal: &mut Wal,
    shared: &Shared,
    first: WriteReq,
    mut next: impl FnMut() -> Option<WriteReq>,
) -> Option<WriteReq> {
    let WriteReq::Append { entries, callback } = first else {
        write(wal, shared, first);
        return None;
    };
    let mut batch = vec![(entries, callback)];
    let mut pending = None;
    while let Some(req) = next() {
        match req {
            WriteReq::Append { entries, callback } => batch.push((entries, callback)),
            other => {
                pending = Some(other);
                break;
            }
        }
    }
    append(wal, shared, batch);
    pending
}

/// Carry out one request.
pub(super) fn write(wal: &mut Wal, shared: &Shared, req: WriteReq) {
    match req {
        WriteReq::Append { entries, callback } => append(wal, shared, vec![(entries, callback)]),
        WriteReq::Truncate { since, done } => {
            let r = wal
                .write_batch(&[WalOp::Truncate { since }])
                .map_err(|e| e.to_string());
            if r.is_ok() {
                shared.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
            }
            let _ = done.send(r);
        }
        WriteReq::Purge { upto, done } => {
            let _ = done.send(wal.purge(upto).map(|_| ()).map_err(|e| e.to_string()));
        }
    }
}

/// Write appends as one record with one fsync, then complete them all.
fn append(wal: &mut Wal, shared: &Shared, batch: Vec<Appended>) {
    let ops: Vec<WalOp> = batch
        .iter()
        .flat_map(|(entries, _)| {
            entries.iter().map(|(index, bytes)| WalOp::Append {
                index: *index,
                payload: bytes,
            })
        })
        .collect();
    let n = ops.len() as u64;
    let started = std::time::Instant::now();
    let result = wal.write_batch(&ops);
    shared.stats.fsync_latency.since(started);
    drop(ops);
    if result.is_ok() {
        shared.stats.entries.fetch_add(n, Ordering::Relaxed);
        shared.stats.batches.fetch_add(1, Ordering::Relaxed);
        shared.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        shared
            .stats
            .bytes
            .store(wal.stats().bytes, Ordering::Relaxed);
        let indexes = batch.iter().flat_map(|(e, _)| e.iter().map(|(i, _)| *i));
        shared.stats.stages.fsynced(indexes);
    }
    for (_, callback) in batch {
        callback.log_io_completed(result.as_ref().map(|_| ()).map_err(io_err));
    }
    if let Err(e) = result {
        tracing::error!(error = %e, "log write failed; the log is no longer writable");
    }
}
