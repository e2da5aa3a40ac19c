//! `lockctl`: the command line of lockd.
//!
//! ```text
//! lockctl [--endpoints ADDR[,ADDR…]] [--json] acquire KEY --lease 10s [--wait 5s] [--hold]
//!         [--mode exclusive|shared] [--limit N] [--owner NAME] [--request-id ID]
//! lockctl lock KEY [--lease 10s] [--wait 10m] [--grace 10s] -- CMD ARGS…  # run CMD holding KEY
//! lockctl release KEY --token T
//! lockctl keepalive KEY --token T
//! lockctl get KEY                                                # every holder
//! lockctl list [PREFIX] [--after KEY] [--limit N]
//! lockctl policy get | policy set FILE.json
//! lockctl capacity [--max-held N] [--max-key-bytes N]            # the cluster's bounds
//! lockctl status
//! lockctl members [list] | members add ID ADDR | members promote ID | members remove ID
//! lockctl bench --clients 64 [--contended] [--seconds 5] [--mode shared] [--limit N]
//! lockctl upgrade FILE.wasm [--signature FILE.sig] [--replaces HASH] [--no-precheck]   # swap the lock module
//! lockctl upgrade --shadow FILE.wasm [--signature FILE.sig] | upgrade --promote | upgrade --abort
//! lockctl module keygen NAME | module sign FILE.wasm --key NAME.key  # signed modules
//! lockctl module trust NAME.pub|HEX | module untrust NAME.pub|HEX | module keys
//! lockctl audit                                                  # determinism check
//! lockctl snapshot save FILE                                     # a backup, for `lockd restore`
//! lockctl --cacert ca.pem [--cert me.pem --key me.key] [--token T] …   # TLS, a client certificate, a token
//! ```
//!
//! TLS and credentials: `--cacert` (the cluster's CA) turns TLS on;
//! `--cert`/`--key` present a client certificate (its name is the
//! principal); `--token` before the subcommand sends a bearer token
//! (after `release` or `keepalive`, `--token` is the fencing token, as it
//! always was). Each also comes from `LOCKD_CACERT`, `LOCKD_CERT`,
//! `LOCKD_KEY`, `LOCKD_TOKEN`.
//!
//! Exit status: 0 done; 1 error; 2 the lock is held (acquire after its wait,
//! release or keepalive with a token that does not hold it, …): scripts
//! can tell "busy" from "broken"; 3 a lock held with `acquire --hold` was
//! lost (by `lock` too, whatever its command's status; otherwise `lock`
//! exits with its command's status, 126 or 127 when the command cannot be
//! started); 4 not allowed (no or unknown credentials, a role that does not
//! allow it, another principal's holding). A lock taken by `acquire` stays held after lockctl exits, until
//! released or its lease ends.
//!
//! A client only: it links `lockd-client`, not the server (and so no
//! WebAssembly runtime). One module per subcommand; [`output`] holds the
//! printing and exit-status rules they share.

mod acquire;
mod audit;
mod bench;
mod capacity;
mod get;
mod keepalive;
mod keyfile;
mod list;
mod lock;
mod members;
mod module;
mod output;
mod policy;
mod release;
mod snapshot;
mod status;
mod upgrade;

use std::time::Duration;

use clap::{Parser, Subcommand};
use lockd_client::admin::Admin;
use lockd_client::Client;

use output::Failure;

#[derive(Parser)]
#[command(
    name = "lockctl",
    version,
    about = "Command line of the lockd lock service"
)]
struct Cli {
    /// Nodes of the cluster (any of them; requests find the leader).
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "127.0.0.1:7400"
    )]
    endpoints: Vec<String>,
    /// Machine-readable output.
    #[arg(long, global = true)]
    json: bool,
    /// The cluster's CA certificate (PEM): speak TLS to the nodes.
    #[arg(long, global = true, env = "LOCKD_CACERT")]
    cacert: Option<std::path::PathBuf>,
    /// A client certificate (PEM) to present; its name is the principal.
    #[arg(long, global = true, env = "LOCKD_CERT", requires = "tls_key")]
    cert: Option<std::path::PathBuf>,
    /// The private key of --cert (PEM).
    #[arg(
        long = "key",
        id = "tls_key",
        global = true,
        env = "LOCKD_KEY",
        requires = "cert"
    )]
    key_file: Option<std::path::PathBuf>,
    /// A bearer token (`lockd auth token` makes one). Given before the
    /// subcommand: after `release` or `keepalive`, `--token` is the
    /// fencing token.
    #[arg(
        long = "token",
        id = "bearer_token",
        env = "LOCKD_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    #[command(subcommand)]
    command: Cmd,
}

/// The credentials the flags (or LOCKD_* variables) give.
fn credentials(cli: &Cli) -> Result<lockd_client::Credentials, Failure> {
    use anyhow::Context;
    let tls = match (&cli.cacert, &cli.cert, &cli.key_file) {
        (Some(ca), cert, key) => {
            let identity = cert.as_deref().zip(key.as_deref());
            Some(
                lockd_client::tls::TlsClient::from_files(ca, identity)
                    .context("cannot set up TLS")?,
            )
        }
        (None, Some(_), _) => {
            return Err(anyhow::anyhow!(
                "--cert needs --cacert: the client certificate is presented over TLS"
            )
            .into())
        }
        (None, None, _) => None,
    };
    Ok(lockd_client::Credentials {
        tls,
        token: cli.token.clone().map(lockd_client::Token::new),
    })
}

#[derive(Subcommand)]
enum Cmd {
    /// Take a lock; prints its fencing token.
    Acquire {
        key: String,
        /// Lease, e.g. 10s, 500ms, 2m.
        #[arg(long, value_parser = parse_duration)]
        lease: Duration,
        /// Wait this long for a held lock (default: try once).
        #[arg(long, value_parser = parse_duration, default_value = "0ms")]
        wait: Duration,
        /// Keep holding: renew the lease in the background until Ctrl-C or
        /// SIGTERM, then release. Exits with status 3 if the lock is lost.
        #[arg(long)]
        hold: bool,
        /// `shared`: a reader of a readers-writer lock (needs a lock module
        /// of world 0.2).
        #[arg(long, value_enum, default_value_t = ModeArg::Exclusive)]
        mode: ModeArg,
        /// Holders at once: 1 a mutex, N a semaphore of N (or N readers).
        #[arg(long, default_value_t = 1)]
        limit: u32,
        /// The owner (session) name recorded with the holding.
        #[arg(long)]
        owner: Option<String>,
        /// Makes a retried acquire return the grant that committed (default:
        /// a fresh random id, so lockctl's own retries are safe).
        #[arg(long)]
        request_id: Option<String>,
    },
    /// Run CMD while holding KEY: the lease renewed while it runs, the
    /// lock released when it ends; CMD gets SIGTERM (then SIGKILL after
    /// --grace) and lockctl exits with status 3 if the lock is lost.
    /// CMD sees LOCKD_LOCK_KEY, LOCKD_FENCING_TOKEN and LOCKD_LEASE_MS
    /// (and, for one more release, LOCKD_KEY and LOCKD_TOKEN).
    Lock {
        key: String,
        #[arg(long, value_parser = parse_duration, default_value = "10s")]
        lease: Duration,
        /// Wait this long for a held lock; then exit with status 2 without
        /// running CMD.
        #[arg(long, value_parser = parse_duration, default_value = "10m")]
        wait: Duration,
        /// After SIGTERM, how long CMD has to end before SIGKILL.
        #[arg(long, value_parser = parse_duration, default_value = "10s")]
        grace: Duration,
        #[arg(long, value_enum, default_value_t = ModeArg::Exclusive)]
        mode: ModeArg,
        #[arg(long, default_value_t = 1)]
        limit: u32,
        #[arg(long)]
        owner: Option<String>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, num_args = 1..)]
        command: Vec<String>,
    },
    /// Release a lock held with TOKEN.
    Release {
        key: String,
        #[arg(long)]
        token: u64,
    },
    /// Renew the lease of TOKEN.
    Keepalive {
        key: String,
        #[arg(long)]
        token: u64,
    },
    /// Who holds KEY (linearizable read).
    Get { key: String },
    /// Held keys under PREFIX and their holders (linearizable read).
    List {
        #[arg(default_value = "")]
        prefix: String,
        /// Start after this key (the `next` of the previous page).
        #[arg(long)]
        after: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Show or replace the lock module's policy data.
    Policy {
        #[command(subcommand)]
        op: PolicyOp,
    },
    /// Show the cluster's capacity bounds and their use, or set them.
    Capacity {
        /// The most holdings the cluster keeps.
        #[arg(long)]
        max_held: Option<u64>,
        /// The most key bytes those holdings may have together.
        #[arg(long)]
        max_key_bytes: Option<u64>,
    },
    /// Status of every endpoint.
    Status,
    /// Show or change the membership.
    Members {
        #[command(subcommand)]
        op: Option<MembersOp>,
    },
    /// Replace the lock module through the log; with --shadow, run it
    /// beside the active one first (then --promote or --abort).
    Upgrade {
        /// The component file (a lock-sm component).
        file: Option<std::path::PathBuf>,
        /// Start FILE as a shadow module: fed every committed batch, its
        /// differences counted in `status`, no effect on locks.
        #[arg(long)]
        shadow: bool,
        /// Upgrade to the running shadow module.
        #[arg(long, conflicts_with_all = ["shadow", "abort", "file"])]
        promote: bool,
        /// Stop the running shadow module.
        #[arg(long, conflicts_with_all = ["shadow", "promote", "file"])]
        abort: bool,
        /// The module's signature file (default: FILE.sig when it exists;
        /// see `lockctl module sign`).
        #[arg(long, conflicts_with_all = ["promote", "abort"])]
        signature: Option<std::path::PathBuf>,
        /// The module hash this upgrade replaces (default: the active one).
        #[arg(long)]
        replaces: Option<String>,
        /// Skip the leader's dry run; every node still checks at apply.
        #[arg(long)]
        no_precheck: bool,
    },
    /// Signed modules: make and use signing keys, and manage the keys the
    /// cluster trusts.
    Module {
        #[command(subcommand)]
        op: module::ModuleOp,
    },
    /// Compare the state hashes recorded by every node; name any that differs.
    Audit,
    /// Backups: `snapshot save FILE` writes the leader's consistent
    /// snapshot (module, state, token counter) for `lockd restore`.
    Snapshot {
        #[command(subcommand)]
        op: SnapshotOp,
    },
    /// Lock cycles per second and acquire latency.
    Bench {
        #[arg(long, default_value_t = 1)]
        clients: usize,
        /// All clients on one key (every cycle is a handoff).
        #[arg(long)]
        contended: bool,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        #[arg(long, value_parser = parse_duration, default_value = "10s")]
        lease: Duration,
        /// `shared`: readers (needs a lock module of world 0.2).
        #[arg(long, value_enum, default_value_t = ModeArg::Exclusive)]
        mode: ModeArg,
        /// Holders at once per key: a semaphore of N (or N readers).
        #[arg(long, default_value_t = 1)]
        limit: u32,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ModeArg {
    Exclusive,
    Shared,
}

impl From<ModeArg> for lockd_client::proto::LockMode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Exclusive => lockd_client::proto::LockMode::Exclusive,
            ModeArg::Shared => lockd_client::proto::LockMode::Shared,
        }
    }
}

#[derive(Subcommand)]
enum SnapshotOp {
    /// Write the backup to FILE.
    Save { file: std::path::PathBuf },
}

#[derive(Subcommand)]
enum PolicyOp {
    /// Print the rules.
    Get,
    /// Replace the rules with FILE's (`-`: stdin).
    Set { file: std::path::PathBuf },
}

#[derive(Subcommand)]
enum MembersOp {
    List,
    /// Add node ID at ADDR as a learner (started with `lockd serve --join`).
    Add {
        id: u64,
        addr: String,
    },
    /// Make learner ID a voter.
    Promote {
        id: u64,
    },
    /// Remove node ID.
    Remove {
        id: u64,
    },
}

/// The acquire the flags of `acquire` and `lock` ask for.
fn acquire_options(
    lease: Duration,
    wait: Duration,
    mode: ModeArg,
    limit: u32,
    owner: Option<String>,
    request_id: Option<String>,
) -> lockd_client::AcquireOptions {
    lockd_client::AcquireOptions {
        lease,
        wait,
        mode: mode.into(),
        limit,
        owner,
        request_id,
    }
}

/// `10s`, `500ms`, `2m`, `1h`, or a bare number of milliseconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 10s, 500ms, 2m"))?;
    let scale: u64 = match unit {
        "" | "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?}; use ms, s, m or h"
            ))
        }
    };
    let ms = n
        .checked_mul(scale)
        .ok_or_else(|| format!("{s:?} is too long a duration"))?;
    Ok(Duration::from_millis(ms))
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let creds = credentials(&cli)?;
    let client = Client::with_options(
        cli.endpoints.clone(),
        lockd_client::ClientOptions {
            credentials: creds.clone(),
            ..Default::default()
        },
    );
    let admin = Admin::new(client.clone(), cli.endpoints.clone());
    let j = cli.json;
    match cli.command {
        Cmd::Acquire {
            key,
            lease,
            wait,
            hold,
            mode,
            limit,
            owner,
            request_id,
        } => {
            let opts = acquire_options(lease, wait, mode, limit, owner, request_id);
            acquire::run(&client, j, &key, opts, hold).await
        }
        Cmd::Lock {
            key,
            lease,
            wait,
            grace,
            mode,
            limit,
            owner,
            command,
        } => {
            let r = lock::Run {
                key,
                opts: acquire_options(lease, wait, mode, limit, owner, None),
                grace,
                command,
            };
            lock::run(&client, r).await
        }
        Cmd::Release { key, token } => release::run(&client, j, &key, token).await,
        Cmd::Keepalive { key, token } => keepalive::run(&client, j, &key, token).await,
        Cmd::Get { key } => get::run(&client, j, &key).await,
        Cmd::List {
            prefix,
            after,
            limit,
        } => list::run(&client, j, &prefix, after.as_deref(), limit).await,
        Cmd::Policy { op } => match op {
            PolicyOp::Get => policy::get(&admin, j).await,
            PolicyOp::Set { file } => policy::set(&admin, j, &file).await,
        },
        Cmd::Capacity {
            max_held,
            max_key_bytes,
        } => capacity::run(&admin, j, max_held, max_key_bytes).await,
        Cmd::Status => status::run(&admin, j).await,
        Cmd::Members { op } => members::run(&admin, j, op).await,
        Cmd::Upgrade {
            file,
            shadow,
            promote,
            abort,
            signature,
            replaces,
            no_precheck,
        } => {
            let what = if promote {
                upgrade::Upgrade::Promote
            } else if abort {
                upgrade::Upgrade::Abort
            } else {
                upgrade::Upgrade::Install {
                    file,
                    shadow,
                    signature,
                    replaces,
                    precheck: !no_precheck,
                }
            };
            upgrade::run(&admin, j, what).await
        }
        Cmd::Module { op } => module::run(&admin, j, op).await,
        Cmd::Audit => audit::run(&admin, j).await,
        Cmd::Snapshot {
            op: SnapshotOp::Save { file },
        } => snapshot::save(&admin, j, &file).await,
        Cmd::Bench {
            clients,
            contended,
            seconds,
            lease,
            mode,
            limit,
        } => {
            let w = bench::Workload {
                clients,
                contended,
                seconds,
                lease,
                mode: mode.into(),
                limit,
            };
            bench::run(&cli.endpoints, &creds, j, w).await
        }
    }
}

/// Inside `lockctl lock … -- CMD`, `LOCKD_KEY` and `LOCKD_TOKEN` are the
/// lock's key and fencing token (the names older releases gave CMD, kept
/// beside `LOCKD_LOCK_KEY` and `LOCKD_FENCING_TOKEN` for one release):
/// a lockctl that CMD runs must not take them for its TLS key file and
/// bearer token. Dropped before the flags are read, while no other
/// thread runs.
fn forget_an_outer_lock() {
    for (ours, outer) in [
        ("LOCKD_TOKEN", lock::ENV_FENCING_TOKEN),
        ("LOCKD_KEY", lock::ENV_LOCK_KEY),
    ] {
        if let (Some(a), Some(b)) = (std::env::var_os(ours), std::env::var_os(outer)) {
            if a == b {
                std::env::remove_var(ours);
            }
        }
    }
}

fn main() {
    forget_an_outer_lock();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lockctl: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(Failure(e, code)) = rt.block_on(run(cli)) {
        eprintln!("lockctl: {e:#}");
        std::process::exit(code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_a_unit_or_milliseconds() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration(" 500ms "), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250"), Ok(Duration::from_millis(250)));
    }

    #[test]
    fn bad_durations_say_why() {
        assert_eq!(
            parse_duration("10x"),
            Err("unknown unit \"x\" in \"10x\"; use ms, s, m or h".into())
        );
        assert_eq!(
            parse_duration("s"),
            Err("\"s\" is not a duration like 10s, 500ms, 2m".into())
        );
        assert_eq!(
            parse_duration("99999999999999999h"),
            Err("\"99999999999999999h\" is too long a duration".into())
        );
    }
}
