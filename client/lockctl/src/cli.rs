//! The command line: global flags, subcommands and their arguments (clap
//! derive), and the parsing helpers they share.

use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "lockctl",
    version,
    about = "Command line of the lockd lock service"
)]
pub(crate) struct Cli {
    /// Nodes of the cluster (any of them; requests find the leader).
    #[arg(
        long,
        global = true,
        env = "LOCKD_ENDPOINTS",
        value_delimiter = ',',
        default_value = "127.0.0.1:7400"
    )]
    pub(crate) endpoints: Vec<String>,
    /// Machine-readable output.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// The cluster's CA certificate (PEM): speak TLS to the nodes.
    #[arg(long, global = true, env = "LOCKD_CACERT")]
    pub(crate) cacert: Option<std::path::PathBuf>,
    /// A client certificate (PEM) to present; its name is the principal.
    #[arg(long, global = true, env = "LOCKD_CERT", requires = "tls_key")]
    pub(crate) cert: Option<std::path::PathBuf>,
    /// The private key of --cert (PEM).
    #[arg(
        long = "key",
        id = "tls_key",
        global = true,
        env = "LOCKD_KEY",
        requires = "cert"
    )]
    pub(crate) key_file: Option<std::path::PathBuf>,
    /// A bearer token (`lockd auth token` makes one). Given before the
    /// subcommand: after `release` or `keepalive`, `--token` is the
    /// fencing token.
    #[arg(
        long = "token",
        id = "bearer_token",
        env = "LOCKD_TOKEN",
        hide_env_values = true
    )]
    pub(crate) token: Option<String>,
    #[command(subcommand)]
    pub(crate) command: Cmd,
}

#[derive(Subcommand)]
pub(crate) enum Cmd {
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
        /// Holders at once, the same for every holder of the key: 1 (the
        /// default for exclusive) a mutex, N a semaphore of N; shared: at
        /// most N readers (default: as many as the key's readers agreed on,
        /// else 1024 or the prefix policy's max-holders).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        limit: Option<u32>,
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
        /// One key, or several: several are taken in one session (in the
        /// order given), as `--session` does for one.
        #[arg(required = true, num_args = 1..)]
        keys: Vec<String>,
        /// Hold the key(s) in one session of TTL `--lease`: one keepalive
        /// for all, all released in one entry when the session ends.
        #[arg(long)]
        session: bool,
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
        /// As for `acquire`.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        limit: Option<u32>,
        #[arg(long)]
        owner: Option<String>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, num_args = 1..)]
        command: Vec<String>,
    },
    /// Run CMD while leader of election NAME, publishing VALUE: campaign
    /// (wait for the leadership), run CMD with LOCKD_ELECTION and
    /// LOCKD_LEADER_EPOCH (the leadership's fencing token), resign when it
    /// ends; as `lock` when the leadership is lost (status 3). With
    /// `--observe`, print the leader now and at every change instead.
    Elect {
        name: String,
        /// What the leader publishes (an address, say).
        #[arg(default_value = "")]
        value: String,
        /// The leadership's lease, renewed while CMD runs.
        #[arg(long, value_parser = parse_duration, default_value = "10s")]
        ttl: Duration,
        #[arg(long, value_parser = parse_duration, default_value = "10m")]
        wait: Duration,
        #[arg(long, value_parser = parse_duration, default_value = "10s")]
        grace: Duration,
        /// Go before candidates of a lower priority when the leadership
        /// frees (a module of world 0.4 decides; the reference module:
        /// the highest priority, then a leader whose lease just ran out
        /// and who campaigns again, then the oldest).
        #[arg(long, default_value_t = 0, conflicts_with = "observe")]
        priority: u32,
        /// Print the leader (value and epoch) now and at every change,
        /// until Ctrl-C or N changes.
        #[arg(long, conflicts_with = "command")]
        observe: bool,
        #[arg(long, requires = "observe")]
        count: Option<u64>,
        /// The command and its arguments, after `--`.
        #[arg(last = true, num_args = 1..)]
        command: Vec<String>,
    },
    /// Publish VALUE for the holding TOKEN of KEY (an election's leader).
    Proclaim {
        key: String,
        value: String,
        #[arg(long)]
        token: u64,
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
    /// Every grant, release and expiry under PREFIX as it is applied
    /// (docs/watch.md); resumed on another endpoint if a node goes away.
    Watch {
        #[arg(default_value = "")]
        prefix: String,
        /// Start at this log index (default: the next entry applied).
        #[arg(long)]
        from: Option<u64>,
        /// Exit after this many changes.
        #[arg(long)]
        count: Option<u64>,
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
    /// Whether every endpoint is alive (`/healthz`) or, with --ready, ready
    /// to serve (`/readyz`); exit status 1 if any is not (a container
    /// healthcheck: `lockctl --endpoints 127.0.0.1:7400 health --ready`).
    Health {
        #[arg(long)]
        ready: bool,
    },
    /// Print a shell completion script: `lockctl completion bash >
    /// /etc/bash_completion.d/lockctl` (or zsh, fish, elvish, powershell).
    Completion { shell: clap_complete::Shell },
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
        /// Without FILE: return to the module the active one replaced.
        /// With FILE: let it in whatever its version (a swap back to an
        /// older or equal version).
        #[arg(long, conflicts_with_all = ["shadow", "promote", "abort"])]
        rollback: bool,
        /// What the cluster does if this module goes out of service:
        /// `refuse` the kinds of command it keeps failing on (default), or
        /// `rollback` to the module it replaces.
        #[arg(long, value_parser = on_failure, conflicts_with_all = ["shadow", "promote", "abort"])]
        on_failure: Option<lockd_client::proto::OnModuleFailure>,
        /// Enact the module once a majority of voters accepted it at the
        /// pre-check, even if a voter refused it (by default a refusal
        /// blocks it); a voter that cannot run it stops before the swap
        /// until it can.
        #[arg(long, conflicts_with_all = ["shadow", "promote", "abort", "no_precheck"])]
        quorum: bool,
    },
    /// Signed modules: make and use signing keys, and manage the keys the
    /// cluster trusts.
    Module {
        #[command(subcommand)]
        op: crate::module::ModuleOp,
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
        /// Over HTTP/JSON instead of the native protocol: each client its
        /// own kept-alive HTTP connection to the leader.
        #[arg(long)]
        http: bool,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum ModeArg {
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
pub(crate) enum SnapshotOp {
    /// Write the backup to FILE.
    Save { file: std::path::PathBuf },
}

#[derive(Subcommand)]
pub(crate) enum PolicyOp {
    /// Print the rules.
    Get,
    /// Replace the rules with FILE's (`-`: stdin).
    Set { file: std::path::PathBuf },
}

#[derive(Subcommand)]
pub(crate) enum MembersOp {
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
pub(crate) fn acquire_options(
    lease: Duration,
    wait: Duration,
    mode: ModeArg,
    limit: Option<u32>,
    owner: Option<String>,
    request_id: Option<String>,
) -> lockd_client::AcquireOptions {
    lockd_client::AcquireOptions {
        lease,
        wait,
        mode: mode.into(),
        // 0: not given, the server's default for the mode.
        limit: limit.unwrap_or(0),
        owner,
        request_id,
        ..lockd_client::AcquireOptions::exclusive(lease)
    }
}

/// `10s`, `1m30s`, `1.5s`, `500ms`, `1h 30m`, or a bare number of
/// milliseconds ([`lockd_client::proto::duration`]).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    lockd_client::proto::duration::parse(s)
}

/// `--on-failure`, through the one parser of the choice.
fn on_failure(text: &str) -> Result<lockd_client::proto::OnModuleFailure, String> {
    lockd_client::proto::OnModuleFailure::parse(text)
        .ok_or_else(|| format!("{text:?}: expected refuse or rollback"))
}
