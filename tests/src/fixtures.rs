//! Guest components built from `tests/fixtures/` by `build.rs`.

/// The real lock module, except that magic inputs make it loop, allocate
/// without bound or trap (see `tests/fixtures/chaos-guest`).
pub const CHAOS_GUEST: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/chaos_guest.wasm"));

/// Version 2 of the lock module of world 0.1
/// (`tests/fixtures/guest-sm-world01-v2/`, it reports `lock-sm/0.2.0`):
/// snapshot format 2 (it migrates format 1) and a reserved key prefix.
pub const LOCK_SM_WORLD01_V2: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/guest_sm_world01_v2.wasm"));

/// The reference module of world `lock-sm@0.2.0` (`guest-sm/world02/`,
/// package `guest-sm-world02`): the very bytes `lockd` has built in, so a
/// test's upgrade to it is to the module a new cluster records first.
pub const LOCK_SM_WORLD02: &[u8] = lockd_core::builtin::LOCK_SM_0_2;

/// The reference module of world `lock-sm@0.4.0` (`guest-sm/world04/`):
/// 0.3's and its election policy (`pick`).
pub const LOCK_SM_WORLD04: &[u8] = lockd_core::builtin::LOCK_SM_0_4;

/// The 0.3 reference module with its own `check-invariants`
/// (`tests/fixtures/checked-guest`): it refuses a state holding a key under
/// `checked:refuse/`, and traps when `checked:trap` is held.
pub const CHECKED_GUEST: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/checked_guest.wasm"));

/// A complete `lock-sm` component that also imports a host function.
pub const IMPORT_GUEST: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/import_guest.wasm"));

/// The smallest valid core module (magic, version 1, no sections).
pub const EMPTY_CORE_MODULE: &[u8] = b"\0asm\x01\0\0\0";

/// The smallest valid component (magic, version 0x0d, layer 1): it exports
/// nothing, so it is not of the `lock-sm` world.
pub const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";
