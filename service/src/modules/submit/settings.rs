//! The cluster-wide settings an admin changes through the log besides
//! the module: the trusted module keys and the capacity bounds. Each is
//! one entry, checked on the leader with the rule apply uses, so a
//! refusal proposes nothing.

use lockd_proto::signature::{ModuleKeyReply, ModuleKeyResult};
use lockd_proto::{Capacity, CapacityStatus};

use super::{UpgradeError, Upgrader};
use lockd_core::signature::{KeyChange, KeyEntry, ModuleKey};
use lockd_replication::{Request, Response};

impl Upgrader {
    /// Trust `key` for module signatures from the entry's index on.
    pub async fn trust_key(&self, key: ModuleKey) -> Result<ModuleKeyReply, UpgradeError> {
        self.change_keys(KeyEntry::Trust(key)).await
    }

    /// Stop trusting `key`.
    pub async fn untrust_key(&self, key: ModuleKey) -> Result<ModuleKeyReply, UpgradeError> {
        self.change_keys(KeyEntry::Untrust(key)).await
    }

    async fn change_keys(&self, entry: KeyEntry) -> Result<ModuleKeyReply, UpgradeError> {
        self.check_leader()?;
        // The same rule as apply, on a copy: a refusal proposes nothing.
        self.sm
            .module_keys()
            .apply(&entry)
            .map_err(UpgradeError::Key)?;
        let key = match &entry {
            KeyEntry::Trust(k) | KeyEntry::Untrust(k) => *k,
        };
        match self.propose(Request::ModuleKeys(entry)).await? {
            (index, Response::ModuleKeys(result, keys)) => {
                let result = match result.map_err(UpgradeError::Key)? {
                    KeyChange::Trusted => ModuleKeyResult::Trusted,
                    KeyChange::Untrusted => ModuleKeyResult::Untrusted,
                    KeyChange::AlreadyTrusted => ModuleKeyResult::AlreadyTrusted,
                };
                Ok(ModuleKeyReply {
                    index,
                    result,
                    key: key.to_string(),
                    keys: keys.hex(),
                })
            }
            (_, other) => Err(UpgradeError::Internal(format!(
                "a module-key entry was answered {other:?}"
            ))),
        }
    }

    /// Set the cluster's capacity bounds: one log entry, in force on every
    /// node from its index on.
    pub async fn set_capacity(&self, bounds: Capacity) -> Result<CapacityStatus, UpgradeError> {
        self.check_leader()?;
        match self.propose(Request::Capacity(bounds.into())).await? {
            (_, Response::Capacity(status)) => Ok(status),
            (_, other) => Err(UpgradeError::Internal(format!(
                "a capacity entry was answered {other:?}"
            ))),
        }
    }
}
