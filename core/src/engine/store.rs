//! What each guest's wasmtime store carries: the resource limiter that makes
//! a memory bomb fail at the same allocation on every node.
//!
//! The memory limit is **store-wide**: the sum of every linear memory of the
//! component's core instances, so a component made of N core modules cannot
//! get N times the budget. The numbers of instances, memories and tables are
//! capped too; a component that needs more fails to instantiate, which is
//! what an upgrade's precheck reports.

use wasmtime::ResourceLimiter;

/// Core instances a lock module may consist of (ours have one or two).
pub const MAX_INSTANCES: usize = 32;
/// Linear memories across those instances.
pub const MAX_MEMORIES: usize = 4;
/// Tables across those instances (function references only).
pub const MAX_TABLES: usize = 32;
/// Elements of one table.
pub const MAX_TABLE_ELEMENTS: usize = 10_000;

/// Per-instance store data: the resource limiter.
pub struct StoreState {
    pub(super) limiter: MemoryLimiter,
}

pub(super) struct MemoryLimiter {
    /// The most bytes all memories of the store may hold together.
    pub(super) limit: u64,
    /// Bytes the store's memories hold now (they never shrink).
    pub(super) used: u64,
    /// Set when a growth was refused during the current call, so that the
    /// trap that follows (Rust aborts on allocation failure) is reported as
    /// what it is.
    pub(super) refused: bool,
}

impl MemoryLimiter {
    pub(super) fn new(limit: u64) -> MemoryLimiter {
        MemoryLimiter {
            limit,
            used: 0,
            refused: false,
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Called for a memory's creation too (current = 0).
        let grow = (desired as u64).saturating_sub(current as u64);
        let total = self.used.saturating_add(grow);
        if total > self.limit {
            self.refused = true;
            return Ok(false);
        }
        self.used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_counts_every_memory_of_the_store() {
        let mut l = MemoryLimiter::new(100);
        assert!(l.memory_growing(0, 60, None).unwrap());
        // A second memory of 60 would pass a per-memory limit of 100.
        assert!(!l.memory_growing(0, 60, None).unwrap());
        assert!(l.refused);
        assert!(l.memory_growing(0, 40, None).unwrap());
        assert!(!l.memory_growing(60, 61, None).unwrap());
        assert_eq!(l.used, 100);
    }
}
