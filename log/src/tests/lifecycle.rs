//! Round trips, truncation, rotation and purge, across reopens.

use super::*;

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
fn only_the_last_segment_has_padding() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    let (mut wal, _) = open(dir, opts(8 << 10));
    for b in 0..200 {
        append(&mut wal, &mut model, b * 3 + 1..=b * 3 + 3);
    }
    assert!(wal.segments.len() >= 3, "{} segments", wal.segments.len());
    let (last, older) = wal.segments.split_last().expect("segments");
    for s in older {
        // Cut to its last record before the next segment was made.
        assert_eq!(fs::metadata(&s.path).unwrap().len(), s.len, "{s:?}");
    }
    // Zeros laid ahead of the records, up to the segment's size.
    assert_eq!(fs::metadata(&last.path).unwrap().len(), 8 << 10);
    assert!(last.len < 8 << 10);
    drop(wal);
    let (_, rec) = open(dir, opts(8 << 10));
    assert_eq!((rec.entries, rec.torn_tail), (model, None));
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
