//! Test support for the lock service.
//!
//! # Layout
//!
//! * [`machines`]: one interface, [`machines::LockMachine`], over the native
//!   build of the state machine (`guest-sm` as a Rust library) and the wasm
//!   build (the component run by `lockd`'s engine), so a test can drive both
//!   with the same commands and compare.
//! * [`scenario`]: data-driven scenario files (`scenarios/*.txt`): a
//!   scenario is commands in and expected output out, run against every
//!   machine.
//! * [`cluster`]: real `lockd` processes on loopback, driven over HTTP,
//!   killed and restarted.
//! * [`jepsen`]: fault-injection runs with history checkers.
//! * [`metrics`]: `/metrics` read with a Prometheus text parser, and
//!   samples picked by name and labels.
//! * [`netns`]: one network namespace per node, for partitions.
//! * [`raw`]: raw sockets to a node (framed hellos, half-sent heads,
//!   other loopback source addresses).
//! * [`contract`]: calls checked against the OpenAPI document, and request
//!   bodies generated from its schemas (valid, and one step past).
//! * [`fixtures`]: the hostile guest components built by `build.rs`.
//! * [`golden`]: golden bytes of the persisted and wire formats, and the
//!   sample values the format tests encode.
//! * [`load`]: client threads that keep taking and freeing locks while a
//!   test upgrades, and what they saw.
//! * [`openapi`]: the node's OpenAPI document: answers checked strictly
//!   against its schemas, and the Markdown reference rendered from it.
//! * [`secure`]: certificates, an auth file with a principal per role,
//!   and callers presenting one principal's credentials, for clusters
//!   with TLS and authentication on.
//! * [`sse`]: a watch stream (`GET /v1/watch`) read as a caller reads it.
//! * [`sim`]: the deterministic simulation: real nodes and clients in one
//!   thread on simulated time, under one seed, with the same checkers.
//! * [`throttle`]: a slow link, a proxy that forwards at a given rate.
//! * [`turns`]: which tests may run side by side in one test process, and
//!   which must have the machine alone.
//! * [`world02`]: the same for lock modules of world `lock-sm@0.2.0`: their
//!   native and wasm builds behind one interface, and their scenario files
//!   (`scenarios-0.2/*.txt`).

pub mod cluster;
pub mod contract;
pub mod fixtures;
pub mod golden;
pub mod jepsen;
pub mod load;
pub mod machines;
pub mod metrics;
pub mod netns;
pub mod openapi;
pub mod raw;
pub mod scenario;
pub mod secure;
#[cfg(feature = "faults")]
pub mod sim;
pub mod sse;
pub mod throttle;
pub mod turns;
pub mod world02;
