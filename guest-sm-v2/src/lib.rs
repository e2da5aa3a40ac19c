//! Version 2 of the lock state machine: the module a running cluster
//! upgrades to in the hot-upgrade tests and examples.
//!
//! Two differences from version 1 (`guest-sm`), one a user can see and one a
//! user cannot:
//!
//! * **Policy:** keys under [`RESERVED_PREFIX`] are reserved for operators: a
//!   `Grant` for one is answered `GrantRejected` and uses up no token.
//! * **State format:** snapshots are written in format 2 (a header naming the
//!   policy, then the locks), so `restore` must *migrate* a version-1
//!   snapshot: it reads both formats, and the fencing-token counter carries
//!   over, so tokens keep increasing across the upgrade.
//!
//! # Layout
//!
//! * [`V2`]: the state machine (the version-1 lock table plus the policy).
//! * [`format`]: the format-2 encoding and the migration from format 1.
//! * `component` (wasm only): the export layer, reusing the bindings of
//!   `guest-sm`.

pub mod format;

use guest_sm::{Command, LockTable, Outcome, SnapshotError};

/// Keys under this prefix are reserved: grants for them are rejected.
pub const RESERVED_PREFIX: &str = "reserved/";

pub const VERSION: &str = concat!(
    "lock-sm/",
    env!("CARGO_PKG_VERSION"),
    " (snapshot format 2, reserved prefix \"reserved/\")"
);

/// The version-2 state machine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct V2 {
    pub table: LockTable,
}

impl V2 {
    pub fn apply(&mut self, command: Command) -> Outcome {
        match command {
            Command::Grant { key, .. } if key.starts_with(RESERVED_PREFIX) => {
                Outcome::GrantRejected
            }
            other => self.table.apply(other),
        }
    }

    pub fn snapshot(&self) -> Vec<u8> {
        format::encode(&self.table)
    }

    /// Restore a format-2 snapshot, or migrate a format-1 one. On error the
    /// state is unchanged.
    pub fn restore(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        self.table = format::decode(bytes)?;
        Ok(())
    }

    /// The table's incremental hash: the policy is code, not state.
    pub fn state_hash(&self) -> [u8; 32] {
        self.table.state_hash()
    }
}

#[cfg(target_arch = "wasm32")]
mod component;

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(key: &str) -> Command {
        Command::Grant {
            key: key.into(),
            lease_ms: 100,
        }
    }

    #[test]
    fn reserved_keys_are_rejected_without_using_a_token() {
        let mut v = V2::default();
        assert_eq!(v.apply(grant("a")), Outcome::Granted { token: 1 });
        assert_eq!(v.apply(grant("reserved/x")), Outcome::GrantRejected);
        assert_eq!(v.apply(grant("b")), Outcome::Granted { token: 2 });
    }

    #[test]
    fn a_version_1_snapshot_migrates_and_tokens_continue() {
        let mut v1 = LockTable::new();
        v1.apply(grant("x"));
        v1.apply(grant("y"));
        v1.apply(Command::Release { key: "x".into() });
        let mut v2 = V2::default();
        v2.restore(&v1.snapshot()).unwrap();
        assert_eq!(v2.table, v1);
        assert_ne!(
            v2.snapshot(),
            v1.snapshot(),
            "format 2 differs from format 1"
        );
        assert_eq!(v2.apply(grant("z")), Outcome::Granted { token: 3 });
        // Its own format round-trips.
        let mut again = V2::default();
        again.restore(&v2.snapshot()).unwrap();
        assert_eq!(again, v2);
        assert_eq!(again.state_hash(), v2.state_hash());
    }

    #[test]
    fn garbage_is_refused_and_changes_nothing() {
        let mut v = V2::default();
        v.apply(grant("kept"));
        let before = v.clone();
        assert!(v.restore(b"LKSM\x02\xff\xff").is_err());
        assert!(v.restore(b"nope").is_err());
        assert_eq!(v, before);
    }
}
