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
    /// Election timeout, in ms: a node that hears no leader for this long
    /// (plus up to 5/32 more), or half of it once the leader's connection
    /// closed, asks the voters for a pre-vote and stands if a quorum says
    /// yes; more than twice the heartbeat.
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

/// Every `*_ms` setting: a duration (`1m30s`, `1.5s`) or, as always, a
/// number of milliseconds; the one parser of durations
/// ([`lockd_proto::duration`]), whether from a flag, the environment or
/// the config file.
fn duration_ms(s: &str) -> Result<u64, String> {
    lockd_proto::duration::parse_ms(s)
}

mod limits;
pub use limits::{Connections, Engine, Limits};

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
    /// More names HTTP requests may be sent to, comma-separated (e.g.
    /// lockd.example,lockd): a request whose Host names none of the
    /// node's names is refused (421, code `unknown_host`), every request
    /// with authentication off, a browser's that can change state with it
    /// on. Always accepted: IP addresses, localhost, the hosts of
    /// --advertise-addr and --listen (docs/security.md, "Cross-site
    /// requests and the console").
    #[arg(long, env = "LOCKD_ALLOWED_HOSTS", value_parser = host_names)]
    pub allowed_hosts: Option<String>,
}

/// `--allowed-hosts`: refused where it is given (flag, environment, file)
/// unless every entry is a host name.
fn host_names(s: &str) -> Result<String, String> {
    crate::api::hosts::allowed_list(s).map(|_| s.to_string())
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
            raft: raft.clone(),
            limits: limits.clone(),
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
            allowed_hosts: Vec::new(),
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
            allowed_hosts,
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
        if let Some(list) = allowed_hosts {
            c.allowed_hosts =
                crate::api::hosts::allowed_list(&list).map_err(|reason| ConfigError::Refused {
                    origin: origins.of("allowed_hosts"),
                    reason: format!("--allowed-hosts: {reason}"),
                })?;
        }
        Ok(c)
    }
}
