//! The write side of [`Wal`]: one record written and synced, the padding
//! laid ahead of it, and rotation to a new segment.

use std::io;

use super::disk::disk;
use super::error::io_err;
use super::segment::{self, SegmentInfo, HEADER_LEN};
use super::{Wal, WalError, WalOp, RESERVE_BYTES};

impl Wal {
    /// Rotate if due, then write and sync the record in `self.buf`.
    pub(super) fn append_encoded(&mut self, ops: &[WalOp<'_>]) -> Result<(), WalError> {
        if self.rotation_due() {
            self.rotate()?;
        }
        let Some(seg) = self.segments.last_mut() else {
            // Unreachable: open creates a segment and purge keeps the last.
            let source = io::Error::other("the WAL has no active segment");
            return Err(WalError::Io {
                path: self.dir.clone(),
                source,
            });
        };
        let end = seg.len + self.buf.len() as u64;
        if end > self.reserved {
            // Zeros for this record and the next ones, up to the segment's
            // size; the last record may take it past that.
            let room = self.opts.segment_bytes.saturating_sub(seg.len);
            let bytes = (self.buf.len() as u64).max(RESERVE_BYTES.min(room));
            self.active.reserve(bytes).map_err(io_err(&seg.path))?;
            self.reserved = seg.len + bytes;
        }
        self.active
            .write_all(&self.buf)
            .map_err(io_err(&seg.path))?;
        #[cfg(feature = "faults")]
        let skip = lockd_core::faults::get().ack_before_sync;
        #[cfg(not(feature = "faults"))]
        let skip = false;
        if !skip {
            self.active.sync_data().map_err(io_err(&seg.path))?;
        }
        seg.len += self.buf.len() as u64;
        for op in ops {
            if let WalOp::Append { index, .. } = op {
                seg.note_append(*index);
            }
        }
        self.stats.batches += 1;
        self.stats.fsyncs += 1;
        self.stats.ops += ops.len() as u64;
        self.stats.bytes += self.buf.len() as u64;
        Ok(())
    }

    /// Rotate once the active segment is full, but never away from a
    /// segment without records (a tiny `segment_bytes` must not produce a
    /// trail of empty files).
    fn rotation_due(&self) -> bool {
        self.segments
            .last()
            .is_some_and(|s| s.has_records() && s.len >= self.opts.segment_bytes)
    }

    fn rotate(&mut self) -> Result<(), WalError> {
        let seq = self.segments.last().map_or(1, |s| s.seq + 1);
        // The outgoing segment's records were each fsynced when written;
        // its zeros are cut before the next segment exists, so only the
        // last segment can end in zeros (recovery's rule).
        if let Some(last) = self.segments.last() {
            if self.reserved > last.len {
                disk()
                    .truncate(&last.path, last.len)
                    .map_err(io_err(&last.path))?;
            }
        }
        let (file, path) = segment::create_segment(&self.dir, seq)?;
        tracing::debug!(file = %path.display(), "rotated to a new WAL segment");
        self.active = file;
        self.reserved = HEADER_LEN as u64;
        self.segments
            .push(SegmentInfo::new(seq, path, HEADER_LEN as u64));
        Ok(())
    }
}
