//! `lockd`: a node of the lock service.
//!
//! ```text
//! lockd serve                                  # embedded default: one node, 127.0.0.1:7400, ./lockd-data
//! lockd serve --id 2 --addr 127.0.0.1:7402 --data-dir d2 \
//!       --initial-cluster 1=127.0.0.1:7401,2=127.0.0.1:7402,3=127.0.0.1:7403
//! lockd serve --id 4 --addr 127.0.0.1:7404 --data-dir d4 --join   # wait to be added
//! lockd serve --listen 0.0.0.0:7400 --advertise-addr 10.0.0.1:7400 …   # bind one, tell peers another
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
//! SIGHUP makes a serving node read its auth file again.
//!
//! `lockd replay` exits 0 when every outcome is the same, 2 when some differ
//! (they are listed), 1 on an error.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use lockd::config::{parse_members, FileConfig, NodeConfig};
use lockd::node::Node;

#[derive(Parser)]
#[command(
    name = "lockd",
    version,
    about = "A Raft-replicated lock service with its lock logic in WebAssembly"
)]
struct Cli {
    /// Log lines as text (for people) or JSON (one object per line, for a
    /// log pipeline). Also LOCKD_LOG_FORMAT.
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
    Serve(Box<ServeArgs>),
    /// Run a local cluster of several nodes in one process, for trying it out.
    Dev(DevArgs),
    /// Replay a stopped node's stored log through a module and report every
    /// outcome that differs from the active module's.
    Replay(ReplayArgs),
    /// Make this node's data dir of a NEW cluster from a backup (`lockctl
    /// snapshot save`): run on every node of the new cluster with the same
    /// file and --initial-cluster, then `lockd serve` each.
    Restore(RestoreArgs),
    /// Rebuild a cluster that lost its majority from one survivor's data
    /// dir: the dir becomes a one-node cluster's (the old one is kept
    /// beside it); add new members to it afterwards.
    Recover(RecoverArgs),
    /// Certificates for a cluster with TLS.
    #[command(subcommand)]
    Certs(CertsCmd),
    /// Bearer tokens and auth files.
    #[command(subcommand)]
    Auth(AuthCmd),
}

#[derive(Subcommand)]
enum AuthCmd {
    /// Make a new random bearer token for PRINCIPAL: prints the token (give
    /// it to the client) and the entry for the auth file (which keeps only
    /// its hash).
    Token { principal: String },
    /// Read an auth file and say what it grants, or why it is refused.
    Check { file: PathBuf },
}

#[derive(Subcommand)]
enum CertsCmd {
    /// Make a development CA in DIR (ca.pem, ca.key), a certificate for
    /// each node (node-ID.pem, node-ID.key: DNS name node-ID.lockd and its
    /// host) and one for each client (NAME.pem, NAME.key: principal NAME).
    Init {
        dir: PathBuf,
        /// A node as ID=HOST (the IP address or DNS name clients dial);
        /// repeat for each node.
        #[arg(long = "node", required = true)]
        nodes: Vec<lockd::certs::NodeSpec>,
        /// A client principal; repeat for each.
        #[arg(long = "client", default_values_t = ["admin".to_string()])]
        clients: Vec<String>,
        /// Days the certificates are valid.
        #[arg(long, default_value_t = 365)]
        days: i64,
    },
}

#[derive(Args)]
struct RestoreArgs {
    /// The backup file.
    #[arg(long)]
    snapshot: PathBuf,
    /// This node's id in the new cluster.
    #[arg(long)]
    id: u64,
    /// This node's new data dir (absent or empty).
    #[arg(long)]
    data_dir: PathBuf,
    /// Every member of the new cluster, ID=ADDR,…
    #[arg(long)]
    initial_cluster: String,
    /// The module hash the backup must hold as its active module (needed
    /// when it trusts module keys).
    #[arg(long)]
    module: Option<String>,
    /// A module key the backup must trust (64 hex digits), once for each:
    /// a backup that trusts keys is restored only when every one is named.
    #[arg(long = "trusted-module-key")]
    trusted_module_keys: Vec<String>,
    /// Restore a backup that requires no module signature (an older
    /// format, or a cluster that trusted no key).
    #[arg(long)]
    allow_unsigned_backup: bool,
}

#[derive(Args)]
struct RecoverArgs {
    /// Required: the old membership is discarded.
    #[arg(long, required = true)]
    force_new_cluster: bool,
    /// The surviving node's id (it keeps it).
    #[arg(long)]
    id: u64,
    /// The surviving node's data dir (the node must be stopped).
    #[arg(long)]
    data_dir: PathBuf,
    /// The address the node will serve at (its advertise address).
    #[arg(long)]
    addr: String,
}

#[derive(Args)]
struct ReplayArgs {
    /// The node's data dir (the node must be stopped).
    #[arg(long)]
    data_dir: PathBuf,
    /// The candidate component.
    #[arg(long)]
    module: PathBuf,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
    /// Fuel per guest call (use the cluster's value if it is not the default).
    #[arg(long)]
    fuel_per_call: Option<u64>,
    /// Fuel per snapshot, restore or migration call (likewise).
    #[arg(long)]
    fuel_per_state_call: Option<u64>,
    /// Guest memory limit in bytes (likewise).
    #[arg(long)]
    memory_limit_bytes: Option<u64>,
}

#[derive(Args, Default)]
struct ServeArgs {
    /// This node's id (unique in the cluster).
    #[arg(long)]
    id: Option<u64>,
    /// Shorthand for --listen and --advertise-addr together: the one
    /// address this node serves peers, clients and HTTP on.
    #[arg(long)]
    addr: Option<String>,
    /// The address to bind (default: --addr), e.g. 0.0.0.0:7400 behind
    /// NAT or a container's port mapping.
    #[arg(long)]
    listen: Option<String>,
    /// The address peers and clients are told, and --initial-cluster
    /// lists (default: --addr).
    #[arg(long)]
    advertise_addr: Option<String>,
    /// Where the log, snapshots and compiled modules live.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Members of a new cluster, as ID=ADDR,...; ignored once initialised.
    #[arg(long)]
    initial_cluster: Option<String>,
    /// Start uninitialised and wait to be added (`lockctl members add`).
    #[arg(long)]
    join: bool,
    /// A TOML file with any of these settings (flags win).
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long)]
    heartbeat_ms: Option<u64>,
    /// Election timeout; each node picks one in [this, 2 × this).
    #[arg(long)]
    election_timeout_ms: Option<u64>,
    /// Build a snapshot after this many log entries since the last one
    /// (and once the log since then is as big as the lock state).
    #[arg(long)]
    snapshot_threshold: Option<u64>,
    /// Entries kept behind a snapshot for slow followers.
    #[arg(long)]
    keep_after_snapshot: Option<u64>,
    /// The longest lease a client may ask for, in ms.
    #[arg(long)]
    max_lease_ms: Option<u64>,
    /// The longest a client may ask to wait for a lock, in ms (default
    /// 600000); a longer wait_ms is refused (400).
    #[arg(long)]
    max_wait_ms: Option<u64>,
    /// Callers that may wait for one key at once (default 1024); one more
    /// is refused (429, Retry-After).
    #[arg(long)]
    max_waiters_per_key: Option<usize>,
    /// Callers that may wait on a node at once, for any key or for a new
    /// leader's table (default 65536).
    #[arg(long)]
    max_waiters: Option<usize>,
    /// The largest snapshot a peer may send, in bytes (default 1.25 GiB);
    /// a chunk past it, or not continuing the bytes received, is refused.
    #[arg(long)]
    max_snapshot_bytes: Option<u64>,
    /// The largest lock module an upgrade or shadow may carry, in bytes
    /// (default 4 MiB, at most 32 MiB); a bigger one is refused with 413.
    #[arg(long)]
    max_module_bytes: Option<usize>,
    /// Client connections (HTTP and native) served at once (default
    /// 4096); past it HTTP gets 503 with Retry-After, a native client a
    /// refused hello. Peers take no place in it.
    #[arg(long)]
    max_connections: Option<usize>,
    /// The same, from one IPv4 address or IPv6 /64 (default 1024).
    #[arg(long)]
    max_connections_per_ip: Option<usize>,
    /// Connections that have not yet said what they are (first bytes, TLS
    /// handshake, hello) at once (default 1024); past it a new connection
    /// is closed at accept, before a byte is read.
    #[arg(long)]
    max_handshakes: Option<usize>,
    /// The same, from one IPv4 address or IPv6 /64 (default 128).
    #[arg(long)]
    max_handshakes_per_ip: Option<usize>,
    /// With authentication on: client connections that have presented no
    /// valid credential, at once (default 128); past it, refused as past
    /// --max-connections.
    #[arg(long)]
    max_unauthenticated: Option<usize>,
    /// The same, from one IPv4 address or IPv6 /64 (default 16).
    #[arg(long)]
    max_unauthenticated_per_ip: Option<usize>,
    /// With authentication on: a client connection that has presented no
    /// valid credential is closed after this long (default 10000).
    #[arg(long)]
    unauthenticated_timeout_ms: Option<u64>,
    /// Requests one native client connection may have in flight (default
    /// 1024); past it the node stops reading that connection until one ends.
    #[arg(long)]
    max_in_flight: Option<usize>,
    /// Callers' requests in the lock service at once, waiting or not
    /// (default 131072); past it, 503 with Retry-After.
    #[arg(long)]
    max_requests: Option<usize>,
    /// Time a new connection has to send its first bytes and its hello
    /// (default 5000).
    #[arg(long)]
    hello_timeout_ms: Option<u64>,
    /// Time an HTTP client has to send a request's headers, and the most a
    /// kept-alive HTTP connection waits for its next request (default 30000).
    #[arg(long)]
    header_timeout_ms: Option<u64>,
    /// A native client connection with nothing in flight is closed after
    /// this long without a frame (default 600000).
    #[arg(long)]
    idle_timeout_ms: Option<u64>,
    /// Log segment size in bytes.
    #[arg(long)]
    segment_bytes: Option<u64>,
    /// Fuel per guest call (part of the engine fingerprint: equal on every node).
    #[arg(long)]
    fuel_per_call: Option<u64>,
    /// Fuel per call that moves the whole state: snapshot, restore,
    /// migration (part of the engine fingerprint).
    #[arg(long)]
    fuel_per_state_call: Option<u64>,
    /// Guest memory limit in bytes (part of the engine fingerprint).
    #[arg(long)]
    memory_limit_bytes: Option<u64>,
    /// Record the state hash for the determinism audit every this many log
    /// indices (same on every node; 0: only at upgrades).
    #[arg(long)]
    audit_interval: Option<u64>,
    /// How often to compare audit points with the peers, in ms.
    #[arg(long)]
    audit_check_ms: Option<u64>,
    /// A learner of another implementation (wasmtime version or CPU) is
    /// promoted only after matching the leader's state hash at this many
    /// audit points (default 3).
    #[arg(long)]
    promote_audit_points: Option<u64>,
    /// This node's certificate (PEM): with --tls-key and --tls-ca, every
    /// connection to the node, and from it to its peers, is TLS.
    #[arg(long)]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long)]
    tls_key: Option<PathBuf>,
    /// The cluster's CA certificate (PEM): peers' and clients'
    /// certificates must be signed by it.
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// Principals, tokens (hashed) and roles: authentication is on, and
    /// everything not granted is refused. Read again on SIGHUP.
    #[arg(long)]
    auth_file: Option<PathBuf>,
    /// Serve a non-loopback address without TLS or authentication (warns
    /// at every start).
    #[arg(long)]
    insecure: bool,
}

#[derive(Args)]
struct DevArgs {
    #[arg(long, default_value_t = 3)]
    nodes: u64,
    /// Node i listens on 127.0.0.1:(base_port + i).
    #[arg(long, default_value_t = 7400)]
    base_port: u16,
    #[arg(long, default_value = "lockd-dev")]
    data_dir: PathBuf,
}

fn node_config(a: ServeArgs) -> Result<NodeConfig> {
    let file = match &a.config {
        Some(p) => FileConfig::load(p)?,
        None => FileConfig::default(),
    };
    let mut c = NodeConfig::default();
    // `set!(flag)`: the flag, else the file's key, into the same field;
    // `set!(flag => place.field[, convert])` for a field elsewhere.
    macro_rules! set {
        ($field:ident) => {
            set!($field => $field)
        };
        ($field:ident => $($place:ident).+) => {
            set!($field => $($place).+, std::convert::identity)
        };
        ($field:ident => $($place:ident).+, $convert:expr) => {
            if let Some(v) = a.$field.or(file.$field) {
                c.$($place).+ = $convert(v);
            }
        };
    }
    set!(id);
    // A flag beats the file; within each, the specific setting beats the
    // shorthand (`--addr` is both).
    let flag_addr = a.addr.is_some();
    set!(addr);
    if let Some(v) = a.advertise_addr {
        c.addr = v;
    } else if let (false, Some(v)) = (flag_addr, file.advertise_addr) {
        c.addr = v;
    }
    c.listen = match (a.listen, flag_addr) {
        (Some(v), _) => Some(v),
        (None, true) => None,
        (None, false) => file.listen,
    };
    set!(data_dir);
    set!(heartbeat_ms);
    set!(election_timeout_ms);
    set!(snapshot_threshold);
    set!(keep_after_snapshot);
    set!(max_lease_ms);
    set!(max_wait_ms);
    set!(max_waiters_per_key);
    set!(max_waiters);
    set!(max_snapshot_bytes);
    set!(max_module_bytes);
    set!(max_requests);
    let ms = std::time::Duration::from_millis;
    set!(max_connections => conn.max_connections);
    set!(max_connections_per_ip => conn.max_connections_per_ip);
    set!(max_handshakes => conn.max_handshakes);
    set!(max_handshakes_per_ip => conn.max_handshakes_per_ip);
    set!(max_unauthenticated => conn.max_unauthenticated);
    set!(max_unauthenticated_per_ip => conn.max_unauthenticated_per_ip);
    set!(unauthenticated_timeout_ms => conn.unauthenticated_timeout, ms);
    let at_least_one = |v: usize| v.max(1);
    set!(max_in_flight => conn.max_in_flight, at_least_one);
    set!(hello_timeout_ms => conn.hello_timeout, ms);
    set!(header_timeout_ms => conn.header_timeout, ms);
    set!(idle_timeout_ms => conn.idle_timeout, ms);
    if c.max_module_bytes > lockd::api::body::MAX_MODULE {
        anyhow::bail!(
            "--max-module-bytes {} is above the ceiling of {} bytes",
            c.max_module_bytes,
            lockd::api::body::MAX_MODULE
        );
    }
    set!(segment_bytes);
    set!(audit_interval);
    set!(audit_check_ms);
    set!(promote_audit_points);
    set!(fuel_per_call => engine.fuel_per_call);
    set!(fuel_per_state_call => engine.fuel_per_state_call);
    set!(memory_limit_bytes => engine.memory_limit_bytes);
    set!(auth_file => auth_file, Some);
    let tls = (
        a.tls_cert.or(file.tls_cert),
        a.tls_key.or(file.tls_key),
        a.tls_ca.or(file.tls_ca),
    );
    c.tls = match tls {
        (Some(cert), Some(key), Some(ca)) => Some(lockd::config::TlsFiles { cert, key, ca }),
        (None, None, None) => None,
        _ => bail!("--tls-cert, --tls-key and --tls-ca go together: give all three or none"),
    };
    c.insecure = a.insecure || file.insecure.unwrap_or(false);
    if let Some(m) = a.initial_cluster.or(file.initial_cluster) {
        c.initial_cluster = parse_members(&m)?;
    }
    c.join = a.join || file.join.unwrap_or(false);
    if c.join && !c.initial_cluster.is_empty() {
        bail!("--join and --initial-cluster exclude each other: a joining node is added by the cluster");
    }
    Ok(c)
}

async fn serve(args: ServeArgs) -> Result<()> {
    let config = node_config(args)?;
    if config.insecure {
        tracing::warn!(
            addr = %config.addr,
            tls = config.tls.is_some(),
            auth = config.auth_file.is_some(),
            "--insecure: this node may serve without TLS or authentication; anyone who can reach it may take and release any lock and replace the lock module"
        );
    }
    let node = Node::start(config).await.context("cannot start the node")?;
    let reload = reload_on_sighup(node.clone());
    let failed = tokio::select! {
        _ = lockd::shutdown::signal() => {
            tracing::info!("shutting down");
            None
        }
        _ = node.stopped() => None,
        why = node.failed() => Some(why),
    };
    reload.abort();
    node.shutdown().await;
    match failed {
        // Not half alive: exit non-zero so a supervisor restarts the node,
        // which recovers from its log.
        Some(why) => {
            tracing::error!(error = %why, "raft stopped; exiting");
            bail!("raft stopped: {why}")
        }
        None => Ok(()),
    }
}

/// Read the auth file again at every SIGHUP; a file that does not parse
/// leaves the rules in force.
fn reload_on_sighup(node: std::sync::Arc<Node>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP; the auth file is read at start only");
            return;
        };
        while hup.recv().await.is_some() {
            match node.services.auth.reload() {
                Ok(n) if node.services.auth.is_on() => {
                    tracing::info!(principals = n, "SIGHUP: auth file read again")
                }
                Ok(_) => tracing::info!("SIGHUP: no auth file to read (authentication is off)"),
                Err(e) => {
                    tracing::error!(error = %e, "SIGHUP: the auth file is refused; the rules in force stay")
                }
            }
        }
    })
}

async fn dev(args: DevArgs) -> Result<()> {
    if args.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    let members: Vec<(u64, String)> = (1..=args.nodes)
        .map(|i| (i, format!("127.0.0.1:{}", u64::from(args.base_port) + i)))
        .collect();
    let cluster = members
        .iter()
        .map(|(i, a)| format!("{i}={a}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut nodes = Vec::new();
    for (id, addr) in &members {
        let mut c = NodeConfig {
            id: *id,
            addr: addr.clone(),
            ..NodeConfig::default()
        };
        c.data_dir = args.data_dir.join(format!("n{id}"));
        c.initial_cluster = parse_members(&cluster)?;
        nodes.push(
            Node::start(c)
                .await
                .with_context(|| format!("cannot start node {id}"))?,
        );
    }
    let endpoints = members
        .iter()
        .map(|(_, a)| a.as_str())
        .collect::<Vec<_>>()
        .join(",");
    println!(
        "lockd dev: {} nodes serving; try\n  lockctl --endpoints {endpoints} status",
        args.nodes
    );
    lockd::shutdown::signal().await;
    for n in nodes {
        n.shutdown().await;
    }
    Ok(())
}

fn replay(a: ReplayArgs) -> Result<()> {
    let module = std::fs::read(&a.module)
        .with_context(|| format!("cannot read module {}", a.module.display()))?;
    let mut settings = lockd_core::engine::EngineSettings::default();
    if let Some(v) = a.fuel_per_call {
        settings.fuel_per_call = v;
    }
    if let Some(v) = a.fuel_per_state_call {
        settings.fuel_per_state_call = v;
    }
    if let Some(v) = a.memory_limit_bytes {
        settings.memory_limit_bytes = v;
    }
    let engine = std::sync::Arc::new(lockd_core::engine::WasmEngine::new(settings, None)?);
    let r =
        lockd::upgrade::replay::replay(&engine, &a.data_dir, &module, lockd_core::builtin::LOCK_SM)
            .with_context(|| format!("cannot replay {}", a.data_dir.display()))?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "replayed entries {}..={} ({} entries, {} commands, {} upgrade entries) after the snapshot at {}",
            r.from_index + 1,
            r.to_index,
            r.entries,
            r.commands,
            r.upgrades,
            r.from_index
        );
        println!("active module    {}", r.active_module);
        println!(
            "candidate module {} ({})",
            r.candidate_module, r.candidate_version
        );
        for d in &r.differences {
            println!(
                "index {}: {}: active {}, candidate {}",
                d.index, d.command, d.active, d.candidate
            );
        }
        if let Some(f) = &r.candidate_failed {
            println!("the candidate failed {f}; nothing after it was compared");
        }
        println!(
            "{} outcome(s) differ; final state hashes {}",
            r.differences.len(),
            if r.candidate_state_hash.as_deref() == Some(r.active_state_hash.as_str()) {
                "equal"
            } else {
                "differ"
            }
        );
    }
    if !r.differences.is_empty() || r.candidate_failed.is_some() {
        std::process::exit(2);
    }
    Ok(())
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
    let cli = Cli::parse();
    init_logs(cli.log_format);
    let runtime = || tokio::runtime::Runtime::new().context("cannot start the async runtime");
    match cli.command {
        Cmd::Serve(a) => runtime()?.block_on(serve(*a)),
        Cmd::Dev(a) => runtime()?.block_on(dev(a)),
        Cmd::Replay(a) => replay(a),
        Cmd::Restore(a) => restore(a),
        Cmd::Recover(a) => recover(a),
        Cmd::Certs(c) => certs(c),
        Cmd::Auth(c) => auth(c),
    }
}

/// The engine under the default settings (the cluster's, unless it was
/// started with other fuel or memory limits), with no compiled-module cache.
fn default_engine() -> Result<std::sync::Arc<lockd_core::engine::WasmEngine>> {
    Ok(std::sync::Arc::new(lockd_core::engine::WasmEngine::new(
        Default::default(),
        None,
    )?))
}

fn restore(a: RestoreArgs) -> Result<()> {
    let members = lockd::config::parse_members(&a.initial_cluster)?;
    let bytes = std::fs::read(&a.snapshot)
        .with_context(|| format!("cannot read {}", a.snapshot.display()))?;
    let blob = lockd::restore::decode(&bytes)
        .with_context(|| format!("{} is refused", a.snapshot.display()))?;
    let vouched = lockd::restore::Vouched {
        module: a
            .module
            .as_deref()
            .map(|m| {
                lockd_core::engine::ModuleHash::parse(m).ok_or_else(|| {
                    anyhow::anyhow!("--module {m:?} is not a module hash (64 hex digits)")
                })
            })
            .transpose()?,
        keys: a
            .trusted_module_keys
            .iter()
            .map(|k| {
                lockd_core::signature::ModuleKey::parse(k)
                    .with_context(|| format!("--trusted-module-key {k:?}"))
            })
            .collect::<Result<_>>()?,
        allow_unsigned: a.allow_unsigned_backup,
    };
    lockd::restore::check_vouched(&blob, &vouched)
        .with_context(|| format!("{} is refused", a.snapshot.display()))?;
    let engine = default_engine()?;
    // The same for every node restored from this file with these members.
    let cluster = lockd::cluster_id::ClusterId::at_restore(&bytes, &members);
    let r = lockd::restore::write_node(&engine, &a.data_dir, a.id, blob, &members, &cluster)
        .with_context(|| format!("cannot restore into {}", a.data_dir.display()))?;
    report_restored(a.id, &a.data_dir, &members, &cluster, &r);
    Ok(())
}

fn recover(a: RecoverArgs) -> Result<()> {
    let engine = default_engine()?;
    let blob = lockd::restore::survivor_state(&engine, &a.data_dir, lockd_core::builtin::LOCK_SM)
        .with_context(|| {
        format!(
            "cannot read the survivor's state in {}",
            a.data_dir.display()
        )
    })?;
    // The old data dir is kept beside the new one, never deleted.
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut kept = a.data_dir.clone().into_os_string();
    kept.push(format!(".before-recover-{stamp}"));
    let kept = PathBuf::from(kept);
    std::fs::rename(&a.data_dir, &kept).with_context(|| {
        format!(
            "cannot move {} aside to {}",
            a.data_dir.display(),
            kept.display()
        )
    })?;
    let members = std::collections::BTreeMap::from([(a.id, a.addr.clone())]);
    let cluster = lockd::cluster_id::ClusterId::random()?;
    let r = lockd::restore::write_node(&engine, &a.data_dir, a.id, blob, &members, &cluster)
        .with_context(|| {
            format!(
                "cannot write the new data dir {} (the old one is {})",
                a.data_dir.display(),
                kept.display()
            )
        })?;
    println!("the old data dir is kept at {}", kept.display());
    report_restored(a.id, &a.data_dir, &members, &cluster, &r);
    Ok(())
}

fn report_restored(
    id: u64,
    dir: &std::path::Path,
    members: &std::collections::BTreeMap<u64, String>,
    cluster: &lockd::cluster_id::ClusterId,
    r: &lockd::restore::Restored,
) {
    println!(
        "node {id} of the new cluster {cluster} in {}: the state at index {} (module {}, {} holdings, state hash {}); tokens continue from {} (they were at {})",
        dir.display(),
        r.index,
        r.module_hash,
        r.locks_held,
        &r.state_hash[..12],
        r.tokens_now,
        r.tokens_were
    );
    let addr = members.get(&id).map(String::as_str).unwrap_or("ADDR");
    println!(
        "start it with: lockd serve --id {id} --addr {addr} --data-dir {}",
        dir.display()
    );
}

fn auth(c: AuthCmd) -> Result<()> {
    match c {
        AuthCmd::Token { principal } => {
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes)
                .map_err(|e| anyhow::anyhow!("the OS's random source failed: {e}"))?;
            let token = format!("lkd_{}", hex::encode(bytes));
            let hash = hex::encode(lockd::auth::rules::token_hash(&token));
            println!("{token}");
            eprintln!(
                "give the token above to {principal}; add to the auth file:\n\n[principals.{}]\nroles = [...]\ntokens = [\"sha256:{hash}\"]",
                toml_key(&principal)
            );
            Ok(())
        }
        AuthCmd::Check { file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let rules = lockd::auth::Rules::parse(&text)
                .with_context(|| format!("{} is refused", file.display()))?;
            println!(
                "{}: {} principals, {} tokens",
                file.display(),
                rules.principals(),
                rules.tokens()
            );
            Ok(())
        }
    }
}

/// `name` as a TOML table key: bare when it can be, quoted otherwise.
fn toml_key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

fn certs(c: CertsCmd) -> Result<()> {
    let CertsCmd::Init {
        dir,
        nodes,
        clients,
        days,
    } = c;
    if days < 1 {
        anyhow::bail!("--days must be at least 1");
    }
    for path in lockd::certs::init(&dir, &nodes, &clients, days)? {
        println!("wrote {}", path.display());
    }
    Ok(())
}
