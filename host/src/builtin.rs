//! The built-in lock state machine component.
//!
//! `build.rs` compiles `guest-sm/` for `wasm32-unknown-unknown`, turns the
//! core module into a component with `wit-component`, and this module embeds
//! the bytes. A new cluster starts with this module; later modules arrive as
//! replicated upgrades.

/// The component bytes of `guest-sm`, built with this binary.
pub const LOCK_SM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest_sm.wasm"));
