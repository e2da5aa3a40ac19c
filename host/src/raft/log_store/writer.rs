//! Who writes the log: a thread of its own with group commit
//! (production), or the caller (the deterministic simulation).

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};

use openraft::storage::LogFlushed;
use tokio::sync::oneshot;

use super::Shared;
use crate::log::{Wal, WalOp};
use crate::raft::TypeConfig;

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

/// Who carries out the log's writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Writer {
    /// A thread of its own, with group commit: the runtime never waits on
    /// the disk.
    #[default]
    Thread,
    /// The caller, before its write returns: one batch per request. For
    /// the deterministic simulation, where a thread's timing would be a
    /// source of randomness outside the seed.
    Inline,
}

/// Where requests go: the writer thread's queue, or the log itself.
#[derive(Clone)]
pub(super) enum Sink {
    Thread(mpsc::Sender<WriteReq>),
    Inline(Arc<Mutex<Wal>>),
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
        let WriteReq::Append { entries, callback } = first else {
            write(&mut wal, &shared, first);
            continue;
        };
        // Drain every append already queued into the same batch.
        let mut batch = vec![(entries, callback)];
        while let Ok(next) = rx.try_recv() {
            match next {
                WriteReq::Append { entries, callback } => batch.push((entries, callback)),
                other => {
                    pending = Some(other);
                    break;
                }
            }
        }
        append(&mut wal, &shared, batch);
    }
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
