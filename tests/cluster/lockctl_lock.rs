//! `lockctl lock KEY -- CMD`: CMD runs holding the lock, sees its key and
//! token, keeps it past several leases, passes its exit status through,
//! and the lock is released when it ends; when the lock is lost (lockctl
//! SIGSTOPped past its lease) CMD is stopped and lockctl exits 3.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use lockd_tests::cluster::{lockd_bin, Cluster};

const WITHIN: Duration = Duration::from_secs(20);

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < WITHIN, "{what}: not within {WITHIN:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_exit(child: &mut Child) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s.code();
        }
        assert!(start.elapsed() < WITHIN, "lockctl did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn held_token(c: &Cluster, leader: u64, key: &str) -> Option<u64> {
    let r = c.lock(leader, key).expect("get");
    r.body["held"]
        .as_bool()
        .filter(|h| *h)
        .and(r.body["token"].as_u64())
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn the_command_sees_the_lock_keeps_it_and_its_status_passes_through() {
    let c = Cluster::start(1, &[]);
    let leader = c.wait_leader(WITHIN);
    let dir = tempfile::tempdir().expect("tempdir");
    let (seen, go) = (dir.path().join("seen"), dir.path().join("go"));
    let nested = dir.path().join("nested");
    // The command records what it was given, asks a lockctl of its own
    // (which must not take the outer lock's key and token, still also
    // under their old names, for its key file and bearer token), then
    // waits for the test.
    let script = format!(
        "{lockctl} --endpoints {ep} get jobs/nightly > {nested} 2>&1; echo \"$LOCKD_LOCK_KEY $LOCKD_FENCING_TOKEN $LOCKD_LEASE_MS $LOCKD_KEY $LOCKD_TOKEN\" > {seen}; while [ ! -e {go} ]; do sleep 0.05; done; exit 7",
        lockctl = lockd_bin().with_file_name("lockctl").display(),
        ep = c.endpoints().join(","),
        nested = nested.display(),
        seen = seen.display(),
        go = go.display()
    );
    let mut child = c
        .lockctl()
        .args([
            "lock",
            "jobs/nightly",
            "--lease",
            "1s",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("lockctl");
    wait_for("the command starts", || read(&seen).ends_with('\n'));
    let got = read(&seen);
    let fields: Vec<&str> = got.split_whitespace().collect();
    assert_eq!(fields.len(), 5, "{got:?}");
    assert_eq!(fields[0], "jobs/nightly");
    let token: u64 = fields[1].parse().expect("token");
    assert_eq!(fields[2], "1000");
    assert_eq!(fields[3..], fields[..2], "the old names, for one release");
    let inner = read(&nested);
    assert!(
        inner.contains(&token.to_string()) && !inner.contains("lockctl:"),
        "the nested lockctl: {inner}"
    );
    // Held by that token past three leases: renewed while the command runs.
    let until = Instant::now() + Duration::from_millis(3200);
    while Instant::now() < until {
        assert_eq!(held_token(&c, leader, "jobs/nightly"), Some(token));
        std::thread::sleep(Duration::from_millis(200));
    }
    std::fs::write(&go, "").expect("go");
    assert_eq!(wait_exit(&mut child), Some(7), "the command's status");
    assert_eq!(
        held_token(&c, leader, "jobs/nightly"),
        None,
        "released at once"
    );

    // Status 0 passes through too, and a command that does not exist is
    // 127, with the lock released.
    let ok = c
        .lockctl()
        .args(["lock", "jobs/nightly", "--", "true"])
        .output()
        .expect("lockctl");
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    let missing = c
        .lockctl()
        .args(["lock", "jobs/nightly", "--", "no-such-command-here"])
        .output()
        .expect("lockctl");
    assert_eq!(missing.status.code(), Some(127), "{missing:?}");
    assert_eq!(held_token(&c, leader, "jobs/nightly"), None);

    // Held by someone else past the wait: status 2, the command never runs.
    let r = c.acquire(leader, "jobs/nightly", 30_000).expect("acquire");
    assert!(r.ok(), "{:?}", r.body);
    let ran = dir.path().join("ran");
    let busy = c
        .lockctl()
        .args(["lock", "jobs/nightly", "--wait", "300ms", "--", "touch"])
        .arg(&ran)
        .output()
        .expect("lockctl");
    assert_eq!(busy.status.code(), Some(2), "{busy:?}");
    assert!(!ran.exists(), "the command ran without the lock");
}

fn pid_alive(pid: &str) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !read(Path::new(&format!("/proc/{pid}/stat"))).contains(") Z ")
}

/// Pause lockctl past its lease while another client takes the lock, then
/// resume it: the command is stopped (SIGTERM, or SIGKILL when it ignores
/// that) and lockctl exits 3.
fn lost_while_paused(ignore_term: bool) {
    let c = Cluster::start(1, &[]);
    let leader = c.wait_leader(WITHIN);
    let dir = tempfile::tempdir().expect("tempdir");
    let (pid, termed) = (dir.path().join("pid"), dir.path().join("termed"));
    let trap = if ignore_term {
        "trap '' TERM".to_string()
    } else {
        format!("trap 'echo yes > {}; exit 0' TERM", termed.display())
    };
    let script = format!(
        "{trap}; echo $$ > {pid}; while true; do sleep 0.05; done",
        pid = pid.display()
    );
    let mut lockctl = c
        .lockctl()
        .args([
            "lock",
            "jobs/paused",
            "--lease",
            "1s",
            "--grace",
            "500ms",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .spawn()
        .expect("lockctl");
    wait_for("the command starts", || read(&pid).ends_with('\n'));
    let child_pid = read(&pid).trim().to_string();
    let token = held_token(&c, leader, "jobs/paused").expect("held");
    // SIGSTOP lockctl (not its command) past its lease.
    let me = lockctl.id().to_string();
    let stop = std::process::Command::new("kill")
        .args(["-STOP", &me])
        .status()
        .expect("kill");
    assert!(stop.success());
    wait_for("the lease ends", || {
        held_token(&c, leader, "jobs/paused").is_none()
    });
    let r = c.acquire(leader, "jobs/paused", 30_000).expect("acquire");
    assert!(r.ok(), "{:?}", r.body);
    let taken = r.body["token"].as_u64().expect("token");
    assert!(taken > token);
    let cont = std::process::Command::new("kill")
        .args(["-CONT", &me])
        .status()
        .expect("kill");
    assert!(cont.success());
    assert_eq!(wait_exit(&mut lockctl), Some(3), "lost lock status");
    wait_for("the command has ended", || !pid_alive(&child_pid));
    if !ignore_term {
        assert_eq!(read(&termed).trim(), "yes", "the command got SIGTERM");
    }
    assert_eq!(
        held_token(&c, leader, "jobs/paused"),
        Some(taken),
        "the new holder keeps it"
    );
}

#[test]
fn a_lost_lock_stops_the_command_with_sigterm() {
    lost_while_paused(false);
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace() {
    lost_while_paused(true);
}
