//! The lock service's reads: holders, listings and the policy data, each
//! linearizable through the read barrier ([`super::barrier::confirm`]), and
//! the policy data's change (a log entry the module checks); and the
//! default limit of an acquire that gives none, read from this node's
//! applied policy.

use tokio::sync::oneshot;

use super::actor::Msg;
use super::barrier;
use super::error::{check_key, ServiceError, MAX_KEY_BYTES};
use super::handle::{LockService, MAX_LIST};
use super::table::Spec;
use lockd_core::command::{Command, HolderInfo, KeyHolders, Mode, Outcome, PrefixPolicy, Reason};
use lockd_proto::DEFAULT_SHARED_LIMIT;

/// (token, ms of lease left on the leader's clock) of a key's holdings:
/// only a leader's table times them (empty on any other node, or while a
/// new leader loads its table).
pub(crate) type LeasesLeft = Vec<(u64, u64)>;

impl LockService {
    /// The holders of `key` in token order (empty: free), read
    /// linearizably (read-index through the leader).
    pub async fn holders(&self, key: &str) -> Result<Vec<HolderInfo>, ServiceError> {
        Ok(self.read_holders(key, false).await?.0)
    }

    /// [`Self::holders`], with the lease left of each.
    pub async fn holders_timed(
        &self,
        key: &str,
    ) -> Result<(Vec<HolderInfo>, LeasesLeft), ServiceError> {
        self.read_holders(key, true).await
    }

    async fn read_holders(
        &self,
        key: &str,
        timed: bool,
    ) -> Result<(Vec<HolderInfo>, LeasesLeft), ServiceError> {
        check_key(key)?;
        barrier::confirm(&self.raft, self.id).await?;
        let mut holders = self
            .sm
            .holders(key)
            .map_err(|e| ServiceError::StateMachine(e.to_string()))?;
        let mut left = self.ask_table(&mut [(key, &mut holders)], timed).await;
        Ok((holders, left.pop().unwrap_or_default()))
    }

    /// One question to the leader's table, when there is something to
    /// ask: the principals a module of world 0.1 did not record (filled
    /// in where the table knows them: the grants it made) and, when
    /// `timed`, the lease left of each holding (one list per key).
    async fn ask_table(
        &self,
        keys: &mut [(&str, &mut Vec<HolderInfo>)],
        timed: bool,
    ) -> Vec<LeasesLeft> {
        let unrecorded = keys
            .iter()
            .flat_map(|(_, hs)| hs.iter())
            .any(|h| h.holder.is_none());
        if !timed && !unrecorded {
            return Vec::new();
        }
        let (reply, rx) = oneshot::channel();
        let asked = keys.iter().map(|(k, _)| k.to_string()).collect();
        if self.tx.send(Msg::Known { keys: asked, reply }).is_err() {
            return Vec::new();
        }
        let Ok(known) = rx.await else {
            return Vec::new();
        };
        let mut left = Vec::with_capacity(known.len());
        for ((_, holders), known) in keys.iter_mut().zip(known) {
            for h in holders.iter_mut().filter(|h| h.holder.is_none()) {
                if let Some((_, p)) = known.principals.iter().find(|(t, _)| *t == h.token) {
                    h.holder = Some(lockd_core::command::Holder {
                        principal: p.clone(),
                        owner: String::new(),
                    });
                }
            }
            left.push(known.leases_left);
        }
        left
    }

    /// Held keys under `prefix` after `after`, at most `limit` (1 to
    /// [`MAX_LIST`]), read linearizably.
    pub async fn list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<KeyHolders>, ServiceError> {
        Ok(self.read_list(prefix, after, limit, false).await?.1)
    }

    /// [`Self::list`], with the applied index the page was read at (a
    /// watch from the next index misses nothing after it) and the lease
    /// left of each holding (one list per key of the page).
    pub async fn list_timed(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<(u64, Vec<KeyHolders>, Vec<LeasesLeft>), ServiceError> {
        self.read_list(prefix, after, limit, true).await
    }

    async fn read_list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
        timed: bool,
    ) -> Result<(u64, Vec<KeyHolders>, Vec<LeasesLeft>), ServiceError> {
        if prefix.len() > MAX_KEY_BYTES {
            return Err(ServiceError::KeyTooLong(prefix.len()));
        }
        if !(1..=MAX_LIST).contains(&limit) {
            return Err(ServiceError::BadLimit {
                got: limit,
                max: MAX_LIST,
            });
        }
        barrier::confirm(&self.raft, self.id).await?;
        let (index, mut page) = self
            .sm
            .list_keys_at(prefix, after, limit)
            .map_err(|e| ServiceError::StateMachine(e.to_string()))?;
        let mut keys: Vec<(&str, &mut Vec<HolderInfo>)> = page
            .iter_mut()
            .map(|k| (k.key.as_str(), &mut k.holders))
            .collect();
        let mut left = self.ask_table(&mut keys, timed).await;
        left.resize_with(page.len(), Vec::new);
        Ok((index, page, left))
    }

    /// The active module's policy data, read linearizably.
    pub async fn policy(&self) -> Result<Vec<PrefixPolicy>, ServiceError> {
        barrier::confirm(&self.raft, self.id).await?;
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

    /// Give `spec` its limit when the caller gave none (0): an exclusive
    /// acquire is a mutex; a shared one adopts the key's readers' limit in
    /// the table ([`Spec::adopt`]) with, for a key without readers, the
    /// smallest of [`DEFAULT_SHARED_LIMIT`], the module's largest limit and
    /// the `max-holders` of every policy rule whose prefix the key has
    /// (docs/lock-modules.md, "Shared locks"). The policy is this node's
    /// applied one: after a `set-policy` it has not applied yet the module,
    /// which checks every grant, refuses with its reason.
    pub(super) fn settle_limit(&self, key: &str, spec: &mut Spec) -> Result<(), ServiceError> {
        if spec.limit != 0 {
            return Ok(());
        }
        if spec.mode == Mode::Exclusive {
            spec.limit = 1;
            return Ok(());
        }
        let internal =
            |e: lockd_core::engine::EngineError| ServiceError::StateMachine(e.to_string());
        let max_limit = self.sm.features().map_err(internal)?.max_limit;
        let fallback = self
            .sm
            .policy()
            .map_err(internal)?
            .iter()
            .filter(|r| key.starts_with(r.prefix.as_str()))
            .filter_map(|r| r.max_holders)
            .fold(DEFAULT_SHARED_LIMIT.min(max_limit), u32::min)
            .max(1);
        spec.limit = fallback;
        spec.adopt = Some(fallback);
        Ok(())
    }
}
