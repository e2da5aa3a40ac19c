//! `lockd serve`'s settings from its four layers, in real processes:
//! default < config file < `LOCKD_<NAME>` variable < flag, and a bad value
//! refused naming where it came from (the unit tests of
//! `lockd::config::layers` go through every case; these show the binary
//! wires them).

use std::process::Command;
use std::time::Duration;

use lockd_tests::cluster::{free_port, lockd_bin, Cluster};

/// `lockd serve ARGS` under `env`, which must refuse to start: its stderr.
fn refused(args: &[&str], env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().expect("dir");
    let out = Command::new(lockd_bin())
        .arg("serve")
        .args(["--data-dir", &dir.path().join("d").display().to_string()])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run lockd");
    assert!(!out.status.success(), "lockd serve {args:?} started");
    // Refused before the node was started.
    assert!(!dir.path().join("d").exists());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn config_bad_values_are_refused_naming_their_source() {
    let e = refused(&[], &[("LOCKD_HEARTBEAT_MS", "fast")]);
    assert!(
        e.contains("the environment variable LOCKD_HEARTBEAT_MS")
            && e.contains("--heartbeat-ms")
            && e.contains("\"fast\""),
        "{e}"
    );
    let e = refused(&[], &[("LOCKD_INSECURE", "yes")]);
    assert!(
        e.contains("LOCKD_INSECURE") && e.contains("true or false"),
        "{e}"
    );

    // The same refusal (above the module ceiling) from each layer: the
    // highest one's value and name are reported.
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("lockd.toml");
    std::fs::write(&file, "max_module_bytes = 41943040\n").expect("write");
    let file = file.display().to_string();
    let e = refused(&["--config", &file], &[]);
    assert!(
        e.contains("41943040") && e.contains("`max_module_bytes` in the config file"),
        "{e}"
    );
    let env = [("LOCKD_MAX_MODULE_BYTES", "52428800")];
    let e = refused(&["--config", &file], &env);
    assert!(
        e.contains("52428800") && e.contains("the environment variable LOCKD_MAX_MODULE_BYTES"),
        "{e}"
    );
    let e = refused(&["--config", &file, "--max-module-bytes", "62914560"], &env);
    assert!(
        e.contains("62914560") && e.contains("the flag --max-module-bytes"),
        "{e}"
    );
    // The file may be named by the environment too, and its unknown keys
    // are refused.
    std::fs::write(dir.path().join("typo.toml"), "max_lease = 5\n").expect("write");
    let typo = dir.path().join("typo.toml").display().to_string();
    let e = refused(&[], &[("LOCKD_CONFIG", typo.as_str())]);
    assert!(e.contains("unknown setting `max_lease`"), "{e}");
}

#[test]
fn config_a_node_takes_the_environment_over_its_file() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("lockd.toml");
    // The heartbeat the cluster's flag beats (with it, the election timeout
    // would be refused); a max lease the environment beats.
    std::fs::write(&file, "heartbeat_ms = 5000\nmax_lease_ms = 1000\n").expect("write");
    let mut c = Cluster::empty(&[]);
    let addr = format!("127.0.0.1:{}", free_port());
    c.add_proc(1, addr, &["--config", &file.display().to_string()]);
    c.nodes
        .get_mut(&1)
        .expect("node 1")
        .env
        .push(("LOCKD_MAX_LEASE_MS".into(), "120000".into()));
    c.spawn(1);
    let leader = c.wait_leader(Duration::from_secs(20));
    // Over the file's bound, within the environment's.
    c.acquire_on_leader("layers/a", 60_000, Duration::from_secs(20));
    // Over the environment's (and within the default's).
    let r = c.acquire(leader, "layers/b", 200_000).expect("answer");
    assert_eq!(r.status, 400, "{r:?}");
}
