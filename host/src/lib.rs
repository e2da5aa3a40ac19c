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
//! * [`command`]: the replicated lock commands and their outcomes (the types
//!   of the `lock-sm` world, as the host sees them).
//! * [`engine`]: wasmtime under a deterministic configuration: the settings
//!   and their fingerprint, the local cache of compiled components, and the
//!   typed guest wrapper that turns traps and fuel exhaustion into errors.
//! * [`builtin`]: the lock state machine component built from `guest-sm/`
//!   and embedded in the binary; the module a new cluster starts with.
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
//! let outcomes = guest.apply(&[Command::grant("db-primary", 10_000)])?;
//! println!("{outcomes:?} state hash {}", hex::encode(guest.state_hash()?));
//! # Ok::<(), lockd::engine::EngineError>(())
//! ```

pub mod api;
pub mod builtin;
pub mod command;
pub mod config;
pub mod engine;
pub mod log;
pub mod membership;
pub mod node;
pub mod raft;
pub mod service;
pub mod shutdown;
pub mod transport;
