//! The wasm engine the simulated nodes share: one per thread, its
//! compiled modules in a cache several simulation processes may share.

use std::path::Path;
use std::sync::Arc;

use lockd::config::NodeConfig;
use lockd_core::engine::WasmEngine;

/// A directory for compiled modules that several simulation processes
/// share (the tests set it, so a module is compiled once per machine, not
/// once per seed); else each thread has its own, removed with it.
pub const MODULE_CACHE_VAR: &str = "LOCKD_SIM_MODULE_CACHE";

thread_local! {
    /// One wasm engine for every node this thread simulates: the built-in
    /// module is compiled once per thread (or found in the shared cache),
    /// not once per node.
    static ENGINE: (Arc<WasmEngine>, Option<tempfile::TempDir>) = {
        let (dir, own) = match std::env::var_os(MODULE_CACHE_VAR) {
            Some(shared) => (std::path::PathBuf::from(shared), None),
            None => {
                let own = tempfile::tempdir().expect("a temporary directory");
                (own.path().to_path_buf(), Some(own))
            }
        };
        (Arc::new(open_module_cache(&dir)), own)
    };
}

/// An engine with the nodes' settings and its compiled-module cache in
/// `dir`; opening it first makes `dir` ready (its key written) for several
/// processes to open at once.
pub fn open_module_cache(dir: &Path) -> WasmEngine {
    WasmEngine::new(NodeConfig::default().engine, Some(dir.join("cache")))
        .expect("the wasm engine and its module cache")
}

pub(super) fn engine() -> Arc<WasmEngine> {
    ENGINE.with(|(e, _)| e.clone())
}
