//! The `lockd` command line: bad flags get precise errors. (Also makes
//! `cargo test` build the `lockd` binaries that process-level tests in
//! `tests/` start; `lockctl` has its own package and tests.)

use std::process::Command;

fn lockd(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lockd"))
        .args(args)
        .output()
        .expect("run lockd");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_initial_cluster_is_a_precise_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let (code, err) = lockd(&[
        "serve",
        "--data-dir",
        &d,
        "--initial-cluster",
        "1=127.0.0.1:1,one=x",
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("\"one\" is not a node id"), "{err}");
    let (code, err) = lockd(&[
        "serve",
        "--id",
        "2",
        "--addr",
        "127.0.0.1:1",
        "--data-dir",
        &d,
        "--initial-cluster",
        "2=127.0.0.1:2",
    ]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("gives node 2 the address 127.0.0.1:2, but --addr is 127.0.0.1:1"),
        "{err}"
    );
    let (code, err) = lockd(&[
        "serve",
        "--data-dir",
        &d,
        "--join",
        "--initial-cluster",
        "1=127.0.0.1:1",
    ]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("--join and --initial-cluster exclude each other"),
        "{err}"
    );
}

#[test]
fn a_busy_address_is_a_precise_error() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = lockd(&[
        "serve",
        "--addr",
        &addr,
        "--data-dir",
        &dir.path().display().to_string(),
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
}

#[test]
fn certs_init_writes_a_ca_nodes_and_clients_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("certs");
    let d = d.display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_lockd"))
        .args([
            "certs",
            "init",
            &d,
            "--node",
            "1=127.0.0.1",
            "--node",
            "2=localhost",
        ])
        .output()
        .expect("run lockd");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    for f in ["ca", "node-1", "node-2", "admin"] {
        for ext in ["pem", "key"] {
            let path = format!("{d}/{f}.{ext}");
            assert!(std::path::Path::new(&path).is_file(), "{path}");
            assert!(said.contains(&path), "{said}");
        }
    }
    // Never over an existing CA.
    let (code, err) = lockd(&["certs", "init", &d, "--node", "3=127.0.0.3"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("already holds a CA"), "{err}");
    let (code, err) = lockd(&["certs", "init", &d, "--node", "one=127.0.0.1"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("\"one\" is not a node id"), "{err}");
}
