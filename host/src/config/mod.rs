//! Node configuration: the settings, where they come from, and what a node
//! starts with.
//!
//! * [`settings`]: every setting, declared once (flag, TOML key,
//!   environment variable, default, doc), grouped by area.
//! * [`layers`]: where each value comes from: the default, the TOML file
//!   (`--config`), a `LOCKD_<NAME>` environment variable, a flag; each
//!   beats the one before, and a bad value is refused naming its source.
//! * [`NodeConfig`]: what [`crate::node::Node::start`] takes, resolved from
//!   the settings and checked.
//!
//! Secure by default (docs/security.md, "Secure by default"): a node
//! whose address is not a loopback one refuses to start without TLS and
//! an auth file, unless `insecure` is set (and then it warns at every
//! start). On loopback both are optional.

#[cfg(test)]
mod docs;
pub mod layers;
pub mod settings;

use std::collections::BTreeMap;
use std::path::PathBuf;

use thiserror::Error;

pub use layers::{Origins, Source};
use lockd_core::engine::EngineSettings;
pub use settings::ServeSettings;

/// `--addr`'s default.
pub(crate) const DEFAULT_ADDR: &str = "127.0.0.1:7400";
/// `--data-dir`'s default.
pub(crate) const DEFAULT_DATA_DIR: &str = "lockd-data";

/// The node's certificate, its key, and the cluster's CA (which signs
/// every node's and client's certificate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

/// Everything a node needs to start: the settings resolved (members
/// parsed, TLS files together, durations typed). Each field's meaning and
/// default are those of its setting in [`settings`].
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub id: u64,
    /// What peers and clients are told, and `--initial-cluster` lists.
    pub addr: String,
    /// What to bind, when not `addr`.
    pub listen: Option<String>,
    pub data_dir: PathBuf,
    /// Where compiled modules are kept, when not `<data_dir>/module-cache`.
    pub module_cache: Option<PathBuf>,
    /// Empty with `join` set: wait to be added as a learner.
    pub initial_cluster: BTreeMap<u64, String>,
    pub join: bool,
    /// What a new cluster records as its first module.
    pub initial_module: lockd_core::builtin::InitialModule,
    /// Raft's timing, the log and the determinism audit, as set.
    pub raft: settings::Raft,
    /// What callers and peers may ask of the node, as set.
    pub limits: settings::Limits,
    pub conn: crate::transport::limits::ConnLimits,
    pub engine: EngineSettings,
    pub tls: Option<TlsFiles>,
    /// Reloaded on SIGHUP.
    pub auth_file: Option<PathBuf>,
    pub insecure: bool,
    /// Names HTTP requests may be sent to besides IP addresses,
    /// `localhost` and the hosts of `addr` and `listen`
    /// ([`crate::api::hosts`]): lower case, without a trailing dot.
    pub allowed_hosts: Vec<String>,
}

/// The most changes `--watch-history` may keep (each holds a key of up to
/// 1 KiB and its holder's names).
pub(crate) const MAX_WATCH_HISTORY: usize = 1_000_000;

impl Default for NodeConfig {
    /// The settings' defaults (never the environment's values).
    fn default() -> Self {
        settings::defaults::<ServeSettings>()
            .resolve(&Origins::default())
            .expect("the default settings resolve")
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
    #[error("config file {path}: unknown setting `{key}` (the keys are the flags' names with `_` for `-`)")]
    UnknownKey { path: String, key: String },
    #[error("{origin}: {value:?} is not a valid --{flag}: {reason}")]
    BadValue {
        flag: String,
        origin: Source,
        value: String,
        reason: String,
    },
    /// A setting refused after the layers were merged: why, and where its
    /// value came from.
    #[error("{reason} (from {origin})")]
    Refused { origin: Source, reason: String },
    /// The command line itself (clap's error: usage, help, version).
    #[error(transparent)]
    Cli(#[from] clap::Error),
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

impl NodeConfig {
    /// How much the module cache keeps.
    pub fn module_cache_bound(&self) -> lockd_core::engine::CacheBound {
        lockd_core::engine::CacheBound {
            max_entries: self.limits.max_module_cache_entries,
            max_bytes: self.limits.max_module_cache_bytes,
        }
    }

    /// The address to bind.
    pub(crate) fn listen_addr(&self) -> &str {
        self.listen.as_deref().unwrap_or(&self.addr)
    }

    /// The longest an election may take (a node stands after at most
    /// `--election-timeout-ms` and 5/32 of it, and a split vote costs a
    /// retry): what a new leader adds to every lease it inherits, and how
    /// long a request waits for a leader to become known.
    pub(crate) fn election_max_ms(&self) -> u64 {
        self.raft.election_timeout_ms * 3 / 2
    }

    /// openraft's `(election_timeout_min, election_timeout_max)`. Its own
    /// election timer is off (`raft::stand` decides when a node stands);
    /// what is left of them: the min bounds a vote request's time, and the
    /// max is the leader lease, during which a voter refuses the real vote
    /// after its leader's last message. A quarter of the election timeout
    /// (at least two milliseconds over the heartbeat, which openraft's
    /// min must exceed): a voter that knows its leader's process is gone
    /// (its connection closed and its address refusing) grants that soon,
    /// and a voter that does not is held by the pre-vote's rule for the
    /// whole timeout (`raft::prevote`), so the lease guards nothing the
    /// pre-vote does not; it only delays a failover. (It was half the
    /// timeout; a quarter took about 50 ms off a killed leader's
    /// failover, docs/performance.md, "The failover tail".)
    pub fn raft_timeouts(&self) -> (u64, u64) {
        let lease = (self.raft.election_timeout_ms / 4).max(self.raft.heartbeat_ms + 2);
        (lease - 1, lease)
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
        if self.raft.heartbeat_ms == 0
            || self.raft.election_timeout_ms <= self.raft.heartbeat_ms * 2
        {
            return Err(ConfigError::Invalid(format!(
                "election timeout ({} ms) must be more than twice the heartbeat ({} ms)",
                self.raft.election_timeout_ms, self.raft.heartbeat_ms
            )));
        }
        if self.raft.audit_check_ms == 0 {
            return Err(ConfigError::Invalid(
                "audit check period must be above 0 ms".into(),
            ));
        }
        if self.raft.promote_audit_points == 0 {
            return Err(ConfigError::Invalid(
                "promote audit points must be at least 1".into(),
            ));
        }
        if self.limits.max_lease_ms == 0 {
            return Err(ConfigError::Invalid("max lease must be above 0 ms".into()));
        }
        self.check_secure()?;
        if self.limits.max_waiters_per_key == 0
            || self.limits.max_waiters < self.limits.max_waiters_per_key
        {
            return Err(ConfigError::Invalid(format!(
                "max waiters per key ({}) must be above 0 and at most max waiters ({})",
                self.limits.max_waiters_per_key, self.limits.max_waiters
            )));
        }
        if self.limits.max_sessions == 0 || self.limits.max_session_holdings == 0 {
            return Err(ConfigError::Invalid(
                "max sessions and max session holdings must be above 0".into(),
            ));
        }
        if self.limits.watch_history == 0 || self.limits.watch_history > MAX_WATCH_HISTORY {
            return Err(ConfigError::Invalid(format!(
                "watch history ({}) must be from 1 to {MAX_WATCH_HISTORY} changes",
                self.limits.watch_history
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
    pub(crate) fn bootstrap_members(&self) -> Option<BTreeMap<u64, String>> {
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

    #[test]
    fn the_lease_is_a_quarter_timeout_and_always_above_the_heartbeat() {
        let with = |election_timeout_ms, heartbeat_ms| {
            let mut c = NodeConfig::default();
            c.raft.election_timeout_ms = election_timeout_ms;
            c.raft.heartbeat_ms = heartbeat_ms;
            c
        };
        // The defaults: 200 ms and 40 ms.
        assert_eq!(NodeConfig::default().raft_timeouts(), (49, 50));
        assert_eq!(with(1000, 100).raft_timeouts(), (249, 250));
        // The shortest timeout `validate` takes: openraft's min (the vote
        // request's timeout) stays above the heartbeat, below the max.
        for (e, h) in [(81, 40), (100, 40), (3, 1), (201, 100)] {
            let c = with(e, h);
            assert!(c.validate().is_ok(), "{e} {h}");
            let (min, max) = c.raft_timeouts();
            assert!(h < min && min < max && max <= e, "{e} {h}: {min} {max}");
        }
    }
}
