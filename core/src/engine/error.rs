//! Errors of the wasm engine.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum EngineError {
    #[error("wasmtime rejected the engine configuration: {0}")]
    Config(String),
    #[error("module is not WebAssembly (no \\0asm header)")]
    NotWasm,
    #[error("module is a core WebAssembly module, not a component of the lock-sm world")]
    NotAComponent,
    #[error("module is not a valid component: {0}")]
    Invalid(String),
    #[error("module imports {0:?}; a lock module may import nothing")]
    HasImports(Vec<String>),
    #[error("module does not export the lock-sm world: {0}")]
    WrongWorld(String),
    #[error("guest ran out of fuel in `{call}` (budget {budget} per call)")]
    FuelExhausted { call: &'static str, budget: u64 },
    #[error("guest exceeded the memory limit of {limit} bytes in `{call}`")]
    MemoryLimit { call: &'static str, limit: u64 },
    #[error("guest trapped in `{call}`: {trap}")]
    Trap { call: &'static str, trap: String },
    /// Not isolated like other traps: how deep a guest may recurse
    /// depends on the machine's native stack and the wasmtime build, so
    /// nodes could disagree on which command fails.
    #[error("guest exhausted the native call stack in `{call}`")]
    StackOverflow { call: &'static str },
    #[error("guest instance is poisoned by an earlier failure ({0}); restore a snapshot into a fresh instance")]
    Poisoned(String),
    #[error("guest refused the snapshot: {0}")]
    RestoreRejected(String),
    #[error("guest returned {got} outcomes for a batch of {want} commands")]
    OutcomeCount { want: usize, got: usize },
    /// This node cannot run a module the cluster swaps in (its own
    /// limits or engine; `crate::replica`, "Cannot run"): it stops
    /// applying rather than reject a swap its peers make.
    #[error("this node cannot run the module the cluster swapped in: {0}")]
    CannotRun(String),
    #[error("component cache at {path}: {reason}")]
    Cache { path: String, reason: String },
}
