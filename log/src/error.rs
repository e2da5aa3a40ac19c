//! The one error type of the log. Every variant names the file it concerns,
//! so an operator reading the message knows where to look.

use std::io;
use std::path::{Path, PathBuf};

/// Errors of the write-ahead log and of the atomic meta files.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// An operating-system call on `path` failed.
    #[error("I/O error on {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A record that is not a torn tail failed verification. Recovery never
    /// skips such a record: the log after it could hold acknowledged writes.
    #[error("corrupt WAL record in {} at offset {offset}: {reason}", .file.display())]
    Corrupt {
        file: PathBuf,
        offset: u64,
        reason: String,
    },

    /// A segment file does not start with a valid header of this format.
    #[error("bad WAL segment header in {}: {reason}", .file.display())]
    BadHeader { file: PathBuf, reason: String },

    /// Segment sequence numbers must be contiguous; this one is absent.
    #[error("WAL segment {} is missing: segment sequence numbers must be contiguous", .file.display())]
    MissingSegment { file: PathBuf },

    /// A `*.wal` file whose name is not `<16 digits>.wal`.
    #[error("unexpected file {} in the WAL directory: segment files are named <16 digits>.wal", .file.display())]
    UnexpectedFile { file: PathBuf },

    /// An atomic meta file failed its checksum or framing.
    #[error("corrupt meta file {}: {reason}", .file.display())]
    CorruptMeta { file: PathBuf, reason: String },

    /// A batch or meta value larger than the format allows; nothing was written.
    #[error("{len}-byte write to {} exceeds the limit of {max} bytes", .file.display())]
    TooLarge { file: PathBuf, len: u64, max: u64 },

    /// Another open [`Wal`](super::Wal) (in this or another process) holds
    /// the directory lock.
    #[error("WAL directory lock {} is held by another open WAL", .file.display())]
    Locked { file: PathBuf },

    /// An earlier write or fsync failed, so what reached the disk is unknown
    /// (after a failed fsync the kernel may have dropped the dirty pages).
    /// The only safe continuation is to reopen, which re-verifies the files.
    #[error("WAL segment {} is unusable after an earlier write failure ({reason}); reopen the WAL to recover", .file.display())]
    Poisoned { file: PathBuf, reason: String },
}

/// `map_err` helper: wrap an `io::Error` with the path it concerns.
pub(crate) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> WalError + '_ {
    move |source| WalError::Io {
        path: path.to_path_buf(),
        source,
    }
}
