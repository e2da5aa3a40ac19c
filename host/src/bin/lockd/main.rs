//! `lockd`: a node of the lock service.
//!
//! ```text
//! lockd serve                                  # embedded default: one node, 127.0.0.1:7400, ./lockd-data
//! lockd serve --id 2 --addr 127.0.0.1:7402 --data-dir d2 \
//!       --initial-cluster 1=127.0.0.1:7401,2=127.0.0.1:7402,3=127.0.0.1:7403
//! lockd serve --id 4 --addr 127.0.0.1:7404 --data-dir d4 --join   # wait to be added
//! lockd serve --listen 0.0.0.0:7400 --advertise-addr 10.0.0.1:7400 …   # bind one, tell peers another
//! LOCKD_CONFIG=/etc/lockd/lockd.toml LOCKD_HEARTBEAT_MS=50 lockd serve   # any setting from the environment
//! lockd dev --nodes 3                          # a local 3-node cluster in one process
//! lockd replay --data-dir d2 --module new.wasm # a stopped node's log through another module
//! lockd restore --snapshot backup.snap --id 1 --data-dir new1 --initial-cluster 1=…,2=…,3=…
//! lockd recover --force-new-cluster --id 2 --data-dir d2 --addr 127.0.0.1:7402   # from one survivor
//! lockd serve --addr 10.0.0.1:7400 --tls-cert node-1.pem --tls-key node-1.key --tls-ca ca.pem --auth-file auth.toml
//! lockd certs init certs --node 1=10.0.0.1 --client admin   # a development CA and certificates
//! lockd auth token ci                          # a new bearer token and the line for the auth file
//! lockd auth check auth.toml                   # parse an auth file, say what it grants
//! ```
//!
//! One module per subcommand; the settings and their layers (default <
//! file < environment < flag) are the library's (`lockd::config`).
//!
//! `lockd replay` exits 0 when every outcome is the same, 2 when some differ
//! (they are listed), 1 on an error.

mod auth;
mod certs;
mod dev;
mod replay;
mod restore;
mod serve;

// The allocator: glibc's malloc took a fifth of a loaded leader's CPU
// (docs/performance.md, "Allocation").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use lockd::config::{layers, ConfigError, ServeSettings};

#[derive(Parser)]
#[command(
    name = "lockd",
    version,
    about = "A Raft-replicated lock service with its lock logic in WebAssembly"
)]
struct Cli {
    /// Log lines as text (for people) or JSON (one object per line, for a
    /// log pipeline).
    #[arg(long, global = true, value_enum, env = "LOCKD_LOG_FORMAT", default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a node (with no flags: a working single-node cluster).
    ///
    /// Every setting also comes from a TOML file (--config) and from its
    /// LOCKD_<NAME> variable; a flag beats the variable, the variable the
    /// file.
    Serve(Box<ServeSettings>),
    /// Run a local cluster of several nodes in one process, for trying it out.
    Dev(dev::DevArgs),
    /// Replay a stopped node's stored log through a module and report every
    /// outcome that differs from the active module's.
    Replay(replay::ReplayArgs),
    /// Make this node's data dir of a NEW cluster from a backup (`lockctl
    /// snapshot save`): run on every node of the new cluster with the same
    /// file and --initial-cluster, then `lockd serve` each.
    Restore(restore::RestoreArgs),
    /// Rebuild a cluster that lost its majority from one survivor's data
    /// dir: the dir becomes a one-node cluster's (the old one is kept
    /// beside it); add new members to it afterwards.
    Recover(restore::RecoverArgs),
    /// Certificates for a cluster with TLS.
    #[command(subcommand)]
    Certs(certs::CertsCmd),
    /// Bearer tokens and auth files.
    #[command(subcommand)]
    Auth(auth::AuthCmd),
}

/// Log to stderr, filtered by RUST_LOG (default: info, openraft's warnings).
fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,openraft=warn".into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        // Fields at the top level, next to level, target and timestamp,
        // as log pipelines index them.
        LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }
}

pub fn main() -> Result<()> {
    let parsed = layers::parse(Cli::command(), std::env::args_os(), |v| std::env::var_os(v));
    let (matches, origins) = match parsed {
        Ok(p) => p,
        // Usage errors, help and version as clap prints them (and exits).
        Err(ConfigError::Cli(e)) => e.exit(),
        Err(e) => return Err(e.into()),
    };
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    init_logs(cli.log_format);
    let runtime = || tokio::runtime::Runtime::new().context("cannot start the async runtime");
    match cli.command {
        Cmd::Serve(s) => {
            let config = s.resolve(&origins)?;
            runtime()?.block_on(serve::run(config))
        }
        Cmd::Dev(a) => runtime()?.block_on(dev::run(a, &origins)),
        Cmd::Replay(a) => replay::run(a),
        Cmd::Restore(a) => restore::restore(a),
        Cmd::Recover(a) => restore::recover(a),
        Cmd::Certs(c) => certs::run(c),
        Cmd::Auth(c) => auth::run(c),
    }
}
