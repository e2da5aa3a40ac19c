//! The built-in lock state machine components.
//!
//! `build.rs` compiles `guest-sm/` (world 0.1), `guest-sm/world02/` (world
//! 0.2), `guest-sm/world03/` (world 0.3) and `guest-sm/world04/` (world
//! 0.4) for `wasm32-unknown-unknown`,
//! turns each core module into a component with `wit-component`, and this
//! module embeds the bytes. Every replica starts from [`LOCK_SM`] at index
//! 0; a new cluster records the module it starts with ([`first_module`], by
//! default [`LOCK_SM_0_3`]) as its first log entry; later modules arrive as
//! replicated upgrades.

use std::borrow::Cow;

/// The component bytes of `guest-sm`, built with this binary: the module
/// every replica starts from at index 0. It is part of every cluster's
/// history (a cluster that recorded no first module ran it from the
/// start), so it never changes; a new cluster records the module it
/// starts with in its log instead ([`first_module`]).
pub const LOCK_SM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest_sm.wasm"));

/// The component bytes of the reference module of world 0.2
/// (`guest-sm/world02`): readers-writer locks, semaphores, holders,
/// retry-safe acquires and policy data.
pub const LOCK_SM_0_2: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest_sm_world02.wasm"));

/// The component bytes of the reference module of world 0.3
/// (`guest-sm/world03`): world 0.2's and sessions, reentrant holdings and
/// values.
pub const LOCK_SM_0_3: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest_sm_world03.wasm"));

/// The component bytes of the reference module of world 0.4
/// (`guest-sm/world04`): world 0.3's and its election policy (`pick`).
pub const LOCK_SM_0_4: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest_sm_world04.wasm"));

/// Which built-in module a new cluster records as its first
/// (`lockd serve --initial-module`). Only a cluster that has applied
/// nothing but Raft's own entries records one, so a cluster that served
/// anything on world 0.1 keeps it whatever this says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InitialModule {
    /// [`LOCK_SM`]: what clusters ran before world 0.2 was built in.
    World01,
    /// [`LOCK_SM_0_2`]: what new clusters ran before world 0.3.
    World02,
    /// [`LOCK_SM_0_3`].
    #[default]
    World03,
    /// [`LOCK_SM_0_4`].
    World04,
}

/// The module a new cluster records as its first (docs/lock-modules.md,
/// "The first module"). A build with the test-only faults takes it from
/// the file `LOCKD_FAULT_BUILTIN` names, to play a binary with another
/// built-in module.
pub fn first_module(initial: InitialModule) -> Cow<'static, [u8]> {
    #[cfg(feature = "faults")]
    if let Some(path) = std::env::var_os("LOCKD_FAULT_BUILTIN") {
        if let Ok(bytes) = std::fs::read(path) {
            return Cow::Owned(bytes);
        }
    }
    Cow::Borrowed(match initial {
        InitialModule::World01 => LOCK_SM,
        InitialModule::World02 => LOCK_SM_0_2,
        InitialModule::World03 => LOCK_SM_0_3,
        InitialModule::World04 => LOCK_SM_0_4,
    })
}
