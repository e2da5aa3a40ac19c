//! The lock service's reads: holders, listings and the policy data, each
//! linearizable through the read barrier ([`super::read::confirm`]), and
//! the policy data's change (a log entry the module checks).

use tokio::sync::oneshot;

use super::actor::Msg;
use super::error::{check_key, ServiceError, MAX_KEY_BYTES};
use super::handle::{LockService, MAX_LIST};
use super::read;
use crate::command::{Command, HolderInfo, KeyHolders, Outcome, PrefixPolicy, Reason};

impl LockService {
    /// The holders of `key` in token order (empty: free), read
    /// linearizably (read-index through the leader).
    pub async fn holders(&self, key: &str) -> Result<Vec<HolderInfo>, ServiceError> {
        check_key(key)?;
        read::confirm(&self.raft, self.id).await?;
        let mut holders = self
            .sm
            .holders(key)
            .map_err(|e| ServiceError::StateMachine(e.to_string()))?;
        if holders.iter().any(|h| h.holder.is_none()) {
            self.fill_principals(&mut [(key, &mut holders)]).await;
        }
        Ok(holders)
    }

    /// A module of world 0.1 records no holder: fill in the principal
    /// from the leader's table where it knows one (the grants it made).
    async fn fill_principals(&self, keys: &mut [(&str, &mut Vec<HolderInfo>)]) {
        let (reply, rx) = oneshot::channel();
        let asked = keys.iter().map(|(k, _)| k.to_string()).collect();
        if self
            .tx
            .send(Msg::Principals { keys: asked, reply })
            .is_err()
        {
            return;
        }
        let Ok(known) = rx.await else { return };
        for ((_, holders), known) in keys.iter_mut().zip(known) {
            for h in holders.iter_mut().filter(|h| h.holder.is_none()) {
                if let Some((_, p)) = known.iter().find(|(t, _)| *t == h.token) {
                    h.holder = Some(crate::command::Holder {
                        principal: p.clone(),
                        owner: String::new(),
                    });
                }
            }
        }
    }

    /// (token, ms left) of each holding of each key, as this node's lock
    /// table times them: only a leader's are known (empty lists on any
    /// other node, or while a new leader loads its table).
    pub async fn leases_left(&self, keys: Vec<String>) -> Vec<Vec<(u64, u64)>> {
        let n = keys.len();
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Msg::LeasesLeft { keys, reply }).is_err() {
            return vec![Vec::new(); n];
        }
        rx.await.unwrap_or_else(|_| vec![Vec::new(); n])
    }

    /// Held keys under `prefix` after `after`, at most `limit` (1 to
    /// [`MAX_LIST`]), read linearizably.
    pub async fn list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<KeyHolders>, ServiceError> {
        if prefix.len() > MAX_KEY_BYTES {
            return Err(ServiceError::KeyTooLong(prefix.len()));
        }
        if !(1..=MAX_LIST).contains(&limit) {
            return Err(ServiceError::BadLimit {
                got: limit,
                max: MAX_LIST,
            });
        }
        read::confirm(&self.raft, self.id).await?;
        let mut page = self
            .sm
            .list_keys(prefix, after, limit)
            .map_err(|e| ServiceError::StateMachine(e.to_string()))?;
        if page
            .iter()
            .flat_map(|k| &k.holders)
            .any(|h| h.holder.is_none())
        {
            let mut keys: Vec<(&str, &mut Vec<HolderInfo>)> = page
                .iter_mut()
                .map(|k| (k.key.as_str(), &mut k.holders))
                .collect();
            self.fill_principals(&mut keys).await;
        }
        Ok(page)
    }

    /// The active module's policy data, read linearizably.
    pub async fn policy(&self) -> Result<Vec<PrefixPolicy>, ServiceError> {
        read::confirm(&self.raft, self.id).await?;
        self.sm
            .policy()
            .map_err(|e| ServiceError::StateMachine(e.to_string()))
    }

    /// Replace the policy data through the log (the module checks the
    /// rules; a module without policy data refuses).
    pub async fn set_policy(&self, rules: Vec<PrefixPolicy>) -> Result<(), ServiceError> {
        let mut out = self
            .proposer
            .propose(vec![Command::SetPolicy(rules)])
            .await?;
        match out.pop() {
            Some(Outcome::PolicySet) => Ok(()),
            Some(Outcome::Rejected(Reason::Unsupported(reason) | Reason::Policy(reason))) => {
                Err(ServiceError::PolicyRefused(reason))
            }
            other => Err(ServiceError::StateMachine(format!(
                "set-policy was answered {other:?}"
            ))),
        }
    }
}
