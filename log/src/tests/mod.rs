//! Tests of the whole log: round trips, rotation and purge
//! (`lifecycle`), the recovery rules against files damaged the way crashes
//! and bad disks damage them (`recovery`), and here the helpers they share
//! and the write path's limits.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use super::segment::{encode_header, segment_name, HEADER_LEN};
use super::*;

fn opts(segment_bytes: u64) -> WalOptions {
    WalOptions { segment_bytes }
}

fn open(dir: &Path, o: WalOptions) -> (Wal, Recovered) {
    Wal::open(dir, o).expect("open WAL")
}

fn open_err(dir: &Path) -> WalError {
    Wal::open(dir, WalOptions::default()).expect_err("open must fail")
}

fn payload(i: u64) -> Vec<u8> {
    format!("entry-{i};")
        .repeat((i % 4 + 1) as usize)
        .into_bytes()
}

/// Append `indexes` as one batch, mirroring it into `model`; returns the
/// (start offset, end offset) of the record in the active segment.
fn append(
    wal: &mut Wal,
    model: &mut BTreeMap<u64, Vec<u8>>,
    indexes: impl IntoIterator<Item = u64>,
) -> (u64, u64) {
    let payloads: Vec<(u64, Vec<u8>)> = indexes.into_iter().map(|i| (i, payload(i))).collect();
    let ops: Vec<WalOp> = payloads
        .iter()
        .map(|(i, p)| WalOp::Append {
            index: *i,
            payload: p,
        })
        .collect();
    let (before, seq_before) = active_len(wal);
    wal.write_batch(&ops).expect("write batch");
    let (after, seq_after) = active_len(wal);
    model.extend(payloads);
    // A rotation moves the record to the start of a fresh segment.
    let start = if seq_after == seq_before {
        before
    } else {
        HEADER_LEN as u64
    };
    (start, after)
}

fn truncate(wal: &mut Wal, model: &mut BTreeMap<u64, Vec<u8>>, since: u64) {
    wal.write_batch(&[WalOp::Truncate { since }])
        .expect("truncate");
    model.retain(|k, _| *k < since);
}

fn active_len(wal: &Wal) -> (u64, u64) {
    let s = wal.segments.last().expect("active segment");
    (s.len, s.seq)
}

fn seg_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(segment_name(seq))
}

fn flip_byte(path: &Path, offset: u64) {
    let mut raw = fs::read(path).unwrap();
    raw[offset as usize] ^= 0x40;
    fs::write(path, raw).unwrap();
}

fn set_len(path: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn assert_corrupt(err: WalError, want_file: &Path, want_offset: u64, want_reason: &str) {
    let msg = err.to_string();
    match err {
        WalError::Corrupt {
            file,
            offset,
            reason,
        } => {
            assert_eq!(file, want_file, "{msg}");
            assert_eq!(offset, want_offset, "{msg}");
            assert!(
                reason.contains(want_reason),
                "reason {reason:?} lacks {want_reason:?}"
            );
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let expected = format!(
        "corrupt WAL record in {} at offset {want_offset}: ",
        want_file.display()
    );
    assert!(msg.starts_with(&expected), "{msg}");
}

mod damage;
mod lifecycle;
mod recovery;

#[test]
fn stats_count_one_fsync_per_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = open(tmp.path(), WalOptions::default());
    let mut model = BTreeMap::new();
    let mut next = 1;
    let mut ops = 0;
    let mut bytes = 0;
    for size in [1u64, 10, 100, 1000] {
        let (start, end) = append(&mut wal, &mut model, next..next + size);
        next += size;
        ops += size;
        bytes += end - start;
    }
    truncate(&mut wal, &mut model, 50);
    wal.write_batch(&[]).unwrap(); // empty: nothing written, nothing synced
    let s = wal.stats();
    assert_eq!(
        s,
        WalStats {
            batches: 5,
            fsyncs: 5,
            ops: ops + 1,
            bytes: bytes + 8 + 13
        }
    );
}

#[test]
fn a_second_open_of_the_same_dir_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (wal, _) = open(tmp.path(), WalOptions::default());
    let err = open_err(tmp.path());
    assert!(
        matches!(&err, WalError::Locked { file } if file == &tmp.path().join("LOCK")),
        "{err:?}"
    );
    drop(wal);
    drop(open(tmp.path(), WalOptions::default()));
}

#[test]
fn oversized_batch_is_refused_without_poisoning() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = open(tmp.path(), WalOptions::default());
    // Zeroed allocation: the pages are never touched, the size check comes first.
    let huge = vec![0u8; record::MAX_PAYLOAD_LEN];
    let err = wal
        .write_batch(&[WalOp::Append {
            index: 1,
            payload: &huge,
        }])
        .unwrap_err();
    assert!(matches!(err, WalError::TooLarge { .. }), "{err:?}");
    assert!(err
        .to_string()
        .contains(&seg_path(tmp.path(), 1).display().to_string()));
    wal.write_batch(&[WalOp::Append {
        index: 1,
        payload: b"fine",
    }])
    .unwrap();
    assert_eq!(wal.stats().batches, 1);
}

#[test]
fn poisoned_wal_refuses_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = open(tmp.path(), WalOptions::default());
    wal.poisoned = Some("fdatasync failed: EIO".into());
    let err = wal
        .write_batch(&[WalOp::Truncate { since: 1 }])
        .unwrap_err();
    assert!(
        matches!(&err, WalError::Poisoned { file, .. } if file == &seg_path(tmp.path(), 1)),
        "{err:?}"
    );
    assert!(err.to_string().contains("reopen"));
    assert!(matches!(wal.purge(1), Err(WalError::Poisoned { .. })));
}
