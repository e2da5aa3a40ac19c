//! The layers' precedence, sources named in errors, and the TOML reading.

use std::ffi::OsStr;

use clap::{Args, FromArgMatches};

use super::*;
use crate::config::settings::ServeSettings;

fn serve() -> Command {
    Command::new("lockd").subcommand(ServeSettings::augment_args(Command::new("serve")))
}

/// `lockd serve ARGS…` under the environment `env`: the settings and
/// where each came from.
fn run(args: &[&str], env: &[(&str, &str)]) -> Result<(ServeSettings, Origins), ConfigError> {
    let env: BTreeMap<String, OsString> = env
        .iter()
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .collect();
    let argv = ["lockd", "serve"].iter().chain(args).copied();
    let (m, origins) = parse(serve(), argv, |v| env.get(v).cloned())?;
    let s = ServeSettings::from_arg_matches(m.subcommand_matches("serve").unwrap())?;
    Ok((s, origins))
}

fn file(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), text).unwrap();
    f
}

#[test]
fn precedence_is_default_file_env_flag() {
    let f =
        file("heartbeat_ms = 41\nelection_timeout_ms = 301\nmax_lease_ms = 5000\njoin = true\n");
    let path = f.path().to_str().unwrap();
    let env = [
        ("LOCKD_ELECTION_TIMEOUT_MS", "302"),
        ("LOCKD_MAX_LEASE_MS", "6000"),
    ];
    let (s, o) = run(&["--config", path, "--max-lease-ms", "7000"], &env).unwrap();
    // Default only.
    assert_eq!(s.tuning.raft.snapshot_threshold, 10_000);
    assert_eq!(o.of("snapshot_threshold"), Source::Default);
    // File over the default.
    assert_eq!(s.tuning.raft.heartbeat_ms, 41);
    assert!(s.identity.join);
    assert_eq!(o.of("heartbeat_ms").rank(), 1, "{}", o.of("heartbeat_ms"));
    // Environment over the file.
    assert_eq!(s.tuning.raft.election_timeout_ms, 302);
    assert_eq!(
        o.of("election_timeout_ms"),
        Source::Env("LOCKD_ELECTION_TIMEOUT_MS".into())
    );
    // Flag over the environment and the file.
    assert_eq!(s.tuning.limits.max_lease_ms, 7000);
    assert_eq!(o.of("max_lease_ms"), Source::Flag("--max-lease-ms".into()));
    // The config file itself may come from the environment.
    let (s, _) = run(&[], &[("LOCKD_CONFIG", path)]).unwrap();
    assert_eq!(s.tuning.raft.heartbeat_ms, 41);
    // A switch from the environment, and turned off there over the file.
    let (s, _) = run(&["--config", path], &[("LOCKD_JOIN", "false")]).unwrap();
    assert!(!s.identity.join);
    let (s, _) = run(&[], &[("LOCKD_INSECURE", "true")]).unwrap();
    assert!(s.security.insecure);
}

#[test]
fn durations_are_read_alike_from_a_flag_the_environment_and_the_file() {
    let f = file("heartbeat_ms = \"50ms\"\nelection_timeout_ms = 300\n");
    let path = f.path().to_str().unwrap();
    let env = [("LOCKD_MAX_LEASE_MS", "1h")];
    let (s, _) = run(&["--config", path, "--max-wait-ms", "1m30s"], &env).unwrap();
    assert_eq!(s.tuning.raft.heartbeat_ms, 50);
    assert_eq!(s.tuning.raft.election_timeout_ms, 300);
    assert_eq!(s.tuning.limits.max_lease_ms, 3_600_000);
    assert_eq!(s.tuning.limits.max_wait_ms, 90_000);
}

#[test]
fn bad_values_name_the_setting_and_their_source() {
    let e = run(&[], &[("LOCKD_HEARTBEAT_MS", "fast")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("LOCKD_HEARTBEAT_MS") && e.contains("--heartbeat-ms") && e.contains("\"fast\""),
        "{e}"
    );
    assert!(e.contains("is not a duration like 10s"), "{e}");
    let e = run(&[], &[("LOCKD_JOIN", "yes")]).unwrap_err().to_string();
    assert!(
        e.contains("LOCKD_JOIN") && e.contains("true or false"),
        "{e}"
    );
    let f = file("max_waiters = -1\n");
    let e = run(&["--config", f.path().to_str().unwrap()], &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`max_waiters` in the config file") && e.contains("--max-waiters"),
        "{e}"
    );
    let f = file("max_waiters = \"40\"\n");
    let e = run(&["--config", f.path().to_str().unwrap()], &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`max_waiters`") && e.contains("expected an integer"),
        "{e}"
    );
    let f = file("heartbeat_ms = true\n");
    let e = run(&["--config", f.path().to_str().unwrap()], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected a duration"), "{e}");
    let e = run(&["--idle-timeout-ms", "1.5ms"], &[]).unwrap_err();
    assert!(e.to_string().contains("finer than a millisecond"), "{e}");
    let f = file("heartbeat = 40\n");
    let e = run(&["--config", f.path().to_str().unwrap()], &[]).unwrap_err();
    assert!(
        matches!(&e, ConfigError::UnknownKey { key, .. } if key == "heartbeat"),
        "{e}"
    );
    let f = file("config = \"other.toml\"\n");
    let e = run(&["--config", f.path().to_str().unwrap()], &[]).unwrap_err();
    assert!(matches!(&e, ConfigError::UnknownKey { .. }), "{e}");
    // A bad flag is clap's error, as before.
    let e = run(&["--heartbeat-ms", "x"], &[]).unwrap_err();
    assert!(matches!(&e, ConfigError::Cli(_)), "{e}");
    // A value that parses but is refused later still names its source.
    let (s, o) = run(&[], &[("LOCKD_MAX_MODULE_BYTES", "999999999")]).unwrap();
    let e = s.resolve(&o).unwrap_err().to_string();
    assert!(
        e.contains("ceiling") && e.contains("LOCKD_MAX_MODULE_BYTES"),
        "{e}"
    );
}

#[test]
fn allowed_hosts_are_a_list_of_names_from_any_layer() {
    let hosts = |args: &[&str], env: &[(&str, &str)]| {
        let (s, o) = run(args, env).unwrap();
        s.resolve(&o).unwrap().allowed_hosts
    };
    assert!(hosts(&[], &[]).is_empty());
    assert_eq!(
        hosts(&["--allowed-hosts", "Lockd.Example., dev.local"], &[]),
        ["lockd.example", "dev.local"]
    );
    assert_eq!(
        hosts(&[], &[("LOCKD_ALLOWED_HOSTS", "a.example")]),
        ["a.example"]
    );
    let f = file("allowed_hosts = \"b.example,c\"\n");
    let path = f.path().to_str().unwrap();
    assert_eq!(hosts(&["--config", path], &[]), ["b.example", "c"]);
    // An entry that is not a name is refused where it was given.
    let e = run(&[], &[("LOCKD_ALLOWED_HOSTS", "a.example:7400")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("LOCKD_ALLOWED_HOSTS") && e.contains("no port"),
        "{e}"
    );
    let f = file("allowed_hosts = \"http://b.example\"\n");
    let e = run(&["--config", f.path().to_str().unwrap()], &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`allowed_hosts`") && e.contains("no scheme"),
        "{e}"
    );
}

#[test]
fn the_addr_shorthand_yields_to_a_specific_setting_from_the_same_layer_or_above() {
    let resolve = |args: &[&str], env: &[(&str, &str)]| {
        let (s, o) = run(args, env).unwrap();
        let c = s.resolve(&o).unwrap();
        (c.addr.clone(), c.listen.clone())
    };
    let f = file("listen = \"127.0.0.1:1\"\nadvertise_addr = \"127.0.0.1:2\"\n");
    let path = f.path().to_str().unwrap();
    assert_eq!(
        resolve(&["--config", path], &[]),
        ("127.0.0.1:2".into(), Some("127.0.0.1:1".into()))
    );
    // A flag --addr beats the file's two.
    assert_eq!(
        resolve(&["--config", path, "--addr", "127.0.0.1:3"], &[]),
        ("127.0.0.1:3".into(), None)
    );
    // Flags: the specific one beats the shorthand.
    assert_eq!(
        resolve(
            &["--addr", "127.0.0.1:3", "--advertise-addr", "127.0.0.1:4"],
            &[]
        ),
        ("127.0.0.1:4".into(), None)
    );
    assert_eq!(
        resolve(&[], &[("LOCKD_ADDR", "127.0.0.1:5")]),
        ("127.0.0.1:5".into(), None)
    );
}

#[test]
fn every_setting_is_named_alike_everywhere() {
    // Flag `--a-b`, TOML key `a_b`, variable `LOCKD_A_B`.
    let cmd = ServeSettings::augment_args(Command::new("serve"));
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        assert_eq!(arg.get_long(), Some(id.replace('_', "-").as_str()), "{id}");
        let env = arg.get_env().and_then(OsStr::to_str);
        assert_eq!(
            env,
            Some(format!("LOCKD_{}", id.to_uppercase())).as_deref(),
            "{id}"
        );
    }
}

#[test]
fn defaults_ignore_the_environment_and_match_the_node_config() {
    let c = crate::config::NodeConfig::default();
    assert_eq!(c.id, 1);
    assert_eq!(c.addr, crate::config::DEFAULT_ADDR);
    assert_eq!(c.conn, crate::transport::limits::ConnLimits::default());
    assert_eq!(c.engine, lockd_core::engine::EngineSettings::default());
    assert_eq!(c.raft.heartbeat_ms, 40);
}
