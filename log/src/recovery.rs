//! Recovery: verify every segment in order, replay its ops, cut a torn tail
//! from the last segment, and refuse anything else that fails verification.
//!
//! Zeros from the last record to the end of the last segment are the
//! padding the log lays ahead of its writes; they are cut quietly.
//!
//! The rule that matters: a bad record may be dropped only if it is the very
//! end of the log, because only the final `write_batch` can have been cut
//! short by a crash, and a batch is acknowledged only after its fsync. The
//! end is where no valid record follows, not where the file ends: a crash
//! inside the last write can leave any of its blocks unwritten (zeros) and
//! later ones written. A bad record with a valid one after it, or in an
//! older segment, means the disk lost data that was acknowledged, and
//! recovery stops with [`WalError::Corrupt`] instead of guessing.

use std::collections::BTreeMap;
use std::path::Path;

use super::disk::disk;
use super::error::{io_err, WalError};
use super::meta::sync_dir;
use super::record::{find_record_from, scan, Resync, ScanEnd};
use super::segment::{
    check_header, create_segment, list_dir, segment_name, HeaderCheck, SegmentInfo, HEADER_LEN,
};
use super::{Recovered, TornTail, WalOp};

pub(crate) struct Outcome {
    /// Every segment, in order, with its index range and (post-cut) length.
    pub segments: Vec<SegmentInfo>,
    pub recovered: Recovered,
}

pub(crate) fn recover(dir: &Path) -> Result<Outcome, WalError> {
    let listing = list_dir(dir)?;
    if !listing.stray_tmps.is_empty() {
        for tmp in &listing.stray_tmps {
            tracing::warn!(file = %tmp.display(), "removing a WAL segment whose creation never finished");
            disk().remove_file(tmp).map_err(io_err(tmp))?;
        }
        sync_dir(dir)?;
    }

    // Purge deletes from the front only, so a gap means a lost file.
    if let Some(&(first, _)) = listing.segments.first() {
        for (expected, (seq, _)) in (first..).zip(&listing.segments) {
            if *seq != expected {
                return Err(WalError::MissingSegment {
                    file: dir.join(segment_name(expected)),
                });
            }
        }
    }

    let count = listing.segments.len();
    let mut entries = BTreeMap::new();
    let mut segments = Vec::with_capacity(count);
    let mut torn_tail = None;
    for (i, (seq, path)) in listing.segments.into_iter().enumerate() {
        let is_last = i + 1 == count;
        // A segment is at most segment_bytes plus one bounded record.
        let buf = disk().read(&path).map_err(io_err(&path))?;
        match check_header(&buf, seq) {
            HeaderCheck::Ok => {}
            HeaderCheck::Incomplete if is_last => {
                // Creation was interrupted before any record could be
                // written; lay the header down again.
                tracing::warn!(file = %path.display(), bytes = buf.len(), "rewriting the incomplete header of the last WAL segment");
                let (_, path) = create_segment(dir, seq)?;
                torn_tail = Some(TornTail {
                    file: path.clone(),
                    offset: 0,
                    dropped_bytes: buf.len() as u64,
                });
                segments.push(SegmentInfo::new(seq, path, HEADER_LEN as u64));
                continue;
            }
            HeaderCheck::Incomplete => {
                let reason = format!(
                    "incomplete header ({} bytes) in a segment that is not the last",
                    buf.len()
                );
                return Err(WalError::BadHeader { file: path, reason });
            }
            HeaderCheck::Bad(reason) => return Err(WalError::BadHeader { file: path, reason }),
        }

        let (records, end) = scan(&buf, HEADER_LEN);
        let mut info = SegmentInfo::new(seq, path, buf.len() as u64);
        match end {
            ScanEnd::Clean => {}
            ScanEnd::Corrupt { offset, reason } => {
                return Err(WalError::Corrupt {
                    file: info.path,
                    offset,
                    reason,
                })
            }
            ScanEnd::Zeros { offset, reason } | ScanEnd::TornCandidate { offset, reason }
                if !is_last =>
            {
                // Older segments were fsynced, and cut after their last
                // record, before the next one was created: they cannot
                // end in a torn write or in zeros.
                let reason = format!("{reason}, in a segment that is not the last");
                return Err(WalError::Corrupt {
                    file: info.path,
                    offset,
                    reason,
                });
            }
            ScanEnd::Zeros { offset, .. } => {
                // The padding laid ahead of the records (or a last write
                // of which nothing reached the disk): cut, not reported.
                cut(&info.path, offset)?;
                tracing::debug!(file = %info.path.display(), offset, dropped_bytes = info.len - offset, "cut the zeros after the WAL's last record");
                info.len = offset;
            }
            ScanEnd::TornCandidate { offset, reason } => {
                #[cfg(feature = "faults")]
                if lockd_core::faults::get().refuse_torn_tail {
                    let reason = format!("{reason} (test fault: every torn tail refused)");
                    return Err(WalError::Corrupt {
                        file: info.path,
                        offset,
                        reason,
                    });
                }
                let start = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1);
                match find_record_from(&buf, start) {
                    Resync::NotFound => {}
                    Resync::Found(next) => {
                        let reason = format!(
                            "{reason}, but a valid record follows at offset {next}, so this is not a torn write"
                        );
                        return Err(WalError::Corrupt {
                            file: info.path,
                            offset,
                            reason,
                        });
                    }
                    Resync::GaveUp => {
                        let reason = format!("{reason}, and the bytes after it could not be ruled out as valid records within the scan budget");
                        return Err(WalError::Corrupt {
                            file: info.path,
                            offset,
                            reason,
                        });
                    }
                }
                let dropped_bytes = info.len - offset;
                cut(&info.path, offset)?;
                tracing::warn!(file = %info.path.display(), offset, dropped_bytes, %reason, "cut a torn tail from the WAL (an unacknowledged batch)");
                torn_tail = Some(TornTail {
                    file: info.path.clone(),
                    offset,
                    dropped_bytes,
                });
                info.len = offset;
            }
        }
        for ops in &records {
            apply(&mut entries, &mut info, ops);
        }
        segments.push(info);
    }
    Ok(Outcome {
        segments,
        recovered: Recovered { entries, torn_tail },
    })
}

fn apply(entries: &mut BTreeMap<u64, Vec<u8>>, info: &mut SegmentInfo, ops: &[WalOp<'_>]) {
    for op in ops {
        match *op {
            WalOp::Append { index, payload } => {
                entries.insert(index, payload.to_vec());
                info.note_append(index);
            }
            WalOp::Truncate { since } => {
                let _dropped = entries.split_off(&since);
            }
        }
    }
}

/// Cut `path` to `len` bytes durably.
fn cut(path: &Path, len: u64) -> Result<(), WalError> {
    disk().truncate(path, len).map_err(io_err(path))
}
