//! Returning to the previous module: a rollback entry, and the fall back
//! the cluster makes on its own when the active module goes out of
//! service with `on_failure` `rollback` (see [`crate::way_back`]). The
//! swap itself is `swap.rs`'s, with the previous module's bytes.

use super::swap::Admit;
use super::Replica;
use crate::entry::LogId;
use crate::upgrade::{MigrateError, UpgradeEntry, UpgradeOutcome};
use crate::way_back::{FellBack, RollbackEntry};

impl Replica {
    /// Apply a rollback entry: it must leave the active module for the
    /// recorded previous one; the same checks as any swap follow (the
    /// migration back must keep every holding).
    pub(super) fn rollback(&mut self, log_id: LogId, entry: RollbackEntry) -> UpgradeOutcome {
        let active = self.module.hash();
        let why = if entry.replaces != active {
            Some(MigrateError::Stale {
                replaces: entry.replaces,
                active,
            })
        } else {
            match self.way_back.previous_hash() {
                None => Some(MigrateError::NoPrevious),
                Some(previous) if previous != entry.to => Some(MigrateError::NotThePrevious {
                    to: entry.to,
                    previous,
                }),
                Some(_) => None,
            }
        };
        let module = match why {
            Some(why) => {
                let admit = Admit::Refused { to: entry.to, why };
                let up = UpgradeEntry {
                    module: Vec::new(),
                    replaces: entry.replaces,
                };
                return self.swap(log_id, up, admit);
            }
            None => self.way_back.previous.clone().unwrap_or_default(),
        };
        let up = UpgradeEntry {
            module,
            replaces: entry.replaces,
        };
        self.swap(log_id, up, Admit::Previous)
    }

    /// The active module has just gone out of service at `log_id` and the
    /// upgrade that brought it chose `rollback`: return to the previous
    /// module here, recorded as [`FellBack`]. When that swap is refused
    /// the module stays, out of service.
    pub(super) fn fall_back(&mut self, log_id: LogId) {
        let from = self.module.hash();
        let Some(to) = self.way_back.previous_hash() else {
            return;
        };
        let outcome = self.rollback(log_id, RollbackEntry { replaces: from, to });
        let reason = match outcome {
            UpgradeOutcome::Swapped { .. } => None,
            UpgradeOutcome::Rejected { reason, .. } => Some(reason),
        };
        match &reason {
            None => {
                tracing::warn!(node = self.id, index = log_id.index, %from, %to, "the module out of service was left for the previous one")
            }
            Some(r) => {
                tracing::error!(node = self.id, index = log_id.index, %from, %to, reason = %r, "the fall back to the previous module was refused; the module stays out of service")
            }
        }
        self.way_back.fell_back = Some(FellBack {
            index: log_id.index,
            from,
            to,
            reason,
        });
    }
}
