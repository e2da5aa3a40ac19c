//! The worlds a lock module can implement: one enum for `lockd-core`,
//! which loads modules of every world, and `lock-logic`, whose export
//! layers each implement one world (0.2 and later). It lives in this crate,
//! the smallest the modules share, because the core can depend on it and a
//! module, built for wasm32, on nothing of the host's.
//!
//! Not part of any persisted format: no snapshot, log entry or message
//! carries a `World`; the host reads a module's world from its exports.

use std::fmt;

/// The world a module implements, as its WIT package names it.
/// Ordered oldest first: a later world has everything of an earlier one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum World {
    /// `lockd:sm/lock-sm@0.1.0`: the seed's exclusive locks
    /// (docs/architecture.md, "The lock commands (world 0.1)").
    V01,
    /// `lockd:sm/lock-sm@0.2.0`: the module decides
    /// (docs/writing-a-lock-module.md, "The 0.2 contract in short"); no
    /// sessions, reentry or values, snapshot formats 1 to 3.
    V02,
    /// `lockd:sm/lock-sm@0.3.0`: 0.2 with sessions, reentrant grants and
    /// values (docs/writing-a-lock-module.md, "What 0.3 adds"); snapshot
    /// formats 1 to 4.
    V03,
    /// `lockd:sm/lock-sm@0.4.0`: 0.3 and `pick`, the module's election
    /// policy (docs/writing-a-lock-module.md, "What 0.4 adds"); the same
    /// state and formats.
    V04,
}

impl World {
    /// The world's id, as `features` reports it and errors name it.
    pub const fn id(self) -> &'static str {
        match self {
            World::V01 => "lockd:sm/lock-sm@0.1.0",
            World::V02 => "lockd:sm/lock-sm@0.2.0",
            World::V03 => "lockd:sm/lock-sm@0.3.0",
            World::V04 => "lockd:sm/lock-sm@0.4.0",
        }
    }

    /// The world's number as people read it (`0.3`): status and `lockctl
    /// status` show it before a module's own version string, which counts
    /// releases, not worlds (docs/lock-modules.md, "Module versions and
    /// worlds").
    pub const fn number(self) -> &'static str {
        match self {
            World::V01 => "0.1",
            World::V02 => "0.2",
            World::V03 => "0.3",
            World::V04 => "0.4",
        }
    }
}

impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}
