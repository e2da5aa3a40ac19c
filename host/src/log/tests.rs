//! Tests of the whole log: round trips, rotation, purge, and the recovery
//! rules against files damaged the way crashes and bad disks damage them.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
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

#[test]
fn reopen_returns_identical_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nested").join("wal");
    let mut model = BTreeMap::new();
    {
        let (mut wal, rec) = open(&dir, WalOptions::default());
        assert_eq!(rec, Recovered::default());
        append(&mut wal, &mut model, [1]);
        append(&mut wal, &mut model, 2..=20);
        append(&mut wal, &mut model, [21, 22]);
        // Empty payload and an overwrite of an existing index.
        wal.write_batch(&[
            WalOp::Append {
                index: 23,
                payload: b"",
            },
            WalOp::Append {
                index: 5,
                payload: b"five again",
            },
        ])
        .unwrap();
        model.insert(23, Vec::new());
        model.insert(5, b"five again".to_vec());
        assert_eq!(wal.segment_paths(), vec![seg_path(&dir, 1)]);
    }
    let (mut wal, rec) = open(&dir, WalOptions::default());
    assert_eq!(rec.torn_tail, None);
    assert_eq!(rec.entries, model);
    // Writing goes on in the same segment, and a third open sees both.
    append(&mut wal, &mut model, 24..=30);
    drop(wal);
    let (wal, rec) = open(&dir, WalOptions::default());
    assert_eq!(rec.entries, model);
    assert_eq!(wal.segment_paths().len(), 1);
    assert_eq!(wal.dir(), dir);
}

#[test]
fn truncate_semantics_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    {
        let (mut wal, _) = open(dir, WalOptions::default());
        append(&mut wal, &mut model, 1..=10);
        truncate(&mut wal, &mut model, 6);
        assert_eq!(
            model.keys().copied().collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5]
        );
        // A new leader's entries replace the dropped ones.
        wal.write_batch(&[
            WalOp::Append {
                index: 6,
                payload: b"term2-6",
            },
            WalOp::Append {
                index: 7,
                payload: b"term2-7",
            },
        ])
        .unwrap();
        model.insert(6, b"term2-6".to_vec());
        model.insert(7, b"term2-7".to_vec());
        // Truncate and append in one batch apply in order.
        wal.write_batch(&[
            WalOp::Truncate { since: 7 },
            WalOp::Append {
                index: 7,
                payload: b"term3-7",
            },
        ])
        .unwrap();
        model.insert(7, b"term3-7".to_vec());
        // Truncating beyond the end is a no-op.
        truncate(&mut wal, &mut model, 100);
    }
    let (mut wal, rec) = open(dir, WalOptions::default());
    assert_eq!(rec.entries, model);
    assert_eq!(rec.entries[&7], b"term3-7");
    assert_eq!(rec.entries[&5], payload(5));
    truncate(&mut wal, &mut model, 1);
    drop(wal);
    let (_, rec) = open(dir, WalOptions::default());
    assert!(rec.entries.is_empty());
}

#[test]
fn rotation_spreads_the_log_over_contiguous_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    let n = {
        let (mut wal, _) = open(dir, opts(256));
        for b in 0..40 {
            append(&mut wal, &mut model, b * 3 + 1..=b * 3 + 3);
        }
        let paths = wal.segment_paths();
        assert!(paths.len() >= 5, "only {} segments", paths.len());
        for (i, p) in paths.iter().enumerate() {
            assert_eq!(p, &seg_path(dir, i as u64 + 1));
            let len = fs::metadata(p).unwrap().len();
            if i + 1 < paths.len() {
                // Each non-last segment was filled past the limit before rotating.
                assert!(len >= 256, "{} is {len} bytes", p.display());
            }
        }
        paths.len()
    };
    let (mut wal, rec) = open(dir, opts(256));
    assert_eq!(rec.entries, model);
    assert_eq!(wal.segment_paths().len(), n);
    // Recovery rebuilt the index range of every segment.
    assert!(wal
        .segments
        .iter()
        .all(|s| s.min_index.is_some() && s.min_index <= s.max_index));
    append(&mut wal, &mut model, [1000]);
    drop(wal);
    let (_, rec) = open(dir, opts(256));
    assert_eq!(rec.entries, model);
}

#[test]
fn tiny_segment_limit_makes_no_empty_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut wal, _) = open(tmp.path(), opts(1));
    let mut model = BTreeMap::new();
    for i in 1..=5 {
        append(&mut wal, &mut model, [i]);
    }
    // One record per segment, never a header-only file in between.
    assert_eq!(wal.segment_paths().len(), 5);
    assert!(wal.segments.iter().all(|s| s.has_records()));
}

#[test]
fn purge_deletes_only_whole_older_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    let (mut wal, _) = open(dir, opts(300));
    for b in 0..30 {
        append(&mut wal, &mut model, b * 4 + 1..=b * 4 + 4);
    }
    let before: Vec<(PathBuf, Option<u64>, Option<u64>)> = wal
        .segments
        .iter()
        .map(|s| (s.path.clone(), s.min_index, s.max_index))
        .collect();
    assert!(before.len() >= 6);
    // A purge point inside the third segment.
    let (_, third_min, third_max) = before[2].clone();
    let upto = (third_min.unwrap() + third_max.unwrap()) / 2;
    assert!(third_min.unwrap() <= upto && upto < third_max.unwrap());

    assert_eq!(wal.purge(upto).unwrap(), 2);
    assert!(!before[0].0.exists() && !before[1].0.exists());
    assert!(
        before[2..].iter().all(|(p, _, _)| p.exists()),
        "the segment holding upto+1 stays"
    );
    assert_eq!(wal.purge(upto).unwrap(), 0, "purge is idempotent");

    // More writes after a purge, then purge everything: the active segment stays.
    append(&mut wal, &mut model, [500, 501]);
    let active = wal.segment_paths().last().cloned().unwrap();
    let count = wal.segment_paths().len();
    assert_eq!(wal.purge(u64::MAX).unwrap(), count - 1);
    assert_eq!(wal.segment_paths(), vec![active.clone()]);
    assert!(active.exists());
    drop(wal);

    // What survives is exactly what was written into the active segment.
    let (wal, rec) = open(dir, opts(300));
    assert_eq!(wal.segment_paths(), vec![active]);
    assert!(rec.entries.contains_key(&500) && rec.entries.contains_key(&501));
    for (k, v) in &rec.entries {
        assert_eq!(model.get(k), Some(v));
    }
}

#[test]
fn purge_keeps_entries_above_the_mark_across_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    let upto;
    {
        let (mut wal, _) = open(dir, opts(200));
        for b in 0..20 {
            append(&mut wal, &mut model, b * 2 + 1..=b * 2 + 2);
        }
        upto = 17;
        assert!(wal.purge(upto).unwrap() > 0);
    }
    let (wal, rec) = open(dir, opts(200));
    let above: BTreeMap<u64, Vec<u8>> = model
        .range(upto + 1..)
        .map(|(k, v)| (*k, v.clone()))
        .collect();
    assert_eq!(
        rec.entries
            .range(upto + 1..)
            .map(|(k, v)| (*k, v.clone()))
            .collect::<BTreeMap<_, _>>(),
        above
    );
    // Whatever at or below the mark is still there is in the first segment
    // (the one straddling the mark), with its original payload.
    for (k, v) in rec.entries.range(..=upto) {
        assert_eq!(model.get(k), Some(v));
        assert!(wal.segments[0].min_index.unwrap() <= *k);
    }
    // The sequence now starts past 1 and is still contiguous.
    assert_ne!(wal.segment_paths()[0], seg_path(dir, 1));
}

#[test]
fn purge_with_a_truncate_in_a_kept_segment() {
    // Purging a prefix must not change entries above the mark even when
    // later segments truncate and rewrite the log.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    {
        let (mut wal, _) = open(dir, opts(150));
        for b in 0..10 {
            append(&mut wal, &mut model, b * 2 + 1..=b * 2 + 2);
        }
        truncate(&mut wal, &mut model, 15);
        append(&mut wal, &mut model, 15..=18);
        assert!(wal.purge(10).unwrap() > 0);
    }
    let (_, rec) = open(dir, opts(150));
    let above = |m: &BTreeMap<u64, Vec<u8>>| {
        m.range(11..)
            .map(|(k, v)| (*k, v.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(above(&rec.entries), above(&model));
}

#[test]
fn torn_tail_is_cut_at_any_point_of_the_last_record() {
    let tmp = tempfile::tempdir().unwrap();
    // Cuts inside the 8-byte header, right after it, and inside the payload.
    for cut in [1u64, 4, 7, 8, 9, 20, 60, 0] {
        let dir = tmp.path().join(format!("cut-{cut}"));
        let mut model = BTreeMap::new();
        let (rec_start, rec_end) = {
            let (mut wal, _) = open(&dir, WalOptions::default());
            append(&mut wal, &mut model, 1..=3);
            append(&mut wal, &mut model, 4..=6);
            append(&mut wal, &mut BTreeMap::new(), 7..=9)
        };
        let record_len = rec_end - rec_start;
        // 0 stands for "one byte short of complete".
        let keep = if cut == 0 { record_len - 1 } else { cut };
        assert!(keep < record_len);
        let path = seg_path(&dir, 1);
        set_len(&path, rec_start + keep);

        let (mut wal, rec) = open(&dir, WalOptions::default());
        assert_eq!(
            rec.entries, model,
            "cut {cut}: the torn batch is gone, earlier ones intact"
        );
        assert_eq!(
            rec.torn_tail,
            Some(TornTail {
                file: path.clone(),
                offset: rec_start,
                dropped_bytes: keep
            })
        );
        assert_eq!(
            fs::metadata(&path).unwrap().len(),
            rec_start,
            "the file was cut at the record start"
        );

        // The log goes on cleanly after the cut.
        append(&mut wal, &mut model, 7..=8);
        drop(wal);
        let (_, rec) = open(&dir, WalOptions::default());
        assert_eq!(rec.torn_tail, None);
        assert_eq!(rec.entries, model);
    }
}

#[test]
fn zero_filled_tail_is_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    let end = {
        let (mut wal, _) = open(dir, WalOptions::default());
        append(&mut wal, &mut model, 1..=2);
        append(&mut wal, &mut model, 3..=4).1
    };
    let path = seg_path(dir, 1);
    // The file grew but the data never reached the disk.
    OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&[0u8; 4096])
        .unwrap();
    let (_, rec) = open(dir, WalOptions::default());
    assert_eq!(rec.entries, model);
    assert_eq!(
        rec.torn_tail,
        Some(TornTail {
            file: path.clone(),
            offset: end,
            dropped_bytes: 4096
        })
    );
    assert_eq!(fs::metadata(&path).unwrap().len(), end);
}

#[test]
fn zeroed_final_record_is_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    let (start, end) = {
        let (mut wal, _) = open(dir, WalOptions::default());
        append(&mut wal, &mut model, 1..=2);
        append(&mut wal, &mut BTreeMap::new(), 3..=4)
    };
    let path = seg_path(dir, 1);
    let mut raw = fs::read(&path).unwrap();
    raw[start as usize..].fill(0);
    fs::write(&path, raw).unwrap();
    let (_, rec) = open(dir, WalOptions::default());
    assert_eq!(rec.entries, model);
    assert_eq!(
        rec.torn_tail,
        Some(TornTail {
            file: path,
            offset: start,
            dropped_bytes: end - start
        })
    );
}

#[test]
fn crc_failure_in_the_final_record_is_a_torn_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    let (start, end) = {
        let (mut wal, _) = open(dir, WalOptions::default());
        append(&mut wal, &mut model, 1..=2);
        append(&mut wal, &mut BTreeMap::new(), 3..=4)
    };
    let path = seg_path(dir, 1);
    flip_byte(&path, end - 3);
    let (_, rec) = open(dir, WalOptions::default());
    assert_eq!(rec.entries, model);
    assert_eq!(
        rec.torn_tail,
        Some(TornTail {
            file: path,
            offset: start,
            dropped_bytes: end - start
        })
    );
}

#[test]
fn flipped_byte_in_an_earlier_record_is_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    let (second, _) = {
        let (mut wal, _) = open(dir, WalOptions::default());
        append(&mut wal, &mut model, 1..=2);
        let second = append(&mut wal, &mut model, 3..=4);
        append(&mut wal, &mut model, 5..=6);
        second
    };
    let path = seg_path(dir, 1);
    flip_byte(&path, second + 8 + 10);
    assert_corrupt(open_err(dir), &path, second, "crc mismatch");
    // Refusing to open changed nothing: the file still has all its bytes.
    flip_byte(&path, second + 8 + 10);
    let (_, rec) = open(dir, WalOptions::default());
    assert_eq!(rec.entries, model);
}

#[test]
fn flipped_crc_field_of_an_earlier_record_is_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    {
        let (mut wal, _) = open(dir, WalOptions::default());
        let mut m = BTreeMap::new();
        append(&mut wal, &mut m, [1]);
        append(&mut wal, &mut m, [2]);
    }
    let path = seg_path(dir, 1);
    flip_byte(&path, HEADER_LEN as u64 + 5);
    assert_corrupt(open_err(dir), &path, HEADER_LEN as u64, "crc mismatch");
}

#[test]
fn damaged_length_is_not_mistaken_for_a_torn_tail() {
    // A bit flip that makes an early record seem to run to or past EOF must
    // not let recovery cut away the acknowledged records after it.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let first = {
        let (mut wal, _) = open(dir, WalOptions::default());
        let mut m = BTreeMap::new();
        let first = append(&mut wal, &mut m, 1..=2);
        append(&mut wal, &mut m, 3..=4);
        append(&mut wal, &mut m, 5..=6);
        first
    };
    let path = seg_path(dir, 1);
    let raw = fs::read(&path).unwrap();
    let file_len = raw.len() as u64;
    for new_len in [0x00f0_0000u32, (file_len - first.0 - 8) as u32] {
        let mut damaged = raw.clone();
        damaged[first.0 as usize..first.0 as usize + 4].copy_from_slice(&new_len.to_le_bytes());
        fs::write(&path, &damaged).unwrap();
        assert_corrupt(
            open_err(dir),
            &path,
            first.0,
            &format!("valid record follows at offset {}", first.1),
        );
        assert_eq!(
            fs::metadata(&path).unwrap().len(),
            file_len,
            "nothing was cut"
        );
    }
}

#[test]
fn garbage_between_records_is_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let end = {
        let (mut wal, _) = open(dir, WalOptions::default());
        append(&mut wal, &mut BTreeMap::new(), [1]).1
    };
    let path = seg_path(dir, 1);
    // Zeros followed by a valid record: not a zero tail.
    let mut raw = fs::read(&path).unwrap();
    let mut rec = Vec::new();
    record::encode_record(
        &[WalOp::Truncate { since: 1 }],
        record::MAX_PAYLOAD_LEN,
        &mut rec,
    )
    .unwrap();
    raw.extend_from_slice(&[0; 32]);
    raw.extend_from_slice(&rec);
    fs::write(&path, raw).unwrap();
    assert_corrupt(open_err(dir), &path, end, "impossible record length 0");
}

#[test]
fn damage_in_a_segment_that_is_not_the_last_is_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (first_seg_last_record, first_seg_len) = {
        let (mut wal, _) = open(dir, opts(200));
        let mut m = BTreeMap::new();
        let mut last_in_first = (0, 0);
        for b in 0..20 {
            let span = append(&mut wal, &mut m, [b * 2 + 1, b * 2 + 2]);
            if wal.segments.len() == 1 {
                last_in_first = span;
            }
        }
        assert!(wal.segments.len() >= 3);
        last_in_first
    };
    let first = seg_path(dir, 1);
    assert_eq!(fs::metadata(&first).unwrap().len(), first_seg_len);

    // Even the final record of segment 1 is not a torn tail: segment 2 exists.
    flip_byte(&first, first_seg_len - 2);
    assert_corrupt(open_err(dir), &first, first_seg_last_record, "crc mismatch");
    flip_byte(&first, first_seg_len - 2);

    // Nor is a short segment 1.
    let raw = fs::read(&first).unwrap();
    set_len(&first, first_seg_len - 5);
    assert_corrupt(open_err(dir), &first, first_seg_last_record, "not the last");
    fs::write(&first, &raw).unwrap();

    // And the middle of a middle segment.
    let second = seg_path(dir, 2);
    flip_byte(&second, HEADER_LEN as u64 + 12);
    assert_corrupt(open_err(dir), &second, HEADER_LEN as u64, "crc mismatch");
}

#[test]
fn bad_headers_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    {
        let (mut wal, _) = open(dir, WalOptions::default());
        append(&mut wal, &mut BTreeMap::new(), [1]);
    }
    let path = seg_path(dir, 1);
    let raw = fs::read(&path).unwrap();
    for (at, what) in [
        (0usize, "wrong magic"),
        (8, "unsupported format version"),
        (14, "checksum"),
    ] {
        let mut damaged = raw.clone();
        damaged[at] ^= 0x02;
        fs::write(&path, &damaged).unwrap();
        let err = open_err(dir);
        assert!(
            matches!(&err, WalError::BadHeader { file, reason } if file == &path && reason.contains(what)),
            "{err:?}"
        );
        assert!(err.to_string().contains(&path.display().to_string()));
    }
    // A segment renamed into the wrong slot.
    fs::write(&path, &raw).unwrap();
    fs::rename(&path, seg_path(dir, 7)).unwrap();
    let err = open_err(dir);
    assert!(
        matches!(&err, WalError::BadHeader { reason, .. } if reason.contains("sequence number 1")),
        "{err:?}"
    );
}

#[test]
fn missing_middle_segment_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    {
        let (mut wal, _) = open(dir, opts(100));
        let mut m = BTreeMap::new();
        for i in 1..=10 {
            append(&mut wal, &mut m, [i]);
        }
        assert!(wal.segments.len() >= 3);
    }
    fs::remove_file(seg_path(dir, 2)).unwrap();
    let err = open_err(dir);
    assert!(
        matches!(&err, WalError::MissingSegment { file } if file == &seg_path(dir, 2)),
        "{err:?}"
    );
}

#[test]
fn interrupted_segment_creation_is_repaired() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    {
        let (mut wal, _) = open(dir, WalOptions::default());
        append(&mut wal, &mut model, 1..=3);
    }
    // A crash during rotation: a half-written tmp file, and (on a filesystem
    // that reordered the rename) a next segment with a partial header.
    fs::write(dir.join("0000000000000002.wal.tmp"), &encode_header(2)[..5]).unwrap();
    fs::write(seg_path(dir, 2), &encode_header(2)[..11]).unwrap();
    let (mut wal, rec) = open(dir, WalOptions::default());
    assert_eq!(rec.entries, model);
    assert_eq!(
        rec.torn_tail,
        Some(TornTail {
            file: seg_path(dir, 2),
            offset: 0,
            dropped_bytes: 11
        })
    );
    assert!(!dir.join("0000000000000002.wal.tmp").exists());
    append(&mut wal, &mut model, [4]);
    drop(wal);
    let (_, rec) = open(dir, WalOptions::default());
    assert_eq!((rec.entries, rec.torn_tail), (model, None));
}

#[test]
fn foreign_files_are_ignored_but_misnamed_segments_are_not() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fs::write(dir.join("README"), b"hello").unwrap();
    drop(open(dir, WalOptions::default()));
    fs::write(dir.join("1.wal"), b"").unwrap();
    let err = open_err(dir);
    assert!(
        matches!(&err, WalError::UnexpectedFile { file } if file == &dir.join("1.wal")),
        "{err:?}"
    );
}

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
