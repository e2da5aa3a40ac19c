//! Test support for lock modules of world `lockd:sm@0.2.0`
//! (`wit/lock-sm-0.2.wit`) and its reference module, `guest-sm-world02`.
//!
//! # Layout
//!
//! * [`machine`]: [`machine::ModuleMachine`], one interface over the native
//!   build ([`machine::NativeV2`]) and the wasm build
//!   ([`wasm::WasmV2`]).
//! * [`wasm`]: the component run by wasmtime under the node's engine
//!   settings, with bindings generated from the 0.2 world.
//! * [`scenario`]: the data-driven scenario files of `scenarios-0.2/`.

pub mod machine;
pub mod scenario;
pub mod wasm;
