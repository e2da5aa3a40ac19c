//! The reference lock module of world `lockd:sm@0.3.0`
//! (`wit/lock-sm-0.3.wit`): world 0.2's locks plus sessions, reentrant
//! holdings and published values — what leader election is built from.
//!
//! The lock logic is `lock-logic` (`guest-sm/logic`), shared with the 0.2
//! module and re-exported here whole; this crate adds what makes it the 0.3
//! module: its world and version ([`WORLD`], [`VERSION`]), its features
//! ([`features`]: sessions, reentry and values on) and the wasm export
//! layer, which passes every 0.3 field through. It is a crate of its own,
//! not a feature of the 0.2 one, because each module's rlib carries its
//! `wit-bindgen` exports and two modules' `apply` must never meet in one
//! build.
//!
//! Like the 0.2 module it is plain, pure Rust that builds natively (an
//! rlib, for tests) and for `wasm32-unknown-unknown`, where it becomes a
//! component with no imports at all.
//!
//! # What it does
//!
//! Everything 0.2 does, with the same meaning: a state that uses nothing of
//! 0.3 has 0.2's snapshot bytes (format 3) and state hash, so a 0.2 → 0.3
//! upgrade audits clean and a downgrade works while nothing new is in use.
//! What 0.3 adds (see `lock-logic` for the rules):
//!
//! * **Sessions**: `open-session`, grants that name a session and live as
//!   long as it, `close-session` and the leader's `expire-session`, which
//!   remove the session's holdings in one entry; `session` and
//!   `list-sessions` to read them.
//! * **Reentrant grants**: the same holder enters a key it holds again,
//!   with the same token and a count; releases count down.
//! * **Values**: a holding carries up to 4096 bytes, set by its grant and
//!   replaced by `proclaim`.
//! * **Snapshots**: format 4 once anything of 0.3 is used; `restore` reads
//!   formats 1 to 4.
//!
//! # Layout
//!
//! * This file: the re-export and the 0.3 constants.
//! * `component` (wasm only): the bindings `wit-bindgen` generates from
//!   `wit/lock-sm-0.3.wit`, and `exports.rs`, the export layer the 0.4
//!   module (`guest-sm/world04`) includes too.

pub use lock_logic::*;

#[cfg(target_arch = "wasm32")]
mod component;

/// The world this module implements.
pub const WORLD: &str = "lockd:sm/lock-sm@0.3.0";

/// The version string this build of the lock logic reports.
pub const VERSION: &str = concat!(
    "lock-sm/",
    env!("CARGO_PKG_VERSION"),
    " (world lockd:sm@0.3.0, snapshot format 4)"
);

/// What the 0.3 module supports: everything.
pub fn features() -> Features {
    Features::of(World::V03)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_describes_itself_as_0_3() {
        assert_eq!(WORLD, World::V03.id());
        let f = features();
        assert_eq!(f.world_id, WORLD);
        assert!(f.sessions && f.reentrant && f.values);
        assert_eq!(
            VERSION,
            "lock-sm/0.4.0 (world lockd:sm@0.3.0, snapshot format 4)"
        );
    }

    /// A 0.2 module's state is taken over as it is, and stays format 3 until
    /// something of 0.3 is used.
    #[test]
    fn a_0_2_state_upgrades_and_takes_0_3_commands() {
        let mut old = LockState::new();
        old.apply(Grant::exclusive("k", 10).by("p", "o").into());
        let bytes = old.snapshot();
        assert_eq!(bytes[4], 3);
        let mut s = LockState::new();
        s.restore(&bytes).unwrap();
        assert_eq!(s.state_hash(), old.state_hash());
        assert_eq!(s.snapshot(), bytes);
        let opened = s.apply(OpenSession::new(100).by("p", "o").into());
        assert!(matches!(opened, Outcome::SessionOpened { id: 1, .. }));
        assert_eq!(s.snapshot()[4], 4);
        assert_ne!(s.state_hash(), old.state_hash());
    }
}
