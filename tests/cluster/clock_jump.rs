//! A node's wall clock jumps (forward and back) while it leads: lease expiry
//! does not move, because only monotonic clocks count.
//!
//! Every node runs under libfaketime with the monotonic clock left alone
//! (`FAKETIME_DONT_FAKE_MONOTONIC=1`) and its wall clock read from a file
//! the test rewrites mid-run. The library comes from Debian's `libfaketime`,
//! which the test installs when it is missing (tests run as root here).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use lock_tests::cluster::Cluster;

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

#[test]
fn wall_clock_jumps_do_not_move_lease_expiry() {
    let lib = libfaketime();
    // Alone (once libfaketime is installed): the lock must be held until
    // 500 ms before its lease ends and gone within 2 s after; a second
    // cluster on the same two cores would move both ends of that window.
    let _alone = lock_tests::turns::alone();
    let mut c = Cluster::configure(3, &[]);
    let clock = |id: u64| c.dir.path().join(format!("clock{id}"));
    let clocks: Vec<PathBuf> = (1..=3).map(clock).collect();
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
    const LEASE: u64 = 3000;
    let r = c.acquire(leader, "clocked", LEASE).expect("acquire");
    let token = r.body["token"].as_u64().expect("token");
    let granted = Instant::now();

    // Two hours forward on every node: nothing expires early.
    for f in &clocks {
        std::fs::write(f, "+2h\n").unwrap();
    }
    // The jump is real for any process with this environment.
    let env = c.nodes[&leader].env.clone();
    let faked: i64 = String::from_utf8(
        Command::new("date")
            .arg("+%s")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .parse()
    .unwrap();
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (faked - real - 7200).abs() < 60,
        "libfaketime did not move the wall clock: {faked} vs {real}"
    );
    std::thread::sleep(Duration::from_millis(1000));
    let r = c.lock(leader, "clocked").expect("get");
    assert_eq!(
        r.body["token"].as_u64(),
        Some(token),
        "a forward wall-clock jump expired the lock: {r:?}"
    );
    // Then back by a day: nothing expires late either.
    for f in &clocks {
        std::fs::write(f, "-1d\n").unwrap();
    }
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
