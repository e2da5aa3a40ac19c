//! `lockctl`: the command line of lockd.
//!
//! ```text
//! lockctl [--endpoints ADDR[,ADDR…]] [--json] acquire KEY --lease 10s [--wait 5s] [--hold]
//!         [--mode exclusive|shared] [--limit N] [--owner NAME] [--request-id ID]
//! lockctl lock KEY [--lease 10s] [--wait 10m] [--grace 10s] -- CMD ARGS…  # run CMD holding KEY
//! lockctl lock KEY KEY… [--session] [--lease 10s] -- CMD ARGS…    # several keys in one session
//! lockctl elect NAME [VALUE] [--ttl 10s] [--priority N] -- CMD ARGS… # run CMD while leader
//! lockctl elect NAME --observe [--count N]                       # the leader, and each change
//! lockctl proclaim KEY VALUE --token T                           # a leader publishes a new value
//! lockctl release KEY --token T
//! lockctl keepalive KEY --token T
//! lockctl get KEY                                                # every holder
//! lockctl list [PREFIX] [--after KEY] [--limit N]
//! lockctl watch [PREFIX] [--from INDEX] [--count N]              # changes as they are applied
//! lockctl policy get | policy set FILE.json
//! lockctl capacity [--max-held N] [--max-key-bytes N]            # the cluster's bounds
//! lockctl status
//! lockctl health [--ready]                                       # exit 1 unless every endpoint is
//! lockctl completion bash|zsh|fish                              # a shell completion script
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
mod cli;
mod elect;
mod get;
mod health;
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
mod watch;

use clap::Parser;
use lockd_client::admin::Admin;
use lockd_client::Client;

use cli::*;
use output::Failure;

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
            keys,
            session,
            lease,
            wait,
            grace,
            mode,
            limit,
            owner,
            command,
        } => {
            let r = lock::Run {
                session: session || keys.len() > 1,
                keys,
                opts: acquire_options(lease, wait, mode, limit, owner, None),
                grace,
                command,
                election: false,
            };
            lock::run(&client, r).await
        }
        Cmd::Elect {
            name,
            observe: true,
            count,
            ..
        } => elect::observe(&client, j, &name, count).await,
        Cmd::Elect {
            name,
            value,
            ttl,
            wait,
            grace,
            command,
            priority,
            ..
        } => {
            let opts = lockd_client::AcquireOptions::exclusive(ttl)
                .wait(wait)
                .value(value)
                .priority(priority);
            let r = lock::Run {
                keys: vec![name],
                session: false,
                opts,
                grace,
                command,
                election: true,
            };
            lock::run(&client, r).await
        }
        Cmd::Proclaim { key, value, token } => {
            elect::proclaim(&client, j, &key, &value, token).await
        }
        Cmd::Release { key, token } => release::run(&client, j, &key, token).await,
        Cmd::Keepalive { key, token } => keepalive::run(&client, j, &key, token).await,
        Cmd::Get { key } => get::run(&client, j, &key).await,
        Cmd::List {
            prefix,
            after,
            limit,
        } => list::run(&client, j, &prefix, after.as_deref(), limit).await,
        Cmd::Watch {
            prefix,
            from,
            count,
        } => watch::run(&client, j, &prefix, from, count).await,
        Cmd::Policy { op } => match op {
            PolicyOp::Get => policy::get(&admin, j).await,
            PolicyOp::Set { file } => policy::set(&admin, j, &file).await,
        },
        Cmd::Capacity {
            max_held,
            max_key_bytes,
        } => capacity::run(&admin, j, max_held, max_key_bytes).await,
        Cmd::Status => status::run(&admin, j).await,
        Cmd::Health { ready } => health::run(&admin, j, ready).await,
        // Printed before the runtime starts (main).
        Cmd::Completion { .. } => Ok(()),
        Cmd::Members { op } => members::run(&admin, j, op).await,
        Cmd::Upgrade {
            file,
            shadow,
            promote,
            abort,
            signature,
            replaces,
            no_precheck,
            rollback,
            on_failure,
            quorum,
        } => {
            let what = if promote {
                upgrade::Upgrade::Promote
            } else if abort {
                upgrade::Upgrade::Abort
            } else if rollback && file.is_none() {
                upgrade::Upgrade::Rollback {
                    precheck: !no_precheck,
                }
            } else {
                upgrade::Upgrade::Install {
                    file,
                    shadow,
                    signature,
                    replaces,
                    precheck: !no_precheck,
                    rollback,
                    on_failure: on_failure.unwrap_or_default(),
                    quorum,
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
            http,
        } => {
            let w = bench::Workload {
                clients,
                contended,
                seconds,
                lease,
                mode: mode.into(),
                limit,
                http,
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
    if let Cmd::Completion { shell } = cli.command {
        use clap::CommandFactory;
        clap_complete::generate(
            shell,
            &mut Cli::command(),
            "lockctl",
            &mut std::io::stdout(),
        );
        return;
    }
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
