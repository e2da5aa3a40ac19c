//! The built-in lock state machine component.
//!
//! `build.rs` compiles `guest-sm/` for `wasm32-unknown-unknown`, turns the
//! core module into a component with `wit-component`, and this module embeds
//! the bytes. A new cluster starts with this module; later modules arrive as
//! replicated upgrades.

/// The component bytes of `guest-sm`, built with this binary: the module
/// every replica starts from at index 0. It is part of every cluster's
/// history (a cluster that recorded no first module ran it from the
/// start), so it never changes; a new cluster records the module it
/// starts with in its log instead ([`first_module`]).
pub const LOCK_SM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest_sm.wasm"));

/// The module a new cluster records as its first (docs/lock-modules.md,
/// "The first module"). A build with the test-only faults takes it from
/// the file `LOCKD_FAULT_BUILTIN` names, to play a binary with another
/// built-in module.
pub fn first_module() -> std::borrow::Cow<'static, [u8]> {
    #[cfg(feature = "faults")]
    if let Some(path) = std::env::var_os("LOCKD_FAULT_BUILTIN") {
        if let Ok(bytes) = std::fs::read(path) {
            return std::borrow::Cow::Owned(bytes);
        }
    }
    std::borrow::Cow::Borrowed(LOCK_SM)
}
