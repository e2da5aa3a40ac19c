//! Leader election on a real 3-node cluster: three `lockctl elect`
//! candidates; one leads, publishing its value, with its fencing token as
//! the epoch. The leader is SIGKILLed: the next candidate leads once its
//! lease ends; that one resigns (its command ends): the third leads at
//! once (its lease would never have ended: it was renewed). An observer
//! (`lockctl elect --observe`) sees each leader once, in order, with its
//! value, and the watch of the election's key shows that no two
//! leaderships overlapped: each grant comes after the previous holding's
//! end, and epochs increase.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use futures::StreamExt;
use lockd_client::proto::ChangeKind;
use lockd_client::{Client, WatchEvent};
use lockd_tests::cluster::{wait_for, Cluster};

const WITHIN: Duration = Duration::from_secs(30);

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

struct Candidate {
    child: Child,
    /// Written by its command when it leads: "EPOCH VALUE".
    leads: PathBuf,
    /// Created by the test to end its command (a resignation).
    done: PathBuf,
}

fn candidate(c: &Cluster, dir: &Path, value: &str) -> Candidate {
    let (leads, done) = (
        dir.join(format!("{value}.leads")),
        dir.join(format!("{value}.done")),
    );
    // It also ends when the test's directory is gone: the command of a
    // SIGKILLed `lockctl` lives on, and must not outlive the test.
    let script = format!(
        "echo \"$LOCKD_LEADER_EPOCH $LOCKD_ELECTION\" > {}; while [ -d {} ] && [ ! -e {} ]; do sleep 0.05; done",
        leads.display(),
        dir.display(),
        done.display()
    );
    let child = c
        .lockctl()
        .args([
            "elect",
            "db-primary",
            value,
            "--ttl",
            "2s",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("lockctl elect");
    Candidate { child, leads, done }
}

#[test]
fn candidates_take_turns_with_rising_epochs_and_observers_see_each_leader_once() {
    let c = Cluster::start(3, &[]);
    let leader_node = c.wait_leader(WITHIN);
    let dir = tempfile::tempdir().expect("tempdir");
    let from = c.get(leader_node, "/v1/locks?limit=1").expect("list").body["index"]
        .as_u64()
        .expect("index");
    let observed = dir.path().join("observed");
    let mut observer = c
        .lockctl()
        .args(["--json", "elect", "db-primary", "--observe"])
        .stdout(std::fs::File::create(&observed).expect("observed"))
        .spawn()
        .expect("observer");
    wait_for("the observer starts", WITHIN, || {
        read(&observed).contains("\"leader\":false")
    });

    // Three candidates, one at a time so their order is known.
    let mut all = Vec::new();
    for v in ["10.0.0.1", "10.0.0.2", "10.0.0.3"] {
        all.push(candidate(&c, dir.path(), v));
        let n = all.len() as u64;
        wait_for("the candidate leads or queues", WITHIN, || {
            !read(&all[0].leads).is_empty()
                && (n == 1 || c.metric(leader_node, "lockd_lock_waiters").unwrap_or(0) >= n - 1)
        });
    }
    let epoch = |cand: &Candidate| -> u64 {
        read(&cand.leads)
            .split_whitespace()
            .next()
            .and_then(|e| e.parse().ok())
            .expect("an epoch")
    };
    let e1 = epoch(&all[0]);
    assert!(read(&all[1].leads).is_empty() && read(&all[2].leads).is_empty());

    // The leader is SIGKILLed: the second leads once its lease has ended.
    all[0].child.kill().expect("kill");
    let _ = all[0].child.wait();
    wait_for("the second candidate leads", WITHIN, || {
        !read(&all[1].leads).is_empty()
    });
    let e2 = epoch(&all[1]);
    assert!(e2 > e1, "{e2} > {e1}");
    assert!(read(&all[2].leads).is_empty(), "one leader at a time");

    // The second resigns: the third leads (handed over by the release).
    std::fs::write(&all[1].done, "").expect("done");
    wait_for("the third candidate leads", WITHIN, || {
        !read(&all[2].leads).is_empty()
    });
    let e3 = epoch(&all[2]);
    assert!(e3 > e2, "{e3} > {e2}");
    assert_eq!(all[1].child.wait().expect("wait").code(), Some(0));

    // The watch of the election's key: each leadership ended before the
    // next began; the first by expiry (its holder died), the second by
    // release (it resigned).
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let history = rt.block_on(async {
        let client = Client::new(c.endpoints());
        let mut w = client.watch("db-primary", Some(from + 1));
        let mut h = Vec::new();
        // Through the batch of the third grant (its value comes with it).
        while !h.contains(&("granted", e3)) {
            let e = tokio::time::timeout(WITHIN, w.next())
                .await
                .expect("the watch answers")
                .expect("not ended")
                .expect("no error");
            if let WatchEvent::Changes(b) = e {
                for ch in b.changes.into_iter().filter(|c| c.key == "db-primary") {
                    h.push(match ch.kind {
                        ChangeKind::Granted { token, .. } => ("granted", token),
                        ChangeKind::Released { token } => ("released", token),
                        ChangeKind::Expired { token } => ("expired", token),
                        ChangeKind::Value { token, .. } => ("value", token),
                    });
                }
            }
        }
        h
    });
    assert_eq!(
        history,
        vec![
            ("granted", e1),
            ("value", e1),
            ("expired", e1),
            ("granted", e2),
            ("value", e2),
            ("released", e2),
            ("granted", e3),
            ("value", e3),
        ],
        "no overlap, and the cause of each end"
    );

    // The observer saw no leader, then each leader once with its value,
    // with a gap only where the first died.
    wait_for("the observer sees the third leader", WITHIN, || {
        read(&observed).contains("10.0.0.3")
    });
    let _ = observer.kill();
    let _ = observer.wait();
    let lines: Vec<serde_json::Value> = read(&observed)
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let leaders: Vec<String> = lines
        .iter()
        .filter(|l| l["leader"] == true)
        .map(|l| l["value"].as_str().unwrap_or("").to_string())
        .collect();
    let mut seen = leaders.clone();
    seen.dedup();
    assert_eq!(seen, ["10.0.0.1", "10.0.0.2", "10.0.0.3"], "{lines:?}");
    for cand in &mut all {
        std::fs::write(&cand.done, "").expect("done");
        let _ = cand.child.kill();
        let _ = cand.child.wait();
    }
}
