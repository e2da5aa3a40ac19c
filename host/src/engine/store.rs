//! What each guest's wasmtime store carries: the memory limiter that makes
//! a memory bomb fail at the same allocation on every node.

use wasmtime::ResourceLimiter;

/// Per-instance store data: the memory limiter.
pub struct StoreState {
    pub(super) limiter: MemoryLimiter,
}

pub(super) struct MemoryLimiter {
    pub(super) limit: u64,
    /// Set when a growth was refused during the current call, so that the
    /// trap that follows (Rust aborts on allocation failure) is reported as
    /// what it is.
    pub(super) refused: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired as u64 > self.limit {
            self.refused = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold function references; a lock table needs a handful.
        Ok(desired <= 10_000)
    }
}
