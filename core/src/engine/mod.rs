//! The deterministic WebAssembly engine that runs the lock state machine.
//!
//! Determinism is the point of this module: every node must compute the same
//! outcomes and the same state from the same committed entries. That holds
//! when every node runs the same module bytes, under the same wasmtime
//! version, with the same settings:
//!
//! * every wasm feature is set explicitly ([`settings`]): threads, relaxed
//!   SIMD, multi-memory, memory64, GC, exceptions, stack switching and the
//!   async component model are off; NaN canonicalisation is on, so float
//!   results do not depend on the CPU;
//! * fuel metering (not epochs, which depend on wall time) with a fixed budget
//!   per call: a guest that loops runs out at the same instruction on every
//!   node;
//! * a memory limit enforced by a resource limiter: a guest that grows past it
//!   fails at the same allocation on every node;
//! * no host imports: a component that imports anything is refused at load.
//!
//! Those settings are summarised by an [`EngineFingerprint`]; nodes whose
//! fingerprints differ must not be in one cluster.
//!
//! # Layout
//!
//! * [`settings`]: [`EngineSettings`], the wasmtime `Config` built from them,
//!   and the [`EngineFingerprint`].
//! * [`admit`]: a component's imports and exports, read before any
//!   compile.
//! * [`cache`]: compiled components on local disk, keyed by (module hash,
//!   fingerprint), bounded. Artifacts are only ever produced locally (and
//!   only of admitted modules); a peer's precompiled bytes are never
//!   accepted.
//! * [`guest`]: [`GuestModule`] (a loaded, checked component of any of the
//!   four worlds, [`World`]) and [`GuestInstance`] (its running state).
//! * [`calls`]: the instance's apply calls, and [`queries`] its read-only
//!   and whole-state calls, in world 0.3's types for a module of any world.
//! * [`world02`]: the adapter that runs 0.3 commands on a 0.2 module;
//!   [`world01`]: the one for a 0.1 module.
//! * [`wasm`]: [`WasmEngine`], the engine those settings build.
//! * [`pick`]: `pick`, a 0.4 module's election policy, on a [`Picker`]
//!   instance of its own.
//! * [`bindings`]: the types and calls generated from the four `lock-sm`
//!   worlds.
//! * [`store`]: per-instance store data (the memory limiter).
//! * [`hash`]: [`ModuleHash`], a module's identity.
//! * [`error`]: the engine's error type, [`EngineError`].
//!
//! # Failure of a guest call
//!
//! A trap, fuel exhaustion or a memory-limit hit inside a call is returned as
//! an [`EngineError`], never a panic. Such a call may have left the guest's
//! state half-changed, and wasmtime refuses to re-enter a component instance
//! that trapped, so the instance is **poisoned**: every later call returns
//! [`EngineError::Poisoned`] naming the first failure. The failure is
//! deterministic (same bytes, same inputs, same fuel, same limit), so every
//! node poisons at the same entry; none of them goes on to hand out locks from
//! a state it could not compute. Recovery is to build a fresh instance and
//! `restore` a snapshot into it. A `restore` that the guest refuses with an
//! error value (not a trap) leaves the instance and its state untouched.

pub mod admit;
pub mod bindings;
pub mod cache;
pub mod calls;
pub mod checks;
pub mod error;
pub mod guest;
pub mod hash;
pub mod pick;
pub mod queries;
pub mod settings;
pub mod store;
pub mod wasm;
pub mod world01;
pub mod world02;

pub use cache::{CacheBound, ComponentCache};
pub use checks::{cut as cut_reason, MAX_REASON};
pub use error::EngineError;
pub use guest::{GuestInstance, GuestModule, World};
pub use hash::ModuleHash;
pub use pick::{Candidate, Picker};
pub use settings::{EngineFingerprint, EngineSettings};
pub use wasm::WasmEngine;
