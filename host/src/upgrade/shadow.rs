//! Shadow mode: a candidate module beside the active one.
//!
//! A shadow is started by a committed [`super::ShadowEntry::Start`], so every
//! node starts it at the same index from the same state (the active module's
//! snapshot, migrated by [`super::migrate`]). From then on every committed
//! batch is applied to the active module — whose outcomes are the real ones
//! — and then to the shadow, whose outcomes are only compared: lock state,
//! tokens and clients never see them. At every audit point the two state
//! hashes are compared too. A shadow that fails (trap, fuel, memory) is
//! marked failed and fed nothing more; the active module is unaffected.
//!
//! The shadow lives in memory only: it is not part of Raft snapshots, so a
//! node that restores a snapshot taken after the shadow started runs
//! without it (start it again). Promotion goes through a normal upgrade
//! entry with the shadow's bytes.

use lockd_client::proto::{ShadowDiff, ShadowStatus};

use crate::command::{Command, Outcome};
use crate::engine::{GuestInstance, GuestModule};

/// Differing outcomes kept as examples.
const EXAMPLES: usize = 16;

pub struct Shadow {
    pub module: GuestModule,
    pub instance: GuestInstance,
    pub version: String,
    pub since_index: u64,
    pub commands_compared: u64,
    pub outcome_diffs: u64,
    pub hash_checks: u64,
    pub hash_diffs: u64,
    pub failed: Option<String>,
    pub examples: Vec<ShadowDiff>,
}

impl Shadow {
    pub fn new(module: GuestModule, instance: GuestInstance, version: String, since_index: u64) -> Shadow {
        Shadow {
            module,
            instance,
            version,
            since_index,
            commands_compared: 0,
            outcome_diffs: 0,
            hash_checks: 0,
            hash_diffs: 0,
            failed: None,
            examples: Vec::new(),
        }
    }

    pub fn healthy(&self) -> bool {
        self.failed.is_none()
    }

    /// Feed the batch the active module just applied (`indices[i]` is the
    /// log index of `batch[i]`) and compare outcomes.
    pub fn feed(&mut self, batch: &[Command], indices: &[u64], active: &[Outcome]) {
        if !self.healthy() || batch.is_empty() {
            return;
        }
        match self.instance.apply(batch) {
            Ok(outcomes) => {
                self.commands_compared += batch.len() as u64;
                for (i, (a, s)) in active.iter().zip(&outcomes).enumerate() {
                    if a != s {
                        self.outcome_diffs += 1;
                        if self.examples.len() < EXAMPLES {
                            self.examples.push(ShadowDiff {
                                index: indices.get(i).copied().unwrap_or(0),
                                command: batch[i].to_string(),
                                active: a.to_string(),
                                shadow: s.to_string(),
                            });
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(module = %self.module.hash(), error = %e, "shadow module failed; it gets no more input");
                self.failed = Some(e.to_string());
            }
        }
    }

    /// Compare the shadow's state hash with the active module's.
    pub fn check_hash(&mut self, active: &[u8; 32]) {
        if !self.healthy() {
            return;
        }
        match self.instance.state_hash() {
            Ok(h) => {
                self.hash_checks += 1;
                if &h != active {
                    self.hash_diffs += 1;
                }
            }
            Err(e) => self.failed = Some(e.to_string()),
        }
    }

    pub fn status(&self) -> ShadowStatus {
        ShadowStatus {
            module_hash: self.module.hash().to_string(),
            module_version: self.version.clone(),
            since_index: self.since_index,
            commands_compared: self.commands_compared,
            outcome_diffs: self.outcome_diffs,
            hash_checks: self.hash_checks,
            hash_diffs: self.hash_diffs,
            failed: self.failed.clone(),
            examples: self.examples.clone(),
        }
    }
}
