//! Applying the entries that change the module: an upgrade (migrate and
//! swap, or reject) and shadow start and stop. The same steps on every
//! node (see [`crate::upgrade`]).

use std::time::{Duration, Instant};

use lockd_client::proto::{AuditKind, UpgradeRecord, UpgradeResult};

use super::{Replica, KEEP_UPGRADES};
use crate::engine::ModuleHash;
use crate::raft::LogId;
use crate::upgrade::shadow::Shadow;
use crate::upgrade::{
    apply_upgrade, switch_to, ShadowEntry, ShadowOutcome, UpgradeEntry, UpgradeOutcome,
};

impl Replica {
    /// Apply an upgrade entry: migrate and swap, or reject and keep the
    /// active module. The same on every node (see [`crate::upgrade`]).
    pub(super) fn upgrade(&mut self, log_id: LogId, up: UpgradeEntry) -> UpgradeOutcome {
        let started = Instant::now();
        let new_hash = ModuleHash::of(&up.module);
        let span = tracing::info_span!(
            "upgrade",
            node = self.id,
            term = log_id.leader_id.term,
            index = log_id.index,
            module = %new_hash
        );
        let _enter = span.enter();
        let active = self.module.hash();
        let loader = self.loader.clone();
        let result = apply_upgrade(loader.engine(), &up, active, &mut self.guest, |b| {
            loader.load(b)
        });
        let outcome = match result {
            Ok((module, mut migrated)) => {
                let version = migrated.version.clone();
                let hash = migrated.instance.state_hash();
                self.module = module;
                self.guest = migrated.instance;
                self.module_since = log_id.index;
                // A migration may keep or drop holdings: count them again.
                match self.measure_usage() {
                    Ok(usage) => self.usage = usage,
                    Err(e) => tracing::error!(error = %e, "cannot count the new module's holdings"),
                }
                if let Ok(hash) = hash {
                    self.audit
                        .record(log_id.index, &hash, new_hash, AuditKind::Upgrade);
                }
                if self
                    .shadow
                    .as_ref()
                    .is_some_and(|s| s.module.hash() == new_hash)
                {
                    tracing::info!("the shadow module was promoted; shadow mode ends");
                    self.shadow = None;
                }
                tracing::info!(version = %version, replaced = %active, "upgraded the lock module");
                self.upgrades_swapped += 1;
                UpgradeOutcome::Swapped {
                    module: new_hash,
                    replaced: active,
                    version,
                }
            }
            Err(e) => {
                tracing::warn!(reason = %e, "upgrade rejected; the active module stays");
                self.upgrades_rejected += 1;
                UpgradeOutcome::Rejected {
                    module: new_hash,
                    replaces: up.replaces,
                    reason: e.to_string(),
                }
            }
        };
        let record = record_of(log_id.index, &up.replaces, &outcome, started.elapsed());
        self.upgrades.push_back(record);
        while self.upgrades.len() > KEEP_UPGRADES {
            self.upgrades.pop_front();
        }
        outcome
    }

    /// Apply a shadow entry.
    pub(super) fn shadow_entry(&mut self, log_id: LogId, entry: ShadowEntry) -> ShadowOutcome {
        match entry {
            ShadowEntry::Stop => {
                let module = self.shadow.take().map(|s| s.module.hash());
                tracing::info!(
                    node = self.id,
                    index = log_id.index,
                    ?module,
                    "shadow mode stopped"
                );
                ShadowOutcome::Stopped { module }
            }
            ShadowEntry::Start { module: bytes } => {
                let hash = ModuleHash::of(&bytes);
                let loader = self.loader.clone();
                match switch_to(loader.engine(), loader.load(&bytes), &mut self.guest) {
                    Ok((module, migrated)) => {
                        let version = migrated.version.clone();
                        tracing::info!(node = self.id, index = log_id.index, module = %hash, %version, "shadow mode started");
                        self.shadow = Some(Shadow::new(
                            module,
                            migrated.instance,
                            migrated.version,
                            log_id.index,
                        ));
                        ShadowOutcome::Started {
                            module: hash,
                            version,
                        }
                    }
                    Err(e) => {
                        tracing::warn!(node = self.id, index = log_id.index, module = %hash, reason = %e, "shadow module refused");
                        ShadowOutcome::Failed {
                            module: hash,
                            reason: e.to_string(),
                        }
                    }
                }
            }
        }
    }
}

/// The status record of an applied upgrade entry.
pub fn record_of(
    index: u64,
    replaces: &ModuleHash,
    outcome: &UpgradeOutcome,
    took: Duration,
) -> UpgradeRecord {
    let (module, result, version, reason) = match outcome {
        UpgradeOutcome::Swapped {
            module, version, ..
        } => (module, UpgradeResult::Swapped, Some(version.clone()), None),
        UpgradeOutcome::Rejected { module, reason, .. } => {
            (module, UpgradeResult::Rejected, None, Some(reason.clone()))
        }
    };
    UpgradeRecord {
        index,
        replaces: replaces.to_string(),
        module_hash: module.to_string(),
        result,
        version,
        reason,
        swap_us: took.as_micros() as u64,
    }
}
