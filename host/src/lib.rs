//! `lockd`: a Raft-replicated lock service whose lock logic is a
//! deterministic WebAssembly component.
//!
//! Every change of lock state is a command in a replicated log. When an entry
//! is committed, every node applies it by calling the lock state machine — a
//! WebAssembly component of the `lock-sm` world (`wit/`) — through
//! [`engine`]. Because every node runs the same bytes under the same
//! deterministic engine settings, every node computes bit-identical outcomes
//! and state.
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
//! * [`service`]: [`service::LockService`] — request checks, then the
//!   leader's lock actor (waiters, leases, keepalive, handoff, phantom
//!   release) — and the proposer that batches commands into log entries.
//! * [`raft`]: openraft's type config and the adapters: log store (group
//!   commit), the I/O-free [`raft::replica::Replica`] that applies each
//!   committed range with one guest call (also used by `lockd replay` and
//!   the tests), the state machine adapter around it, the snapshot file,
//!   network.
//! * [`log`]: the on-disk write-ahead log (segments, CRC32C records,
//!   recovery) and atomic small files.
//! * [`engine`]: wasmtime under a deterministic configuration: settings and
//!   fingerprint, the compiled-component cache, the typed guest wrapper that
//!   turns traps and fuel exhaustion into errors.
//! * [`command`]: the replicated lock commands and their outcomes (the types
//!   of the `lock-sm` world, as the host sees them).
//! * [`builtin`]: the lock state machine component built from `guest-sm/`
//!   and embedded in the binary; the module a new cluster starts with.
//!
//! Beside the request path, [`upgrade`] replaces the lock module through the
//! log (validate on the leader, migrate and swap at apply on every node),
//! runs candidate modules in shadow mode, records and compares state hashes
//! for the determinism audit, and replays a stored log through a module.
//!
//! Around them: [`node`] only wires things together and starts them (like
//! mini-redis's `server::run`; nothing imports it back), [`config`] reads
//! flags and the TOML file, [`membership`] adds, promotes and removes
//! nodes, [`shutdown`] waits for the signal to stop, [`certs`] makes a
//! development CA and certificates (`lockd certs init`), and [`telemetry`]
//! holds the latency histograms each layer records into for `/metrics`.
//! [`restore`] makes a new cluster's data dirs from a backup or from one
//! survivor (`lockd restore`, `lockd recover --force-new-cluster`);
//! [`cluster_id`] gives every cluster an id its peers must share, so an
//! old node never rejoins the cluster that replaced its own.
//!
//! # Using the engine
//!
//! ```no_run
//! use lockd::command::Command;
//! use lockd::engine::{EngineSettings, WasmEngine};
//!
//! let engine = WasmEngine::new(EngineSettings::default(), None)?;
//! let module = engine.load(lockd::builtin::LOCK_SM)?;
//! let mut guest = engine.instantiate(&module)?;
//! // One entry of one command; a module of either world takes it.
//! let outcomes = guest.apply(&[vec![Command::grant("db-primary", 10_000)]])?;
//! println!("{outcomes:?} state hash {}", hex::encode(guest.state_hash()?));
//! # Ok::<(), lockd::engine::EngineError>(())
//! ```

pub mod api;
pub mod auth;
pub mod builtin;
pub mod certs;
pub mod cluster_id;
pub mod command;
pub mod config;
pub mod engine;
pub mod log;
pub mod membership;
pub mod node;
pub mod raft;
pub mod restore;
pub mod service;
pub mod shutdown;
pub mod telemetry;
pub mod transport;
pub mod upgrade;
