//! Log recovery on a real node process: a torn last record is cut and the
//! node starts with everything it acknowledged; a flipped byte inside an
//! earlier record stops startup with an error naming the file and offset.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lockd_tests::cluster::Cluster;

fn segments(data_dir: &Path) -> Vec<PathBuf> {
    let mut s: Vec<PathBuf> = std::fs::read_dir(data_dir.join("raft/wal"))
        .expect("wal dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    s.sort();
    s
}

/// One node, `n` acknowledged grants; returns the cluster (node killed) and
/// the acknowledged keys with tokens.
fn node_with_acked_grants(n: usize) -> (Cluster, Vec<(String, u64)>) {
    let mut c = Cluster::start(1, &[]);
    c.wait_leader(Duration::from_secs(20));
    let acked: Vec<(String, u64)> = (0..n)
        .map(|i| {
            let key = format!("r{i}");
            let r = c.acquire(1, &key, 60_000).expect("acquire");
            assert!(r.ok(), "{r:?}");
            (key, r.body["token"].as_u64().expect("token"))
        })
        .collect();
    c.kill(1);
    (c, acked)
}

#[test]
fn torn_tail_is_cut_and_acknowledged_entries_survive() {
    let (mut c, acked) = node_with_acked_grants(20);
    let seg = segments(&c.nodes[&1].data_dir).pop().expect("a segment");
    // A batch that was being written when the power went: half a record.
    let mut bytes = std::fs::read(&seg).expect("read segment");
    let torn = [0x40u8, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3];
    bytes.extend_from_slice(&torn);
    std::fs::write(&seg, &bytes).expect("write segment");

    c.spawn(1);
    c.wait_leader(Duration::from_secs(20));
    for (key, token) in &acked {
        let r = c.lock(1, key).expect("get");
        assert_eq!(r.body["token"].as_u64(), Some(*token), "{key}: {r:?}");
    }
    let log = std::fs::read_to_string(&c.nodes[&1].log).expect("node log");
    assert!(log.contains("torn"), "the cut is reported in the node log");
    // And it goes on working.
    assert!(c.acquire(1, "after", 1_000).expect("acquire").ok());
}

#[test]
fn truncated_last_record_is_cut() {
    let (mut c, acked) = node_with_acked_grants(10);
    let seg = segments(&c.nodes[&1].data_dir).pop().expect("a segment");
    // Add a full record's worth of a fake batch, then cut it short: the
    // length prefix promises more bytes than the file has.
    let mut bytes = std::fs::read(&seg).expect("read segment");
    bytes.extend_from_slice(&[0xff, 0x00, 0x00, 0x00, 1, 2, 3, 4, 5, 6]);
    std::fs::write(&seg, &bytes).expect("write");
    c.spawn(1);
    c.wait_leader(Duration::from_secs(20));
    for (key, token) in &acked {
        assert_eq!(
            c.lock(1, key).expect("get").body["token"].as_u64(),
            Some(*token)
        );
    }
}

#[test]
fn flipped_byte_in_an_earlier_record_stops_startup_with_a_clear_error() {
    let (c, _acked) = node_with_acked_grants(20);
    let seg = segments(&c.nodes[&1].data_dir).pop().expect("a segment");
    let mut bytes = std::fs::read(&seg).expect("read segment");
    // Well inside the records: past the header, far from the last one
    // (the zeros the log lays after its records are not records).
    let records_end = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    let offset = records_end / 3;
    bytes[offset] ^= 0x55;
    std::fs::write(&seg, &bytes).expect("write");
    let (code, stderr) = c.run_to_exit(1, Duration::from_secs(20));
    assert_ne!(code, Some(0), "the node must refuse to start");
    assert!(code.is_some(), "the node must exit, not hang: {stderr}");
    let name = seg.display().to_string();
    assert!(
        stderr.contains("corrupt WAL record")
            && stderr.contains(&name)
            && stderr.contains("at offset"),
        "{stderr}"
    );
}
