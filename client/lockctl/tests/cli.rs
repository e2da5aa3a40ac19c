//! The `lockctl` binary without a cluster: its subcommands, and the errors
//! and exit statuses it gives before (or instead of) reaching a node.
//! (Also makes `cargo test` at the workspace root build `lockctl`, which
//! the process-level tests in `tests/` run.)

use std::process::Command;

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn lockctl(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_lockctl"))
        .args(args)
        .output()
        .expect("run lockctl");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A loopback address nobody listens on: connecting is refused at once.
fn dead_endpoint() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").to_string()
}

#[test]
fn help_lists_every_subcommand() {
    let r = lockctl(&["--help"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for sub in [
        "acquire",
        "release",
        "keepalive",
        "get",
        "status",
        "members",
        "upgrade",
        "audit",
        "bench",
    ] {
        assert!(
            r.stdout.lines().any(|l| l.trim_start().starts_with(sub)),
            "{sub} missing from:\n{}",
            r.stdout
        );
    }
}

#[test]
fn a_bad_duration_is_refused_with_the_reason() {
    // A command-line error: clap's usage status, before any request.
    let r = lockctl(&["acquire", "k", "--lease", "10x"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "invalid value '10x' for '--lease <LEASE>': \"10x\" is not a duration like 10s, 1m30s, 1.5s or 500ms"
        ),
        "{}",
        r.stderr
    );
    let r = lockctl(&["bench", "--lease", "soon"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("\"soon\" is not a duration like 10s, 1m30s, 1.5s or 500ms"),
        "{}",
        r.stderr
    );
}

#[test]
fn bad_upgrade_and_bench_requests_fail_with_status_1_before_any_request() {
    let r = lockctl(&["upgrade"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(
        r.stderr.trim(),
        "lockctl: give the component file (or --promote / --abort)"
    );
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let r = lockctl(&["upgrade", "--shadow", "--replaces", "ab", manifest]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(
        r.stderr.trim(),
        "lockctl: --replaces applies to upgrades, not --shadow"
    );
    let r = lockctl(&["upgrade", "/nonexistent/module.wasm"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .starts_with("lockctl: cannot read /nonexistent/module.wasm: "),
        "{}",
        r.stderr
    );
    let r = lockctl(&["bench", "--clients", "0"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(r.stderr.trim(), "lockctl: --clients must be at least 1");
}

#[test]
fn no_reachable_endpoint_is_status_1() {
    let dead = dead_endpoint();
    let r = lockctl(&["--endpoints", &dead, "--json", "status"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(r.stderr.trim(), "lockctl: no endpoint answered");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(v[0]["endpoint"], dead.as_str(), "{v}");
    let refused = format!("cannot connect to {dead}");
    assert!(
        v[0]["error"].as_str().is_some_and(|e| e.contains(&refused)),
        "{v}"
    );

    let r = lockctl(&["--endpoints", &dead, "health", "--ready"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stdout.starts_with(&format!("{dead}: no answer")),
        "{}",
        r.stdout
    );
    assert_eq!(r.stderr.trim(), "lockctl: 1 of 1 endpoints not ready");

    let r = lockctl(&["--endpoints", &dead, "audit"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(r.stderr.trim(), "lockctl: no endpoint answered");

    let r = lockctl(&["--endpoints", &dead, "members", "add", "4", "127.0.0.1:1"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(r.stderr.trim(), "lockctl: no endpoint answered");
}
