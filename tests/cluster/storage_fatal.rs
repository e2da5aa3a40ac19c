//! A fatal storage error ends the process with a clear message and a
//! non-zero status, so a supervisor restarts it; it never leaves a node
//! half alive (Raft stopped, HTTP still answering). The error is real: the
//! node's data dir is a small tmpfs, filled up while it serves.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lockd_tests::cluster::{free_port, lockd_bin};
use serde_json::json;

/// A tmpfs mounted for the test, unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_ends_the_node_with_a_clear_error_and_a_non_zero_status() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
        .arg(dir.path())
        .status()
        .is_ok_and(|s| s.success());
    assert!(mounted, "mounting a tmpfs is needed (run as root)");
    let fs = Tmpfs(dir.path().to_path_buf());
    let addr = format!("127.0.0.1:{}", free_port());
    // The node's own log goes outside the small filesystem.
    let log_dir = tempfile::tempdir().expect("tempdir");
    let log_path = log_dir.path().join("lockd.log");
    let mut child = Command::new(lockd_bin())
        .args([
            "serve",
            "--id",
            "1",
            "--addr",
            &addr,
            "--segment-bytes",
            "1048576",
        ])
        .arg("--data-dir")
        .arg(fs.0.join("n1"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).expect("log file"))
        .spawn()
        .expect("spawn lockd");
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(5))
        .build();
    let acquire = |key: &str| {
        agent
            .post(&format!("http://{addr}/v1/locks/{key}/acquire"))
            .send_json(json!({"lease_ms": 60_000}))
    };
    let up = Instant::now();
    while acquire("before").is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(20),
            "the node did not serve"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Fill the filesystem.
    let mut filler = std::fs::File::create(fs.0.join("filler")).expect("filler");
    let chunk = vec![0u8; 64 << 10];
    while filler.write_all(&chunk).is_ok() {}
    drop(filler);

    // The log's current segment may have room left: write until it needs
    // a new one, which the full filesystem refuses. The process must then
    // end, not linger.
    let deadline = Instant::now() + Duration::from_secs(30);
    let long = "k".repeat(1000);
    let mut n = 0;
    let status = loop {
        for _ in 0..20 {
            n += 1;
            let _ = acquire(&format!("{long}/{n}"));
        }
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!("the node is still running with a full disk:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    eprintln!("{log}");
    assert!(!status.success(), "exited with {status}:\n{log}");
    assert!(log.contains("raft stopped"), "{log}");
    drop(fs);
}
