//! Every `lockd` setting, declared once, grouped by area.
//!
//! A field is a setting: its flag is `--` and the field's name with `-`
//! for `_`, its TOML key the field's name, its environment variable
//! `LOCKD_` and the name upper-cased; its default and its doc (the help
//! text, and the row in docs/configuration.md) are beside it. Where the
//! value comes from is [`super::layers`]'s business; turning the areas
//! into a [`NodeConfig`] is [`ServeSettings::resolve`]'s.
//!
//! `lockd serve` takes every area; `lockd dev` the tuning ones
//! ([`Tuning`]); `lockd replay` the engine's ([`Engine`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Command, FromArgMatches};

use super::layers::Origins;
use super::{parse_members, ConfigError, NodeConfig, TlsFiles, DEFAULT_ADDR, DEFAULT_DATA_DIR};
use crate::transport::limits::ConnLimits;
use lockd_core::engine::EngineSettings;

/// Who this node is, and where it is reached.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Identity")]
pub struct Identity {
    /// This node's id (unique in the cluster).
    #[arg(long, env = "LOCKD_ID", default_value_t = 1)]
    pub id: u64,
    /// Shorthand for --listen and --advertise-addr together: the one
    /// address this node serves peers, clients and HTTP on.
    #[arg(long, env = "LOCKD_ADDR", default_value = DEFAULT_ADDR)]
    pub addr: String,
    /// The address to bind (default: the advertise address), e.g.
    /// 0.0.0.0:7400 behind NAT or a container's port mapping.
    #[arg(long, env = "LOCKD_LISTEN")]
    pub listen: Option<String>,
    /// The address peers and clients are told, and --initial-cluster
    /// lists (default: --addr).
    #[arg(long, env = "LOCKD_ADVERTISE_ADDR")]
    pub advertise_addr: Option<String>,
    /// Where the log, snapshots and compiled modules live.
    #[arg(long, env = "LOCKD_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Where compiled lock modules are kept (default: `module-cache` in
    /// the data dir), with their key beside it (`<dir>.key`). Nodes of
    /// one machine and one user may share one: each then compiles a
    /// module only if none of them has (docs/lock-modules.md, "Compiled
    /// modules").
    #[arg(long, env = "LOCKD_MODULE_CACHE")]
    pub module_cache: Option<PathBuf>,
    /// Members of a new cluster, as ID=ADDR,...; ignored once the data dir
    /// is initialised.
    #[arg(long, env = "LOCKD_INITIAL_CLUSTER")]
    pub initial_cluster: Option<String>,
    /// Start uninitialised and wait to be added (`lockctl members add`);
    /// excludes --initial-cluster.
    #[arg(long, env = "LOCKD_JOIN")]
    pub join: bool,
    /// The lock module a new cluster records as its first: world-0.3
    /// (world-0.2's and sessions, reentrant locks, values for elections),
    /// world-0.4 (world-0.3's and its election policy: priorities, sticky
    /// leadership),
    /// world-0.2 (shared locks, semaphores, holders, policy) or world-0.1
    /// (the exclusive locks of the first releases). Ignored by a cluster
    /// that has served anything: it keeps its module.
    #[arg(long, env = "LOCKD_INITIAL_MODULE", value_enum, default_value_t = InitialModuleArg::World03)]
    pub initial_module: InitialModuleArg,
}

/// `--initial-module`'s values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitialModuleArg {
    #[value(name = "world-0.1")]
    World01,
    #[value(name = "world-0.2")]
    World02,
    #[value(name = "world-0.3")]
    World03,
    #[value(name = "world-0.4")]
    World04,
}

impl From<InitialModuleArg> for lockd_core::builtin::InitialModule {
    fn from(a: InitialModuleArg) -> Self {
        match a {
            InitialModuleArg::World01 => lockd_core::builtin::InitialModule::World01,
            InitialModuleArg::World02 => lockd_core::builtin::InitialModule::World02,
            InitialModuleArg::World03 => lockd_core::builtin::InitialModule::World03,
            InitialModuleArg::World04 => lockd_core::builtin::InitialModule::World04,
        }
    }
}

/// Raft's timing, the log and the determinism audit.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Raft and the log")]
pub struct Raft {
    /// Leader heartbeat period, in ms.
    #[arg(long, env = "LOCKD_HEARTBEAT_MS", value_parser = duration_ms, default_value_t = 40)]
    pub heartbeat_ms: u64,
    /// Election timeout, in ms: each node picks its timeout in [this, 1.5 ×
    /// this); must be more than twice the heartbeat.
    #[arg(long, env = "LOCKD_ELECTION_TIMEOUT_MS", value_parser = duration_ms, default_value_t = 200)]
    pub election_timeout_ms: u64,
    /// Build a snapshot after this many log entries since the last one,
    /// once the log since then is as big as the lock state.
    #[arg(long, env = "LOCKD_SNAPSHOT_THRESHOLD", default_value_t = 10_000)]
    pub snapshot_threshold: u64,
    /// Entries kept in the log behind a snapshot, for slow followers.
    #[arg(long, env = "LOCKD_KEEP_AFTER_SNAPSHOT", default_value_t = 1_000)]
    pub keep_after_snapshot: u64,
    /// Log segment size in bytes.
    #[arg(long, env = "LOCKD_SEGMENT_BYTES", default_value_t = 64 << 20)]
    pub segment_bytes: u64,
    /// Record the state hash for the determinism audit every this many log
    /// indices (equal on every node; 0: only at upgrades and snapshot
    /// installs).
    #[arg(long, env = "LOCKD_AUDIT_INTERVAL", default_value_t = 1_000)]
    pub audit_interval: u64,
    /// How often a node compares its audit points with its peers', in ms.
    #[arg(long, env = "LOCKD_AUDIT_CHECK_MS", value_parser = duration_ms, default_value_t = 10_000)]
    pub audit_check_ms: u64,
    /// Audit points at which a learner of another implementation (wasmtime
    /// version or CPU) must have matched the leader's state hash before
    /// `members promote`.
    #[arg(long, env = "LOCKD_PROMOTE_AUDIT_POINTS", default_value_t = 3)]
    pub promote_audit_points: u64,
}

/// What callers and peers may ask of the lock service.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Limits")]
pub struct Limits {
    /// The longest lease a client may ask for, in ms; a longer one is
    /// refused (400).
    #[arg(long, env = "LOCKD_MAX_LEASE_MS", value_parser = duration_ms, default_value_t = 3_600_000)]
    pub max_lease_ms: u64,
    /// The longest a client may ask to wait for a lock, in ms; a longer
    /// wait_ms is refused (400).
    #[arg(long, env = "LOCKD_MAX_WAIT_MS", value_parser = duration_ms, default_value_t = 600_000)]
    pub max_wait_ms: u64,
    /// Callers that may wait for one key at once; one more is refused
    /// (429, Retry-After).
    #[arg(long, env = "LOCKD_MAX_WAITERS_PER_KEY", default_value_t = 1024)]
    pub max_waiters_per_key: usize,
    /// Callers that may wait on a node at once, for any key or for a new
    /// leader's table.
    #[arg(long, env = "LOCKD_MAX_WAITERS", default_value_t = 65_536)]
    pub max_waiters: usize,
    /// Watch streams open on a node at once (HTTP and native); one more
    /// is refused (429, code `too_many_watchers`).
    #[arg(long, env = "LOCKD_MAX_WATCHERS", default_value_t = 1024)]
    pub max_watchers: usize,
    /// Changes a node keeps for watchers to resume from (and read behind
    /// the newest); a watcher further behind is cut, and a resume from an
    /// older index answered `compacted` (410).
    #[arg(long, env = "LOCKD_WATCH_HISTORY", default_value_t = 10_000)]
    pub watch_history: usize,
    /// Callers' requests in the lock service at once, waiting or not;
    /// past it, 503 with Retry-After.
    #[arg(long, env = "LOCKD_MAX_REQUESTS", default_value_t = 131_072)]
    pub max_requests: usize,
    /// Live sessions one principal may have (all clients together when
    /// authentication is off); one more is refused (403, code `refused`).
    #[arg(long, env = "LOCKD_MAX_SESSIONS", default_value_t = 4096)]
    pub max_sessions: u32,
    /// Holdings one session may have; one more is refused (403, code
    /// `refused`).
    #[arg(long, env = "LOCKD_MAX_SESSION_HOLDINGS", default_value_t = 1024)]
    pub max_session_holdings: u32,
    /// The largest snapshot a peer may send, in bytes; a chunk past it, or
    /// not continuing the bytes received, is refused.
    #[arg(long, env = "LOCKD_MAX_SNAPSHOT_BYTES",
          default_value_t = crate::raft::peer_check::DEFAULT_MAX_SNAPSHOT_BYTES)]
    pub max_snapshot_bytes: u64,
    /// The largest lock module an upgrade or shadow may carry, in bytes (at
    /// most 32 MiB); a bigger one is refused with 413. Also the largest
    /// this node runs: it refuses a bigger one at the quorum pre-check,
    /// and stops before a swap to one.
    #[arg(long, env = "LOCKD_MAX_MODULE_BYTES",
          default_value_t = crate::api::body::DEFAULT_MAX_MODULE)]
    pub max_module_bytes: usize,
}

// The connection defaults are `ConnLimits`'s own, so that a node built
// without flags (tests, `NodeConfig::default`) and `lockd serve` agree.
fn conn() -> ConnLimits {
    ConnLimits::default()
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Every `*_ms` setting: a duration (`1m30s`, `1.5s`) or, as always, a
/// number of milliseconds; the one parser of durations
/// ([`lockd_proto::duration`]), whether from a flag, the environment or
/// the config file.
fn duration_ms(s: &str) -> Result<u64, String> {
    lockd_proto::duration::parse_ms(s)
}

/// How many connections a node keeps in each phase, and for how long
/// (docs/security.md, "Connection slots").
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Connections")]
pub struct Connections {
    /// Client connections (HTTP and native) served at once; past it HTTP
    /// gets 503 with Retry-After, a native client a refused hello. Peers
    /// take no place in it.
    #[arg(long, env = "LOCKD_MAX_CONNECTIONS", default_value_t = conn().max_connections)]
    pub max_connections: usize,
    /// The same, from one IPv4 address or IPv6 /64.
    #[arg(long, env = "LOCKD_MAX_CONNECTIONS_PER_IP",
          default_value_t = conn().max_connections_per_ip)]
    pub max_connections_per_ip: usize,
    /// Connections that have not yet said what they are (first bytes, TLS
    /// handshake, hello) at once; past it a new connection is closed at
    /// accept, before a byte is read.
    #[arg(long, env = "LOCKD_MAX_HANDSHAKES", default_value_t = conn().max_handshakes)]
    pub max_handshakes: usize,
    /// The same, from one IPv4 address or IPv6 /64.
    #[arg(long, env = "LOCKD_MAX_HANDSHAKES_PER_IP",
          default_value_t = conn().max_handshakes_per_ip)]
    pub max_handshakes_per_ip: usize,
    /// With authentication on: client connections that have presented no
    /// valid credential, at once; past it, refused as past
    /// --max-connections.
    #[arg(long, env = "LOCKD_MAX_UNAUTHENTICATED",
          default_value_t = conn().max_unauthenticated)]
    pub max_unauthenticated: usize,
    /// The same, from one IPv4 address or IPv6 /64.
    #[arg(long, env = "LOCKD_MAX_UNAUTHENTICATED_PER_IP",
          default_value_t = conn().max_unauthenticated_per_ip)]
    pub max_unauthenticated_per_ip: usize,
    /// With authentication on: a client connection that has presented no
    /// valid credential is closed this long after accept, in ms.
    #[arg(long, env = "LOCKD_UNAUTHENTICATED_TIMEOUT_MS", value_parser = duration_ms,
          default_value_t = ms(conn().unauthenticated_timeout))]
    pub unauthenticated_timeout_ms: u64,
    /// Requests one native client connection may have in flight (at least
    /// 1); past it the node stops reading that connection until one ends.
    #[arg(long, env = "LOCKD_MAX_IN_FLIGHT", default_value_t = conn().max_in_flight)]
    pub max_in_flight: usize,
    /// Time a new connection has to send its first bytes and its hello, in
    /// ms.
    #[arg(long, env = "LOCKD_HELLO_TIMEOUT_MS", value_parser = duration_ms, default_value_t = ms(conn().hello_timeout))]
    pub hello_timeout_ms: u64,
    /// Time an HTTP client has to send a request's headers, and the most a
    /// kept-alive HTTP connection waits for its next request, in ms.
    #[arg(long, env = "LOCKD_HEADER_TIMEOUT_MS", value_parser = duration_ms, default_value_t = ms(conn().header_timeout))]
    pub header_timeout_ms: u64,
    /// A native client connection with nothing in flight is closed after
    /// this long without a frame, in ms.
    #[arg(long, env = "LOCKD_IDLE_TIMEOUT_MS", value_parser = duration_ms, default_value_t = ms(conn().idle_timeout))]
    pub idle_timeout_ms: u64,
}

// The engine defaults are `EngineSettings`'s own (the engine fingerprint
// is made of them).
fn engine() -> EngineSettings {
    EngineSettings::default()
}

/// The guest's budgets: part of the engine fingerprint, so equal on every
/// node (and given to `lockd replay` as the cluster runs them).
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Engine")]
pub struct Engine {
    /// Fuel per guest call (part of the engine fingerprint: equal on every
    /// node).
    #[arg(long, env = "LOCKD_FUEL_PER_CALL", default_value_t = engine().fuel_per_call)]
    pub fuel_per_call: u64,
    /// Fuel per call that moves the whole state: snapshot, restore,
    /// migration (part of the engine fingerprint).
    #[arg(long, env = "LOCKD_FUEL_PER_STATE_CALL",
          default_value_t = engine().fuel_per_state_call)]
    pub fuel_per_state_call: u64,
    /// Guest memory in bytes, all memories of an instance together (part
    /// of the engine fingerprint).
    #[arg(long, env = "LOCKD_MEMORY_LIMIT_BYTES",
          default_value_t = engine().memory_limit_bytes)]
    pub memory_limit_bytes: u64,
}

impl Engine {
    /// The engine's settings: these budgets, the rest fixed.
    pub fn settings(&self) -> EngineSettings {
        EngineSettings {
            fuel_per_call: self.fuel_per_call,
            fuel_per_state_call: self.fuel_per_state_call,
            memory_limit_bytes: self.memory_limit_bytes,
            ..engine()
        }
    }
}

/// TLS and authentication.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Security")]
pub struct Security {
    /// This node's certificate (PEM): with --tls-key and --tls-ca, every
    /// connection to the node, and from it to its peers, is TLS.
    #[arg(long, env = "LOCKD_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, env = "LOCKD_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// The cluster's CA certificate (PEM): peers' and clients'
    /// certificates must be signed by it.
    #[arg(long, env = "LOCKD_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Principals, tokens (hashed) and roles: authentication is on, and
    /// everything not granted is refused. Read again on SIGHUP.
    #[arg(long, env = "LOCKD_AUTH_FILE")]
    pub auth_file: Option<PathBuf>,
    /// Serve a non-loopback address without TLS or authentication (warns
    /// at every start).
    #[arg(long, env = "LOCKD_INSECURE")]
    pub insecure: bool,
}

/// Every area but who the node is and how it is secured: what `lockd dev`
/// gives all its nodes alike.
#[derive(Args, Clone, Debug)]
pub struct Tuning {
    #[command(flatten)]
    pub raft: Raft,
    #[command(flatten)]
    pub limits: Limits,
    #[command(flatten)]
    pub connections: Connections,
    #[command(flatten)]
    pub engine: Engine,
}

/// `lockd serve`'s settings.
#[derive(Args, Clone, Debug)]
pub struct ServeSettings {
    /// A TOML file with any of these settings, each under its TOML key;
    /// the environment and flags beat it.
    #[arg(long, env = "LOCKD_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub identity: Identity,
    #[command(flatten)]
    pub tuning: Tuning,
    #[command(flatten)]
    pub security: Security,
}

/// An area's (or a command's) settings at their defaults, whatever the
/// environment holds.
pub fn defaults<T: Args + FromArgMatches>() -> T {
    let cmd = super::layers::without_env(T::augment_args(Command::new("defaults")));
    let matches = cmd
        .try_get_matches_from(["defaults"])
        .expect("every setting has a default or none");
    T::from_arg_matches(&matches).expect("the defaults parse")
}

impl Tuning {
    /// A node on the defaults' identity (id 1, the default address and
    /// data dir) with these settings.
    pub fn node_config(&self, origins: &Origins) -> Result<NodeConfig, ConfigError> {
        let Tuning {
            raft,
            limits,
            connections: c,
            engine,
        } = self;
        if limits.max_module_bytes > crate::api::body::MAX_MODULE {
            return Err(ConfigError::Refused {
                origin: origins.of("max_module_bytes"),
                reason: format!(
                    "--max-module-bytes {} is above the ceiling of {} bytes",
                    limits.max_module_bytes,
                    crate::api::body::MAX_MODULE
                ),
            });
        }
        let ms = Duration::from_millis;
        Ok(NodeConfig {
            id: 1,
            addr: DEFAULT_ADDR.into(),
            listen: None,
            data_dir: DEFAULT_DATA_DIR.into(),
            module_cache: None,
            initial_cluster: BTreeMap::new(),
            join: false,
            initial_module: Default::default(),
            heartbeat_ms: raft.heartbeat_ms,
            election_timeout_ms: raft.election_timeout_ms,
            snapshot_threshold: raft.snapshot_threshold,
            keep_after_snapshot: raft.keep_after_snapshot,
            segment_bytes: raft.segment_bytes,
            audit_interval: raft.audit_interval,
            audit_check_ms: raft.audit_check_ms,
            promote_audit_points: raft.promote_audit_points,
            max_lease_ms: limits.max_lease_ms,
            max_wait_ms: limits.max_wait_ms,
            max_waiters_per_key: limits.max_waiters_per_key,
            max_waiters: limits.max_waiters,
            max_watchers: limits.max_watchers,
            watch_history: limits.watch_history,
            max_requests: limits.max_requests,
            max_sessions: limits.max_sessions,
            max_session_holdings: limits.max_session_holdings,
            max_snapshot_bytes: limits.max_snapshot_bytes,
            max_module_bytes: limits.max_module_bytes,
            conn: ConnLimits {
                max_connections: c.max_connections,
                max_connections_per_ip: c.max_connections_per_ip,
                max_handshakes: c.max_handshakes,
                max_handshakes_per_ip: c.max_handshakes_per_ip,
                max_unauthenticated: c.max_unauthenticated,
                max_unauthenticated_per_ip: c.max_unauthenticated_per_ip,
                unauthenticated_timeout: ms(c.unauthenticated_timeout_ms),
                // No request could ever be read with 0.
                max_in_flight: c.max_in_flight.max(1),
                hello_timeout: ms(c.hello_timeout_ms),
                header_timeout: ms(c.header_timeout_ms),
                idle_timeout: ms(c.idle_timeout_ms),
            },
            engine: engine.settings(),
            tls: None,
            auth_file: None,
            insecure: false,
        })
    }
}

impl ServeSettings {
    /// The node these settings describe; `origins` says where each value
    /// came from, for the shorthand's precedence and for the errors.
    pub fn resolve(self, origins: &Origins) -> Result<NodeConfig, ConfigError> {
        let mut c = self.tuning.node_config(origins)?;
        let Identity {
            id,
            addr,
            listen,
            advertise_addr,
            data_dir,
            module_cache,
            initial_cluster,
            join,
            initial_module,
        } = self.identity;
        // `--addr` is both of the others: a specific setting beats it from
        // the same layer or a higher one, and it beats them from a higher.
        let addr_rank = origins.of("addr").rank();
        c.addr = match advertise_addr {
            Some(a) if origins.of("advertise_addr").rank() >= addr_rank => a,
            _ => addr,
        };
        c.listen = listen.filter(|_| origins.of("listen").rank() >= addr_rank);
        c.id = id;
        c.data_dir = data_dir;
        c.module_cache = module_cache;
        if let Some(m) = initial_cluster {
            c.initial_cluster = parse_members(&m).map_err(|e| ConfigError::Refused {
                origin: origins.of("initial_cluster"),
                reason: e.to_string(),
            })?;
        }
        c.join = join;
        c.initial_module = initial_module.into();
        if c.join && !c.initial_cluster.is_empty() {
            return Err(ConfigError::Invalid(format!(
                "--join and --initial-cluster exclude each other: a joining node is added by the cluster (--join from {}, --initial-cluster from {})",
                origins.of("join"),
                origins.of("initial_cluster")
            )));
        }
        let Security {
            tls_cert,
            tls_key,
            tls_ca,
            auth_file,
            insecure,
        } = self.security;
        c.tls = match (tls_cert, tls_key, tls_ca) {
            (Some(cert), Some(key), Some(ca)) => Some(TlsFiles { cert, key, ca }),
            (None, None, None) => None,
            given => {
                let named = [
                    ("tls_cert", given.0.is_some()),
                    ("tls_key", given.1.is_some()),
                    ("tls_ca", given.2.is_some()),
                ]
                .into_iter()
                .filter(|(_, set)| *set)
                .map(|(id, _)| format!("--{} from {}", id.replace('_', "-"), origins.of(id)))
                .collect::<Vec<_>>()
                .join(", ");
                return Err(ConfigError::Invalid(format!(
                    "--tls-cert, --tls-key and --tls-ca go together: give all three or none (given: {named})"
                )));
            }
        };
        c.auth_file = auth_file;
        c.insecure = insecure;
        Ok(c)
    }
}
