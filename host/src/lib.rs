//! `lockd`: a Raft-replicated lock service whose lock logic is a
//! deterministic WebAssembly component.
//!
//! Every change of lock state is a command in a replicated log. When an entry
//! is committed, every node applies it by calling the lock state machine — a
//! WebAssembly component of the `lock-sm` world (`wit/`) — through the
//! deterministic core, [`lockd_core`]: the log entry and snapshot formats,
//! the replica, the engine, upgrades. Because every node runs the same
//! bytes under the same deterministic engine settings, every node computes
//! bit-identical outcomes and state. This crate is everything around it:
//! consensus, storage, the lock service, the API, the wiring.
//!
//! # Layout
//!
//! The path of an acquire, top to bottom:
//!
//! * [`transport`]: the node's one address; the first bytes of a
//!   connection tell TLS from the plaintext protocols, and ALPN (or the
//!   first bytes in the clear) the framed protocol from HTTP.
//! * [`api`]: HTTP/JSON (leader forwarding as one layer, bodies read once,
//!   one error shape), the framed protocol for peers (Raft RPC) and
//!   clients, status and metrics. Handlers reach the node through
//!   [`api::Services`], never through [`node`].
//! * [`auth`]: who a caller is (token, client certificate, member node)
//!   and what its roles allow, for every HTTP route and native request.
//! * [`blocking`]: blocking work off the async workers (inline on a
//!   deterministic simulation's thread).
//! * [`service`]: [`service::LockService`] — request checks, then the
//!   leader's lock actor (waiters, leases, keepalive, handoff, phantom
//!   release) — and the proposer that batches commands into log entries.
//! * [`raft`] ([`lockd_replication`], its own crate): openraft's type
//!   config and the adapters: log store (group commit), the state machine
//!   adapter around the core's I/O-free [`lockd_core::replica::Replica`]
//!   (which applies each committed range with one guest call), the
//!   snapshot file, the peer protocol's calling side and messages, the
//!   pre-vote and hand-over, membership changes ([`membership`]), the
//!   watch history ([`watch`]), the cluster id ([`cluster_id`]) and the
//!   latency histograms ([`telemetry`]).
//! * [`lockd_log`] (its own crate): the on-disk write-ahead log
//!   (segments, CRC32C records, recovery) and atomic small files.
//! * [`lockd_core`] (its own crate): the log entry, the replica, the
//!   engine, the built-in module, the commands.
//! * [`lockd_net`] (its own crate, shared with the client): the socket
//!   seam, TLS, the native protocol's framing, the HTTP/1 client the node
//!   calls its peers with.
//!
//! Beside the request path, [`modules`] is the host's side of lock modules:
//! the leader validates an upgrade or a shadow start and proposes it, a
//! background checker compares the audit points with the peers', and
//! `lockd replay` runs a stored log through a module (the migration, the
//! shadow and the signature checks themselves are the core's).
//!
//! Around them: [`node`] only wires things together and starts them (like
//! mini-redis's `server::run`; nothing imports it back), [`config`] reads
//! every setting once (flag, `LOCKD_*` variable, TOML key; file < env <
//! flag), [`shutdown`] waits for the signal to stop, and [`certs`] (its
//! own crate, `lockd-certs`) makes a development CA and certificates
//! (`lockd certs init`).
//! [`restore`] makes a new cluster's data dirs from a backup or from one
//! survivor (`lockd restore`, `lockd recover --force-new-cluster`).
//! The connection peers call on is [`api`]'s (it shares the node's one
//! address with the front doors); what it answers is
//! [`raft::peer_answer`]'s.

pub mod api;
pub mod auth;
pub mod config;
pub mod node;
pub mod restore;
pub mod shutdown;
pub mod transport;

// The development certificates (`lockd certs init`), their own crate.
pub use lockd_certs as certs;
// The replication crate under the names the node's modules use.
pub use lockd_replication as raft;
pub use lockd_replication::{cluster_id, membership, telemetry, watch};
// The lock service's crate likewise.
pub use lockd_service::{self as service, blocking, modules};
