//! Recovery against damage that is not a torn tail: a flipped byte or
//! checksum, a damaged length, garbage between records, damage in an
//! earlier segment, bad headers and a missing segment are each named by
//! file and offset; an interrupted segment creation is repaired; foreign
//! files are left alone.

use super::*;

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
    let end = {
        let (mut wal, _) = open(dir, WalOptions::default());
        append(&mut wal, &mut model, 1..=3).1
    };
    // A crash during rotation, after the outgoing segment was cut to its
    // last record (its padding goes first): a half-written tmp file, and
    // (on a filesystem that reordered the rename) a next segment with a
    // partial header.
    set_len(&seg_path(dir, 1), end);
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
