//! Node configuration: flags, an optional TOML file, and defaults.
//!
//! Precedence: a flag beats the file, the file beats the default. The file
//! uses the same names as the flags with `_` for `-`:
//!
//! ```toml
//! id = 2
//! addr = "127.0.0.1:7402"       # both of the next two
//! # listen = "0.0.0.0:7402"     # what to bind
//! # advertise_addr = "10.0.0.2:7402"   # what peers and clients are told
//! data_dir = "d2"
//! initial_cluster = "1=127.0.0.1:7401,2=127.0.0.1:7402,3=127.0.0.1:7403"
//! heartbeat_ms = 40
//! election_timeout_ms = 200
//! snapshot_threshold = 10000
//! tls_cert = "certs/node-2.pem"
//! tls_key = "certs/node-2.key"
//! tls_ca = "certs/ca.pem"
//! auth_file = "auth.toml"
//! ```
//!
//! Secure by default (docs/security.md, "Secure by default"): a node
//! whose address is not a loopback one refuses to start without TLS and
//! an auth file, unless `insecure` is set (and then it warns at every
//! start). On loopback both are optional.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use thiserror::Error;

use lockd_core::engine::EngineSettings;

pub const DEFAULT_ADDR: &str = "127.0.0.1:7400";
pub const DEFAULT_DATA_DIR: &str = "lockd-data";

/// The node's certificate, its key, and the cluster's CA (which signs
/// every node's and client's certificate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

/// Everything a node needs to start.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub id: u64,
    /// The address this node is reached at: what peers and clients are
    /// told (`--advertise-addr`), and what `--initial-cluster` lists.
    pub addr: String,
    /// The address it binds (`--listen`), when not `addr`: `0.0.0.0:7400`
    /// behind NAT or a container's port mapping.
    pub listen: Option<String>,
    pub data_dir: PathBuf,
    /// Members to bootstrap a new cluster with. Ignored once the data dir is
    /// initialised. Empty with `join` set: wait to be added as a learner.
    pub initial_cluster: BTreeMap<u64, String>,
    /// Start uninitialised and wait to be added to an existing cluster.
    pub join: bool,
    /// Leader heartbeat period (default 40 ms).
    pub heartbeat_ms: u64,
    /// Election timeout (default 200 ms); each node picks its timeout in
    /// [this, 1.5 × this). openraft 0.9 lets a follower stand for election
    /// only after the leader's lease (the largest timeout) *plus* its own
    /// timeout have passed without a heartbeat: 500–600 ms with the
    /// defaults, or one more timeout when the first candidate had the
    /// shorter log (it loses, and its term bump costs the other node a
    /// round). Measured: a dead leader replaced and serving in 0.55–0.95 s.
    pub election_timeout_ms: u64,
    /// Build a snapshot after this many entries since the last one, once
    /// the log since then is also as big as the lock state (see
    /// [`crate::raft::snapshot_policy`]).
    pub snapshot_threshold: u64,
    /// Entries kept in the log behind a snapshot (for slow followers).
    pub keep_after_snapshot: u64,
    /// The largest lease a client may ask for.
    pub max_lease_ms: u64,
    /// The longest a client may ask to wait for a lock.
    pub max_wait_ms: u64,
    /// The largest snapshot a peer may send, in bytes.
    pub max_snapshot_bytes: u64,
    /// The largest lock module an upgrade or shadow may carry, in bytes (at
    /// most [`crate::api::body::MAX_MODULE`]).
    pub max_module_bytes: usize,
    /// Callers' requests in the lock service at once.
    pub max_requests: usize,
    /// Connection caps and timeouts.
    pub conn: crate::transport::limits::ConnLimits,
    /// Callers that may wait for one key at once.
    pub max_waiters_per_key: usize,
    /// Callers that may wait on this node at once (for any key, or for a
    /// new leader's table to load).
    pub max_waiters: usize,
    pub segment_bytes: u64,
    /// Record the state hash every this many log indices (0: only at
    /// upgrades and snapshot installs). Equal on every node, so that they
    /// record at the same indices.
    pub audit_interval: u64,
    /// How often the node compares its audit points with its peers' (ms).
    pub audit_check_ms: u64,
    /// The audit points at which a learner of another implementation must
    /// have matched the leader's state hash before `members promote`.
    pub promote_audit_points: u64,
    pub engine: EngineSettings,
    /// Serve TLS only (and speak it to peers), with these files.
    pub tls: Option<TlsFiles>,
    /// Authentication and roles from this file (reloaded on SIGHUP).
    pub auth_file: Option<PathBuf>,
    /// Serve a non-loopback address without TLS or authentication.
    pub insecure: bool,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            id: 1,
            addr: DEFAULT_ADDR.into(),
            listen: None,
            data_dir: DEFAULT_DATA_DIR.into(),
            initial_cluster: BTreeMap::new(),
            join: false,
            heartbeat_ms: 40,
            election_timeout_ms: 200,
            snapshot_threshold: 10_000,
            keep_after_snapshot: 1_000,
            max_lease_ms: 3_600_000,
            max_wait_ms: 600_000,
            max_snapshot_bytes: crate::raft::peer_check::DEFAULT_MAX_SNAPSHOT_BYTES,
            max_module_bytes: crate::api::body::DEFAULT_MAX_MODULE,
            max_requests: 131_072,
            conn: crate::transport::limits::ConnLimits::default(),
            max_waiters_per_key: 1024,
            max_waiters: 65_536,
            segment_bytes: 64 << 20,
            audit_interval: 1000,
            audit_check_ms: 10_000,
            promote_audit_points: 3,
            engine: EngineSettings::default(),
            tls: None,
            auth_file: None,
            insecure: false,
        }
    }
}

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("--initial-cluster: {0:?} is not ID=ADDR")]
    BadMember(String),
    #[error("--initial-cluster: {0:?} is not a node id")]
    BadId(String),
    #[error("--initial-cluster names node {0} twice")]
    DuplicateId(u64),
    #[error("--initial-cluster gives node {id} the address {listed}, but --addr is {addr}")]
    AddrMismatch {
        id: u64,
        listed: String,
        addr: String,
    },
    #[error("cannot read config file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("{addr} is not a loopback address, and {missing}: anyone who can reach it could take and release any lock and replace the lock module. Give --tls-cert, --tls-key, --tls-ca and --auth-file (`lockd certs init` makes the certificates), or --insecure to serve it anyway")]
    Insecure { addr: String, missing: String },
    #[error("{0}")]
    Invalid(String),
}

/// Parse `1=127.0.0.1:7401,2=127.0.0.1:7402`.
pub fn parse_members(s: &str) -> Result<BTreeMap<u64, String>, ConfigError> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) = part
            .split_once('=')
            .ok_or_else(|| ConfigError::BadMember(part.into()))?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| ConfigError::BadId(id.into()))?;
        if addr.trim().is_empty() {
            return Err(ConfigError::BadMember(part.into()));
        }
        if out.insert(id, addr.trim().to_string()).is_some() {
            return Err(ConfigError::DuplicateId(id));
        }
    }
    Ok(out)
}

/// The TOML file: every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub id: Option<u64>,
    pub addr: Option<String>,
    pub listen: Option<String>,
    pub advertise_addr: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub initial_cluster: Option<String>,
    pub join: Option<bool>,
    pub heartbeat_ms: Option<u64>,
    pub election_timeout_ms: Option<u64>,
    pub snapshot_threshold: Option<u64>,
    pub keep_after_snapshot: Option<u64>,
    pub max_lease_ms: Option<u64>,
    pub max_wait_ms: Option<u64>,
    pub max_snapshot_bytes: Option<u64>,
    pub max_module_bytes: Option<usize>,
    pub max_requests: Option<usize>,
    pub max_connections: Option<usize>,
    pub max_connections_per_ip: Option<usize>,
    pub max_handshakes: Option<usize>,
    pub max_handshakes_per_ip: Option<usize>,
    pub max_unauthenticated: Option<usize>,
    pub max_unauthenticated_per_ip: Option<usize>,
    pub unauthenticated_timeout_ms: Option<u64>,
    pub max_in_flight: Option<usize>,
    pub hello_timeout_ms: Option<u64>,
    pub header_timeout_ms: Option<u64>,
    pub idle_timeout_ms: Option<u64>,
    pub max_waiters_per_key: Option<usize>,
    pub max_waiters: Option<usize>,
    pub segment_bytes: Option<u64>,
    pub fuel_per_call: Option<u64>,
    pub fuel_per_state_call: Option<u64>,
    pub memory_limit_bytes: Option<u64>,
    pub audit_interval: Option<u64>,
    pub audit_check_ms: Option<u64>,
    pub promote_audit_points: Option<u64>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
    pub auth_file: Option<PathBuf>,
    pub insecure: Option<bool>,
}

impl FileConfig {
    pub fn load(path: &std::path::Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::File {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    }
}

impl NodeConfig {
    /// The address to bind.
    pub fn listen_addr(&self) -> &str {
        self.listen.as_deref().unwrap_or(&self.addr)
    }

    /// The largest election timeout a node may pick; also openraft's leader
    /// lease, and what a new leader adds to every lease it inherits.
    pub fn election_max_ms(&self) -> u64 {
        self.election_timeout_ms * 3 / 2
    }

    /// Check what a bad flag combination would otherwise turn into a
    /// confusing failure later.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(listed) = self.initial_cluster.get(&self.id) {
            if *listed != self.addr {
                return Err(ConfigError::AddrMismatch {
                    id: self.id,
                    listed: listed.clone(),
                    addr: self.addr.clone(),
                });
            }
        }
        if self.heartbeat_ms == 0 || self.election_timeout_ms <= self.heartbeat_ms * 2 {
            return Err(ConfigError::Invalid(format!(
                "election timeout ({} ms) must be more than twice the heartbeat ({} ms)",
                self.election_timeout_ms, self.heartbeat_ms
            )));
        }
        if self.audit_check_ms == 0 {
            return Err(ConfigError::Invalid(
                "audit check period must be above 0 ms".into(),
            ));
        }
        if self.promote_audit_points == 0 {
            return Err(ConfigError::Invalid(
                "promote audit points must be at least 1".into(),
            ));
        }
        if self.max_lease_ms == 0 {
            return Err(ConfigError::Invalid("max lease must be above 0 ms".into()));
        }
        self.check_secure()?;
        if self.max_waiters_per_key == 0 || self.max_waiters < self.max_waiters_per_key {
            return Err(ConfigError::Invalid(format!(
                "max waiters per key ({}) must be above 0 and at most max waiters ({})",
                self.max_waiters_per_key, self.max_waiters
            )));
        }
        Ok(())
    }

    /// A non-loopback address needs TLS and authentication, or `insecure`.
    fn check_secure(&self) -> Result<(), ConfigError> {
        // What matters is who can reach the socket: the bound address.
        if self.insecure || is_loopback(self.listen_addr()) {
            return Ok(());
        }
        let missing = match (self.tls.is_some(), self.auth_file.is_some()) {
            (true, true) => return Ok(()),
            (false, false) => "neither TLS nor authentication is configured",
            (false, true) => "TLS is not configured",
            (true, false) => "authentication is not configured (no --auth-file)",
        };
        Err(ConfigError::Insecure {
            addr: self.listen_addr().to_string(),
            missing: missing.into(),
        })
    }

    /// The members to bootstrap with: the initial cluster, or this node
    /// alone when none is given (and it is not joining).
    pub fn bootstrap_members(&self) -> Option<BTreeMap<u64, String>> {
        if self.join {
            return None;
        }
        if self.initial_cluster.is_empty() {
            return Some(BTreeMap::from([(self.id, self.addr.clone())]));
        }
        // A node that is not in the initial cluster waits to be added.
        self.initial_cluster
            .contains_key(&self.id)
            .then(|| self.initial_cluster.clone())
    }
}

/// Whether `addr` (`host:port`) can only be reached from this machine: a
/// loopback IP or `localhost`. Any other name may resolve to anything.
pub fn is_loopback(addr: &str) -> bool {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_address_needs_tls_and_authentication_or_insecure() {
        let tls = Some(TlsFiles {
            cert: "c".into(),
            key: "k".into(),
            ca: "a".into(),
        });
        let at = |addr: &str| NodeConfig {
            addr: addr.into(),
            ..NodeConfig::default()
        };
        assert!(at("127.0.0.1:7400").validate().is_ok());
        assert!(at("[::1]:7400").validate().is_ok());
        assert!(at("localhost:7400").validate().is_ok());
        let e = at("0.0.0.0:7400").validate().unwrap_err();
        assert!(
            e.to_string().contains("neither TLS nor authentication"),
            "{e}"
        );
        let e = NodeConfig {
            tls: tls.clone(),
            ..at("10.0.0.1:7400")
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("no --auth-file"), "{e}");
        let secured = NodeConfig {
            tls,
            auth_file: Some("auth.toml".into()),
            ..at("10.0.0.1:7400")
        };
        assert!(secured.validate().is_ok());
        let insecure = NodeConfig {
            insecure: true,
            ..at("lockd-1.internal:7400")
        };
        assert!(insecure.validate().is_ok());
        assert!(!is_loopback("lockd-1.internal:7400"));
    }

    #[test]
    fn members_parse_and_errors_are_precise() {
        let m = parse_members("1=127.0.0.1:7401, 2=127.0.0.1:7402").unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[&2], "127.0.0.1:7402");
        assert!(matches!(
            parse_members("1-127.0.0.1:1"),
            Err(ConfigError::BadMember(_))
        ));
        assert!(matches!(
            parse_members("x=127.0.0.1:1"),
            Err(ConfigError::BadId(_))
        ));
        assert!(matches!(
            parse_members("1=a:1,1=b:2"),
            Err(ConfigError::DuplicateId(1))
        ));
    }
}
