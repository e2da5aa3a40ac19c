//! `lockctl` against a running cluster: output, `--json`, exit statuses.

use std::time::Duration;

use lockd_tests::cluster::Cluster;

fn lockctl(c: &Cluster, args: &[&str]) -> (Option<i32>, String, String) {
    let out = c.lockctl().args(args).output().expect("run lockctl");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn lockctl_takes_checks_and_frees_locks_with_exit_statuses() {
    let mut c = Cluster::start(3, &[]);
    c.wait_leader(Duration::from_secs(20));
    // The README's quickstart, line by line.
    let (code, out, err) = lockctl(
        &c,
        &[
            "acquire",
            "db/primary",
            "--lease",
            "10s",
            "--owner",
            "alice",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.trim(), "acquired db/primary token 1 lease 10000 ms");
    // Held: exit status 2 after the wait.
    let (code, _, err) = lockctl(
        &c,
        &["acquire", "db/primary", "--lease", "10s", "--wait", "200ms"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("lock \"db/primary\" is held by another holder"),
        "{err}"
    );
    let (code, out, _) = lockctl(&c, &["get", "db/primary"]);
    assert_eq!(
        (code, out.trim()),
        (
            Some(0),
            "db/primary: held, token 1 lease 10000 ms, owner \"alice\""
        )
    );
    let (code, out, _) = lockctl(&c, &["--json", "get", "db/primary"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        (code, v["token"].as_u64(), v["held"].as_bool()),
        (Some(0), Some(1), Some(true))
    );
    // Not the holder: exit status 2.
    let (code, _, err) = lockctl(&c, &["release", "db/primary", "--token", "7"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, out, _) = lockctl(&c, &["release", "db/primary", "--token", "1"]);
    assert_eq!((code, out.trim()), (Some(0), "released db/primary"));
    let (code, out, _) = lockctl(&c, &["get", "db/primary"]);
    assert_eq!((code, out.trim()), (Some(0), "db/primary: free"));
    // Bad input: exit status 1 with the node's precise error.
    let (code, _, err) = lockctl(&c, &["acquire", "k", "--lease", "0ms"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("lease_ms must be above 0"), "{err}");
    // Status of every endpoint, and the members.
    let (code, out, _) = lockctl(&c, &["--json", "status"]);
    let all: Vec<serde_json::Value> = serde_json::from_str(&out).expect("json");
    assert_eq!((code, all.len()), (Some(0), 3));
    assert_eq!(all.iter().filter(|s| s["role"] == "leader").count(), 1);
    let (code, out, _) = lockctl(&c, &["members"]);
    assert_eq!(
        (code, out.lines().filter(|l| l.contains("voter")).count()),
        (Some(0), 3)
    );

    // Health: every node alive and ready.
    let (code, out, err) = lockctl(&c, &["health", "--ready"]);
    assert_eq!(code, Some(0), "{out} {err}");
    assert_eq!(
        out.lines().filter(|l| l.ends_with(": ready")).count(),
        3,
        "{out}"
    );
    // Two nodes gone: they do not answer, and the last one, which knows no
    // leader once its election timeout passes, is alive but not ready.
    c.kill(1);
    c.kill(2);
    let (code, out, _) = lockctl(&c, &["health"]);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.contains(": no answer")).count(),
        2,
        "{out}"
    );
    assert!(out.contains(&format!("{}: alive", c.addr(3))), "{out}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (code, out, err) = lockctl(&c, &["health", "--ready"]);
        assert_eq!(code, Some(1), "{out} {err}");
        if out.contains(&format!("{}: not ready (503)", c.addr(3))) {
            assert!(err.contains("3 of 3 endpoints not ready"), "{err}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{out}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `lockctl completion SHELL` prints a script that knows every subcommand
/// and global flag, with no cluster at all; an unknown shell is refused.
#[test]
fn lockctl_prints_shell_completions() {
    let bin = lockd_tests::cluster::lockd_bin().with_file_name("lockctl");
    for shell in ["bash", "zsh", "fish"] {
        let out = std::process::Command::new(&bin)
            .args(["completion", shell])
            .output()
            .expect("run lockctl");
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8_lossy(&out.stdout);
        for word in ["lockctl", "acquire", "watch", "health", "--endpoints"] {
            assert!(script.contains(word), "{shell}: no {word:?} in the script");
        }
    }
    let out = std::process::Command::new(&bin)
        .args(["completion", "cmd.exe"])
        .output()
        .expect("run lockctl");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid value"));
}
