//! `lockd-core`: the deterministic part of lockd — what every replica must
//! compute identically, and nothing else.
//!
//! Every change of lock state is a command in a replicated log. When an
//! entry is committed, every node applies it through [`replica::Replica`]
//! by calling the lock state machine, a WebAssembly component of the
//! `lock-sm` world (`wit/`), under the deterministic [`engine`]. Same bytes,
//! same settings, same entries: bit-identical outcomes and state on every
//! node.
//!
//! This crate has no tokio, no openraft and no network (`cargo tree -p
//! lockd-core` shows it); the host (`lockd`) drives it from its openraft
//! adapters, `lockd replay` and the tests drive it directly. Its one file
//! I/O is the engine's local cache of compiled components.
//!
//! # Layout
//!
//! * [`entry`]: the log entry ([`entry::Request`]) and what applying it
//!   returns, with the Raft identities the replica keeps. A persisted
//!   format, pinned by golden bytes.
//! * [`snapshot`]: the snapshot format (guest state, active module,
//!   replicated settings). Persisted, versioned, pinned.
//! * [`replica`]: the node's replicated state and the one path that
//!   applies committed entries: one batched guest call per range, the
//!   capacity bound, the module swaps.
//! * [`changes`]: what each committed entry changed in the lock table
//!   (the watch's events), derived from commands and outcomes alone.
//! * [`command`]: the replicated lock commands and their outcomes (the types
//!   of the `lock-sm` world, as the host sees them).
//! * [`engine`]: wasmtime under a deterministic configuration: settings and
//!   fingerprint, the compiled-component cache, the typed guest wrapper
//!   that turns traps and fuel exhaustion into errors.
//! * [`builtin`]: the lock module built from `guest-sm/` and embedded; the
//!   module every replica starts from, and the one a new cluster records.
//! * [`upgrade`]: upgrade, shadow and first-module entries, their outcomes,
//!   and the one migration path; [`precompile`] compiles a module when its
//!   entry is appended; [`precheck`] keeps every voter's verdict on a
//!   candidate; [`shadow`] runs a candidate beside the active
//!   module; [`signature`] checks signed modules; [`audit`] keeps the
//!   (index, state hash) points every node records.
//!
//! # Using the engine
//!
//! ```no_run
//! use lockd_core::command::Command;
//! use lockd_core::engine::{EngineSettings, WasmEngine};
//!
//! let engine = WasmEngine::new(EngineSettings::default(), None)?;
//! let module = engine.load(lockd_core::builtin::LOCK_SM)?;
//! let mut guest = engine.instantiate(&module)?;
//! // One entry of one command; a module of either world takes it.
//! let outcomes = guest.apply(&[vec![Command::grant("db-primary", 10_000)]])?;
//! println!("{outcomes:?} state hash {}", hex::encode(guest.state_hash()?));
//! # Ok::<(), lockd_core::engine::EngineError>(())
//! ```

pub mod audit;
pub mod builtin;
pub mod changes;
pub mod command;
pub mod engine;
pub mod entry;
#[cfg(feature = "faults")]
pub mod faults;
pub mod invariants;
pub mod precheck;
pub mod precompile;
pub mod replica;
pub mod shadow;
pub mod signature;
pub mod snapshot;
pub mod upgrade;
pub mod way_back;
