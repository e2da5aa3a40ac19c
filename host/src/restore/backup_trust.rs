//! What a backup must hold to be restored: a backup file is not
//! authenticated, and it brings its lock module and its trusted module
//! keys into the new cluster, so the operator vouches for them (docs/
//! security.md, "Restores").

use std::collections::BTreeSet;

use super::RestoreError;
use crate::raft::snapshot::SnapshotBlob;
use lockd_core::engine::ModuleHash;
use lockd_core::signature::ModuleKey;

/// What the operator vouches for about a backup file (`lockd restore
/// --module --trusted-module-key --allow-unsigned-backup`): a backup is
/// not authenticated, and it brings its lock module and its trusted module
/// keys into the new cluster.
#[derive(Clone, Debug, Default)]
pub struct Vouched {
    /// The active module the backup must hold.
    pub module: Option<ModuleHash>,
    /// The trusted module keys it must hold, all of them.
    pub keys: BTreeSet<ModuleKey>,
    /// Restore a backup that requires no module signature (an older
    /// format, or a cluster that trusted no key).
    pub allow_unsigned: bool,
}

/// Whether the backup `blob` holds what `v` vouches for. A backup that
/// trusts module keys is restored only when the operator names its
/// module and every key it trusts; one that trusts none only with
/// `allow_unsigned` (the new cluster would then take any module).
pub fn check_vouched(blob: &SnapshotBlob, v: &Vouched) -> Result<(), RestoreError> {
    let module = ModuleHash::of(&blob.module);
    let keys: BTreeSet<ModuleKey> = blob.module_keys.iter().copied().collect();
    let listed = keys
        .iter()
        .map(ModuleKey::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if keys.is_empty() {
        return match v.allow_unsigned && v.keys.is_empty() {
            true => check_module(module, v.module),
            false if !v.keys.is_empty() => Err(RestoreError::Unvouched(format!(
                "the backup trusts no module key, not the ones named; its module is {module}"
            ))),
            false => Err(RestoreError::Unvouched(format!(
                "the backup requires no module signature (module {module}): the new cluster would take any module; pass --allow-unsigned-backup to restore it so"
            ))),
        };
    }
    if v.keys != keys {
        return Err(RestoreError::Unvouched(format!(
            "the backup trusts the module keys {listed}; name each with --trusted-module-key (a backup file is not authenticated)"
        )));
    }
    match v.module {
        None => Err(RestoreError::Unvouched(format!(
            "the backup's module is {module}; name it with --module to restore it"
        ))),
        given => check_module(module, given),
    }
}

fn check_module(module: ModuleHash, given: Option<ModuleHash>) -> Result<(), RestoreError> {
    match given {
        Some(g) if g != module => Err(RestoreError::Unvouched(format!(
            "the backup's module is {module}, not {g}"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockd_core::signature::{KeyEntry, TrustedKeys};

    fn blob(keys: &[ModuleKey]) -> SnapshotBlob {
        let mut trusted = TrustedKeys::default();
        for k in keys {
            trusted.apply(&KeyEntry::Trust(*k)).expect("a usable key");
        }
        SnapshotBlob {
            meta: Default::default(),
            module: b"\0asm the module".to_vec(),
            guest_state: Vec::new(),
            module_since: 0,
            upgrades: Vec::new(),
            capacity: lockd_core::replica::capacity::DEFAULT_CAPACITY,
            module_keys: trusted,
            first_module: None,
            failures: Default::default(),
            way_back: Default::default(),
            precheck: None,
        }
    }

    fn key(seed: u8) -> ModuleKey {
        ModuleKey(
            ed25519_dalek::SigningKey::from_bytes(&[seed; 32])
                .verifying_key()
                .to_bytes(),
        )
    }

    #[test]
    fn a_backup_is_restored_only_as_vouched_for() {
        let module = ModuleHash::of(b"\0asm the module");
        let other = ModuleHash::of(b"\0asm another");
        let unsigned = blob(&[]);
        let err = |b: &SnapshotBlob, v: Vouched| check_vouched(b, &v).unwrap_err().to_string();
        assert!(err(&unsigned, Vouched::default()).contains("--allow-unsigned-backup"));
        let allow = Vouched {
            allow_unsigned: true,
            ..Vouched::default()
        };
        assert!(check_vouched(&unsigned, &allow).is_ok());
        let wrong = Vouched {
            module: Some(other),
            ..allow.clone()
        };
        assert!(err(&unsigned, wrong).contains("not "));
        let signed = blob(&[key(1), key(2)]);
        // Keys trusted: every one named, and the module; the flag for
        // unsigned backups does not stand in for them.
        assert!(err(&signed, allow.clone()).contains("--trusted-module-key"));
        let one = Vouched {
            module: Some(module),
            keys: [key(1)].into_iter().collect(),
            allow_unsigned: false,
        };
        assert!(err(&signed, one.clone()).contains("--trusted-module-key"));
        let both = Vouched {
            keys: [key(1), key(2)].into_iter().collect(),
            ..one.clone()
        };
        assert!(check_vouched(&signed, &both).is_ok());
        let no_module = Vouched {
            module: None,
            ..both.clone()
        };
        assert!(err(&signed, no_module).contains("--module"));
        let forged = Vouched {
            module: Some(other),
            ..both
        };
        assert!(err(&signed, forged).contains("not "));
    }
}
