//! Recovery of a torn tail: whatever part of the last record a crash
//! left (a prefix, zeros, a bad checksum, a header short of a block), it
//! is cut. Damage anywhere else is `damage.rs`'s.

use super::*;

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
fn zeros_after_the_last_record_are_cut_as_padding() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    let end = {
        let (mut wal, _) = open(dir, WalOptions::default());
        append(&mut wal, &mut model, 1..=2);
        append(&mut wal, &mut model, 3..=4).1
    };
    let path = seg_path(dir, 1);
    // The log lays zeros ahead of its records; a filesystem can also leave
    // a zero-filled extent after a crash (size updated, data not).
    assert!(fs::metadata(&path).unwrap().len() > end, "no padding laid");
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut f, &[0u8; 4096]).unwrap();
    let (mut wal, rec) = open(dir, WalOptions::default());
    assert_eq!(rec.entries, model);
    assert_eq!(rec.torn_tail, None, "padding is not a torn write");
    assert_eq!(fs::metadata(&path).unwrap().len(), end);
    // The log goes on from its last record.
    append(&mut wal, &mut model, 5..=6);
    drop(wal);
    let (_, rec) = open(dir, WalOptions::default());
    assert_eq!((rec.entries, rec.torn_tail), (model, None));
}

#[test]
fn a_final_record_of_zeros_is_cut_as_padding() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut model = BTreeMap::new();
    let (start, _) = {
        let (mut wal, _) = open(dir, WalOptions::default());
        append(&mut wal, &mut model, 1..=2);
        append(&mut wal, &mut BTreeMap::new(), 3..=4)
    };
    let path = seg_path(dir, 1);
    let mut raw = fs::read(&path).unwrap();
    raw[start as usize..].fill(0);
    fs::write(&path, raw).unwrap();
    let (_, rec) = open(dir, WalOptions::default());
    // Nothing of the last write reached the disk: it is gone, like the
    // padding it overwrote (never acknowledged, so nothing is lost).
    assert_eq!(rec.entries, model);
    assert_eq!(rec.torn_tail, None);
    assert_eq!(fs::metadata(&path).unwrap().len(), start);
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
    // The record and the padding after it.
    let file_len = fs::metadata(&path).unwrap().len();
    let (_, rec) = open(dir, WalOptions::default());
    assert_eq!(rec.entries, model);
    assert_eq!(
        rec.torn_tail,
        Some(TornTail {
            file: path,
            offset: start,
            dropped_bytes: file_len - start
        })
    );
}

#[test]
fn a_final_record_whose_header_lost_a_block_is_a_torn_tail() {
    // A crash inside the last write can leave its first byte on disk and
    // the block after it unwritten (zeros), with later blocks of the same
    // write written or not. The header then claims a short length, so
    // bytes follow the bad record; none of them is a valid record, and
    // the batch was never acknowledged (seed 225820 of the simulation).
    let tmp = tempfile::tempdir().unwrap();
    for later_blocks_written in [false, true] {
        let dir = tmp.path().join(format!("written-{later_blocks_written}"));
        let mut model = BTreeMap::new();
        let (start, end) = {
            let (mut wal, _) = open(&dir, WalOptions::default());
            append(&mut wal, &mut model, 1..=2);
            append(&mut wal, &mut BTreeMap::new(), 3..=30)
        };
        let path = seg_path(&dir, 1);
        let mut raw = fs::read(&path).unwrap();
        let s = start as usize;
        let zeros_end = if later_blocks_written {
            s + 24
        } else {
            raw.extend_from_slice(&[0; 512]);
            raw.len()
        };
        raw[s + 1..zeros_end].fill(0);
        let dropped = raw.len() as u64 - start;
        let claimed = u32::from_le_bytes([raw[s], raw[s + 1], raw[s + 2], raw[s + 3]]);
        assert!(
            u64::from(claimed) + 8 < dropped,
            "the damaged header claims a record shorter than the bytes left"
        );
        fs::write(&path, &raw).unwrap();

        let (mut wal, rec) = open(&dir, WalOptions::default());
        assert_eq!(rec.entries, model, "written {later_blocks_written}");
        assert_eq!(
            rec.torn_tail,
            Some(TornTail {
                file: path.clone(),
                offset: start,
                dropped_bytes: dropped
            })
        );
        assert!(dropped >= end - start);
        append(&mut wal, &mut model, 3..=4);
        drop(wal);
        let (_, rec) = open(&dir, WalOptions::default());
        assert_eq!(rec.entries, model);
    }
}
