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
//! * [`raft`]: openraft's type config and the adapters: log store (group
//!   commit), the state machine adapter around the core's I/O-free
//!   [`lockd_core::replica::Replica`] (which applies each committed range
//!   with one guest call), the snapshot file, network.
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
//! flag), [`membership`] adds, promotes and removes
//! nodes, [`shutdown`] waits for the signal to stop, [`certs`] makes a
//! development CA and certificates (`lockd certs init`), and [`telemetry`]
//! holds the latency histograms each layer records into for `/metrics`.
//! [`restore`] makes a new cluster's data dirs from a backup or from one
//! survivor (`lockd restore`, `lockd recover --force-new-cluster`);
//! [`watch`] keeps what the last applied entries changed, for watchers
//! to follow a prefix and resume from an index;
//! [`cluster_id`] gives every cluster an id its peers must share, so an
//! old node never rejoins the cluster that replaced its own.

pub mod api;
pub mod auth;
pub mod blocking;
pub mod certs;
pub mod cluster_id;
pub mod config;
pub mod membership;
pub mod modules;
pub mod node;
pub mod raft;
pub mod restore;
pub mod service;
pub mod shutdown;
pub mod telemetry;
pub mod transport;
pub mod watch;
