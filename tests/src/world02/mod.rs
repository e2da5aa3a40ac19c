//! Test support for lock modules of world `lockd:sm@0.2.0`
//! (`wit/lock-sm-0.2.wit`) and its reference module, `guest-sm-world02`,
//! and for the reference module of world `lockd:sm@0.3.0`
//! (`guest-sm-world03`), which is 0.2's with additions: both modules are
//! built on one lock logic, whose types are the superset of both worlds, so
//! one [`machine::ModuleMachine`] drives either.
//!
//! # Layout
//!
//! * [`machine`]: [`machine::ModuleMachine`], one interface over the native
//!   builds ([`machine::NativeV2`], [`machine::NativeV3`]) and the wasm
//!   builds ([`wasm::WasmV2`], [`wasm03::WasmV3`]).
//! * [`wasm`]: the 0.2 component run by wasmtime under the node's engine
//!   settings, with bindings generated from the 0.2 world.
//! * [`wasm03`]: the same for the 0.3 component and world.
//! * [`scenario`]: the data-driven scenario files of `scenarios-0.2/`.

pub mod machine;
pub mod scenario;
pub mod wasm;
pub mod wasm03;
