//! Versions and the way back (docs/writing-a-lock-module.md, "Versions and
//! the way back"): the module version that only increases, the previous
//! module a rollback returns to, and what the cluster does when its module
//! goes out of service.
//!
//! * **Versions.** A module's version is read from its `version()` string:
//!   the first word, `name/MAJOR.MINOR.PATCH` ([`ModuleVersion::of`]).
//!   An upgrade entry of the versioned kind ([`VersionedUpgrade`], what a
//!   leader proposes) is refused unless the new module's version is above
//!   the active one's, or it is marked as a rollback. A module that
//!   declares no version can only come in marked as a rollback; an active
//!   module that declares none may be replaced by any versioned one.
//!   Entries written before versions ([`crate::entry::Request::Upgrade`]
//!   and its signed kinds) are applied as they were then, without this
//!   rule: every node must decide an old log as it was decided.
//! * **The way back** ([`WayBack`], replicated, in snapshots). A swap by a
//!   versioned upgrade records the module it replaced; a
//!   [`RollbackEntry`] returns to it, without bytes in the entry (the
//!   replica has them) and without a signature (those bytes were let in
//!   by this cluster before, under the rules of their time). One step: a
//!   rollback, an entry written before versions and a new cluster's first
//!   module leave no way back; to go forward again, upgrade.
//! * **On failure** ([`lockd_proto::OnModuleFailure`]), chosen with each
//!   versioned upgrade: when the module goes out of service (see
//!   `crate::replica::failures`), `refuse` refuses the kinds it failed on;
//!   `rollback` makes every node return to the previous module at that
//!   index ([`FellBack`]), and refuses as `refuse` does when that swap
//!   fails or there is no previous module.

use serde::{Deserialize, Serialize};

use crate::engine::ModuleHash;
use crate::signature::{ModuleSignature, SignedFor};
use crate::upgrade::{MigrateError, UpgradeEntry};
pub use lockd_proto::OnModuleFailure;

/// A module version: `MAJOR.MINOR.PATCH`, compared in that order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ModuleVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl ModuleVersion {
    /// The version a module's `version()` string declares: its first word
    /// is `name/MAJOR.MINOR.PATCH` (decimal numbers, nothing after);
    /// `None` when it is not. The one parser of module versions.
    pub fn of(version: &str) -> Option<ModuleVersion> {
        let word = version.split_whitespace().next()?;
        let (name, number) = word.rsplit_once('/')?;
        if name.is_empty() {
            return None;
        }
        let mut parts = number.split('.');
        let mut next = || -> Option<u32> {
            let p = parts.next()?;
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse().ok()
        };
        let v = ModuleVersion {
            major: next()?,
            minor: next()?,
            patch: next()?,
        };
        parts.next().is_none().then_some(v)
    }
}

impl std::fmt::Display for ModuleVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Whether a swap from a module whose `version()` is `active` to one whose
/// `version()` is `new` keeps versions increasing (a swap not marked as a
/// rollback must).
pub fn check_order(active: &str, new: &str) -> Result<(), MigrateError> {
    let Some(next) = ModuleVersion::of(new) else {
        return Err(MigrateError::Unversioned {
            version: new.to_string(),
        });
    };
    match ModuleVersion::of(active) {
        Some(now) if next <= now => Err(MigrateError::NotNewer {
            active: now.to_string(),
            new: next.to_string(),
        }),
        _ => Ok(()),
    }
}

/// An upgrade with versions: what a leader proposes since versions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionedUpgrade {
    pub upgrade: UpgradeEntry,
    /// Bound to `signed_for` (see [`crate::signature`]); `None`: unsigned,
    /// accepted only while the cluster trusts no module key.
    pub signature: Option<ModuleSignature>,
    pub signed_for: SignedFor,
    /// Let in whatever its version (an older or equal one, or none).
    pub rollback: bool,
    /// What the cluster does if this module goes out of service.
    pub on_failure: OnModuleFailure,
}

/// Return to the previous module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollbackEntry {
    /// The module being left; another active module makes the entry stale.
    pub replaces: ModuleHash,
    /// The module returned to; it must be the recorded previous one.
    pub to: ModuleHash,
}

/// The way back from the active module (replicated, in snapshots).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WayBack {
    /// The component bytes of the module the active one replaced.
    pub previous: Option<Vec<u8>>,
    pub on_failure: OnModuleFailure,
    /// The last return to the previous module the cluster made on its own.
    pub fell_back: Option<FellBack>,
}

impl std::fmt::Debug for WayBack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WayBack")
            .field("previous", &self.previous_hash())
            .field("on_failure", &self.on_failure)
            .field("fell_back", &self.fell_back)
            .finish()
    }
}

/// A fall back the cluster made on its own: at `index`, from the module
/// that went out of service to the previous one; `reason` when the swap
/// was refused (the failing module then stays, out of service).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FellBack {
    pub index: u64,
    pub from: ModuleHash,
    pub to: ModuleHash,
    pub reason: Option<String>,
}

impl WayBack {
    pub fn previous_hash(&self) -> Option<ModuleHash> {
        self.previous.as_deref().map(ModuleHash::of)
    }

    /// Whether the module going out of service should be left for the
    /// previous one.
    pub fn falls_back(&self) -> bool {
        self.on_failure == OnModuleFailure::Rollback && self.previous.is_some()
    }

    /// As status shows it.
    pub fn status(&self) -> lockd_proto::ModuleWayBack {
        lockd_proto::ModuleWayBack {
            previous_module_hash: self.previous_hash().map(|h| h.to_string()),
            on_failure: self.on_failure,
            fell_back: self
                .fell_back
                .as_ref()
                .map(|f| lockd_proto::ModuleFellBack {
                    index: f.index,
                    from: f.from.to_string(),
                    to: f.to.to_string(),
                    swapped: f.reason.is_none(),
                    reason: f.reason.clone(),
                }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_the_first_word_only() {
        let v = |s| ModuleVersion::of(s);
        assert_eq!(
            v("lock-sm/0.3.0 (world lockd:sm@0.2.0, snapshot format 3)"),
            Some(ModuleVersion {
                major: 0,
                minor: 3,
                patch: 0
            })
        );
        assert_eq!(
            v("a/b/10.2.33").map(|v| v.to_string()).as_deref(),
            Some("10.2.33")
        );
        for bad in [
            "",
            "lock-sm",
            "0.3.0",
            "/0.3.0",
            "lock-sm/0.3",
            "lock-sm/0.3.0.1",
            "lock-sm/0.3.0-rc1",
            "lock-sm/+1.2.3",
            "lock-sm/1..3",
            "lock-sm/99999999999.0.0",
            "chaos-guest (test fixture)",
            "import-guest (test fixture)",
            "x 1/1.2.3",
        ] {
            assert_eq!(v(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_swap_must_go_up_unless_the_active_module_has_no_version() {
        assert!(check_order("m/0.1.0", "m/0.2.0").is_ok());
        assert!(check_order("m/0.9.9", "m/1.0.0").is_ok());
        assert!(check_order("unversioned", "m/0.0.1").is_ok());
        assert_eq!(
            check_order("m/0.2.0", "m/0.2.0"),
            Err(MigrateError::NotNewer {
                active: "0.2.0".into(),
                new: "0.2.0".into()
            })
        );
        assert!(matches!(
            check_order("m/0.10.0", "m/0.9.0"),
            Err(MigrateError::NotNewer { .. })
        ));
        assert!(matches!(
            check_order("m/0.1.0", "no version"),
            Err(MigrateError::Unversioned { .. })
        ));
    }
}
