//! A client process SIGSTOPped past its lease loses the lock: the lease
//! ends (no keepalive can reach the leader while it is stopped), another
//! client gets the key with a higher token, and when the stopped client
//! resumes it finds out and gives up, instead of acting on a stale lock.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lockd_tests::cluster::Cluster;
use serde_json::json;

#[test]
fn a_client_stopped_past_its_lease_loses_the_lock_and_notices() {
    // Alone: the client's keepalives must each land within its 800 ms lease
    // for 2 s; a second cluster on the same two cores could delay one past
    // the lease.
    let _alone = lockd_tests::turns::alone();
    let c = Cluster::start(3, &[]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let mut holder = c
        .lockctl()
        .args(["--json", "acquire", "paused", "--lease", "800ms", "--hold"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockctl");
    let mut line = String::new();
    BufReader::new(holder.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("first line");
    let first: serde_json::Value = serde_json::from_str(&line).expect("json");
    let token = first["token"].as_u64().expect("token");

    // Held and kept alive past several leases while it runs.
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(
        c.lock(leader, "paused").expect("get").body["token"].as_u64(),
        Some(token)
    );

    // Stop the client process past its lease: its keepalives stop, the lease
    // ends, and a waiting client takes the key.
    let pid = holder.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .expect("kill")
        .success());
    let r = c
        .post(
            leader,
            "/v1/locks/paused/acquire",
            json!({ "lease_ms": 60_000, "wait_ms": 5_000 }),
        )
        .expect("acquire");
    assert!(r.ok(), "the stopped client's lease never ended: {r:?}");
    let next = r.body["token"].as_u64().expect("token");
    assert!(next > token);

    // It wakes up, notices, and exits with status 3; the new holder keeps
    // the lock.
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .expect("kill")
        .success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = holder.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the resumed client did not notice it lost the lock"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut holder.stderr.take().expect("stderr"), &mut err)
        .expect("stderr");
    assert_eq!(status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("lost lock paused (token {token})")),
        "{err}"
    );
    assert_eq!(
        c.lock(leader, "paused").expect("get").body["token"].as_u64(),
        Some(next)
    );
}
