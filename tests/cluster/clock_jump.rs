//! A node's wall clock jumps (forward and back) while it leads: lease expiry
//! does not move, because only monotonic clocks count.
//!
//! Every node runs under libfaketime with the monotonic clock left alone
//! (`FAKETIME_DONT_FAKE_MONOTONIC=1`) and its wall clock read from a file
//! the test rewrites mid-run. The library comes from Debian's `libfaketime`,
//! which the test installs when it is missing (tests run as root here).
//!
//! That each `lockd` process's own wall clock jumped is read from its log:
//! every line starts with the wall-clock time it was written (tracing's
//! RFC 3339 timestamp, UTC), and the test makes every node log a line after
//! each jump (starting and stopping shadow mode logs one on every node).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lockd_tests::cluster::Cluster;

const LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

fn libfaketime() -> PathBuf {
    if !Path::new(LIB).exists() {
        let install = || {
            Command::new("apt-get")
                .args(["install", "-y", "-q", "libfaketime"])
                .status()
                .is_ok_and(|s| s.success())
        };
        if !install() {
            let _ = Command::new("apt-get").args(["update", "-q"]).status();
            assert!(
                install(),
                "cannot install Debian's libfaketime (needed to jump a node's wall clock)"
            );
        }
    }
    PathBuf::from(LIB)
}

/// The real wall clock (this process is not under libfaketime), in seconds.
fn real_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

/// Seconds since the epoch of a log line's leading timestamp
/// (`2026-05-09T07:29:33.186543Z`, tracing-subscriber's format), or `None`
/// when the line does not start with one.
fn log_time(line: &str) -> Option<f64> {
    let ts = line.get(..27)?;
    let b = ts.as_bytes();
    if b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[19] != b'.' || b[26] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| ts.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss, us) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..26)?);
    // Days from 1970-01-01 to y-m-d (proleptic Gregorian, Howard Hinnant's
    // days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + hh * 3600 + mm * 60 + ss) as f64 + us as f64 / 1e6)
}

/// The timestamp of the first line of node `id`'s log, from byte `from`
/// on, that contains `needle`; waits for it up to `timeout`.
fn logged_at(c: &Cluster, id: u64, from: usize, needle: &str, timeout: Duration) -> f64 {
    let deadline = Instant::now() + timeout;
    loop {
        let log = std::fs::read(&c.nodes[&id].log).expect("read node log");
        let text = String::from_utf8_lossy(log.get(from..).unwrap_or_default());
        if let Some(line) = text.lines().find(|l| l.contains(needle)) {
            return log_time(line)
                .unwrap_or_else(|| panic!("node {id}: no timestamp at the start of {line:?}"));
        }
        assert!(
            Instant::now() < deadline,
            "node {id} logged no {needle:?} within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every node's log length now: lines after it were written later.
fn log_ends(c: &Cluster) -> Vec<usize> {
    (1..=3)
        .map(|id| {
            std::fs::metadata(&c.nodes[&id].log)
                .expect("node log")
                .len() as usize
        })
        .collect()
}

/// Set every node's clock to `jump` (a libfaketime offset from the real
/// time: `offset` seconds), then run `act`, which makes every node log
/// `needle`; each node's line must carry the real time shifted by `offset`:
/// between the real times before and after, give or take a second.
fn jump_and_check(
    c: &Cluster,
    clocks: &[PathBuf],
    jump: &str,
    offset: f64,
    needle: &str,
    act: impl FnOnce(),
) {
    for f in clocks {
        std::fs::write(f, format!("{jump}\n")).unwrap();
    }
    // With FAKETIME_CACHE_DURATION=0 libfaketime re-reads its file at a
    // clock read in a later second than its last read: any read two seconds
    // after the write, the log line's among them, sees the jump.
    std::thread::sleep(Duration::from_secs(2));
    let ends = log_ends(c);
    let before = real_now();
    act();
    let stamps: Vec<f64> = (1..=3)
        .map(|id| {
            logged_at(
                c,
                id,
                ends[id as usize - 1],
                needle,
                Duration::from_secs(20),
            )
        })
        .collect();
    let after = real_now();
    for (id, at) in (1..=3).zip(&stamps) {
        let shift = at - before;
        assert!(
            at - offset >= before - 1.0 && at - offset <= after + 1.0,
            "node {id} logged {needle:?} at a wall clock {shift:.0} s from the real one, \
             not {offset} s: lockd's own clock did not jump"
        );
    }
}

#[test]
fn wall_clock_jumps_do_not_move_lease_expiry() {
    let lib = libfaketime();
    // Alone (once libfaketime is installed): the lock must be held until
    // 500 ms before its lease ends and gone within 2 s after; a second
    // cluster on the same two cores would move both ends of that window.
    let _alone = lockd_tests::turns::alone();
    let mut c = Cluster::configure(3, &[]);
    let clock = |id: u64| c.dir.path().join(format!("clock{id}"));
    let clocks: Vec<PathBuf> = (1..=3).map(clock).collect();
    let started = real_now();
    for (id, file) in (1..=3).zip(&clocks) {
        std::fs::write(file, "+0\n").unwrap();
        c.nodes.get_mut(&id).unwrap().env = vec![
            ("LD_PRELOAD".into(), lib.display().to_string()),
            ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
            ("FAKETIME_TIMESTAMP_FILE".into(), file.display().to_string()),
            ("FAKETIME_CACHE_DURATION".into(), "0".into()),
        ];
        c.spawn(id);
    }
    let leader = c.wait_leader(Duration::from_secs(20));
    // Before any jump each node's clock is the real one.
    for id in 1..=3 {
        let at = logged_at(&c, id, 0, "node started", Duration::from_secs(20));
        assert!(
            at >= started - 1.0 && at <= real_now() + 1.0,
            "node {id} started at a wall clock {:.0} s from the real one",
            at - started
        );
    }
    // Long enough for both jumps (each waits 2 s for libfaketime, then for
    // a log line from every node) to fit well inside, on a busy machine.
    const LEASE: u64 = 15_000;
    let r = c.acquire(leader, "clocked", LEASE).expect("acquire");
    let token = r.body["token"].as_u64().expect("token");
    let granted = Instant::now();

    // Two hours forward on every node: nothing expires early.
    jump_and_check(&c, &clocks, "+2h", 7200.0, "shadow mode started", || {
        let r = c
            .post_bytes(leader, "/v1/admin/shadow", lockd_core::builtin::LOCK_SM)
            .expect("start shadow mode");
        assert!(r.ok(), "{r:?}");
    });
    let r = c.lock(leader, "clocked").expect("get");
    assert_eq!(
        r.body["token"].as_u64(),
        Some(token),
        "a forward wall-clock jump expired the lock: {r:?}"
    );
    // Then back by a day: nothing expires late either.
    jump_and_check(&c, &clocks, "-1d", -86_400.0, "shadow mode stopped", || {
        let r = c
            .post(leader, "/v1/admin/shadow/abort", serde_json::json!({}))
            .expect("stop shadow mode");
        assert!(r.ok(), "{r:?}");
    });
    assert!(
        granted.elapsed() < Duration::from_millis(LEASE - 5000),
        "the clock jumps took {:?}, too long to watch the lease's end",
        granted.elapsed()
    );
    while granted.elapsed() < Duration::from_millis(LEASE - 500) {
        let r = c.lock(leader, "clocked").expect("get");
        assert_eq!(
            r.body["token"].as_u64(),
            Some(token),
            "expired early at {:?}",
            granted.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    loop {
        let r = c.lock(leader, "clocked").expect("get");
        if r.body["held"] == false {
            break;
        }
        assert!(
            granted.elapsed() < Duration::from_millis(LEASE + 2000),
            "a backward wall-clock jump delayed expiry"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
