//! The settings groups of the node's limits, connections and guest
//! budgets ([`super`] declares every setting once; these are three of its
//! groups, kept apart for size).

use std::time::Duration;

use clap::Args;

use super::duration_ms;
use crate::transport::limits::ConnLimits;
use lockd_core::engine::EngineSettings;

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
    /// Watch streams one principal may have open on a node at once (with
    /// authentication on); one more is refused (429, code
    /// `too_many_watchers`).
    #[arg(long, env = "LOCKD_MAX_WATCHERS_PER_PRINCIPAL", default_value_t = 256)]
    pub max_watchers_per_principal: usize,
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
    /// Compiled modules the module cache keeps (with several nodes
    /// sharing one, all of them together); past it, the one used longest
    /// ago is removed.
    #[arg(long, env = "LOCKD_MAX_MODULE_CACHE_ENTRIES", default_value_t = 64)]
    pub max_module_cache_entries: usize,
    /// Bytes the module cache keeps (see the entries); past it, the
    /// compiled modules used longest ago are removed.
    #[arg(long, env = "LOCKD_MAX_MODULE_CACHE_BYTES", default_value_t = 1 << 30)]
    pub max_module_cache_bytes: u64,
}

// The connection defaults are `ConnLimits`'s own, so that a node built
// without flags (tests, `NodeConfig::default`) and `lockd serve` agree.
fn conn() -> ConnLimits {
    ConnLimits::default()
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
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
