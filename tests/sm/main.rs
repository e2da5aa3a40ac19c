//! In-process tests: the lock state machine (native and wasm builds), the
//! wasm engine and its cache, hostile modules, version 2 of the module, the
//! reference module of world `lock-sm@0.2.0` (`world02_*`), and fuzzing of
//! every decoder (plus one live node fed random input).
//!
//! One test binary, one module per scenario file (so the engine and its
//! dependencies are linked once, not once per file). Tests run side by side
//! on `RUST_TEST_THREADS` threads; none of them depends on timing.
//! `cargo test --release --test sm -- <name>` runs one.

mod bound_signatures;
mod cannot_run;
mod capacity;
mod engine_cache;
mod engine_cache_trust;
mod first_module;
mod fuzz_inputs;
mod fuzz_peer;
mod golden_formats;
mod golden_peer;
mod golden_snapshots;
mod golden_wire;
mod hostile_modules;
mod isolated_failures;
mod module_v2;
mod no_serde_default;
mod node_shutdown;
mod out_of_service;
mod own_checks;
mod signed_formats;
mod signed_modules;
mod sm_equivalence;
mod sm_scenarios;
mod way_back;
mod world02_differential;
mod world02_equivalence;
mod world02_module;
mod world02_replica;
mod world02_scenarios;
mod world03_module;
mod world04_module;
