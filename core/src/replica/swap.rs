//! Applying the entries that change the module: an upgrade (migrate and
//! swap, or reject), shadow start and stop, and the module keys they must
//! be signed by. The same steps on every node (see [`crate::upgrade`] and
//! [`crate::signature`]).

use std::time::{Duration, Instant};

use lockd_proto::AuditKind;

use super::{Replica, KEEP_UPGRADES};
use crate::engine::ModuleHash;
use crate::entry::LogId;
use crate::shadow::Shadow;
use std::sync::Arc;

use lockd_proto::signature::{Binding, Purpose};

use crate::signature::{
    KeyChange, KeyEntry, KeyError, ModuleSignature, SignatureError, SignedFor, Verdict,
};
use crate::upgrade::{
    apply_upgrade, switch_to, MigrateError, ShadowEntry, ShadowOutcome, UpgradeEntry,
    UpgradeOutcome, UpgradeRecord, UpgradeResult,
};
use crate::way_back::{check_order, OnModuleFailure, VersionedUpgrade, WayBack};

/// How an upgrade's module is let in.
pub(super) enum Admit {
    /// An entry written before versions: its signature checked as its
    /// kind says (`bound` `None`: over the hash alone), no version rule,
    /// no way back recorded.
    Legacy {
        signature: Option<ModuleSignature>,
        bound: Option<SignedFor>,
    },
    /// A versioned upgrade (see [`crate::way_back`]).
    Versioned {
        signature: Option<ModuleSignature>,
        signed_for: SignedFor,
        rollback: bool,
        on_failure: OnModuleFailure,
    },
    /// The recorded previous module.
    Previous,
    /// Refused before anything is loaded (a rollback with no way back):
    /// recorded as a rejected swap to `to`.
    Refused { to: ModuleHash, why: MigrateError },
}

impl Replica {
    /// Apply an upgrade entry: check its signature, migrate and swap, or
    /// reject and keep the active module. The same on every node (see
    /// [`crate::upgrade`]).
    /// `bound`: what a version-2 signature was made for (`None`: an entry
    /// written before bound signatures, checked as it was then).
    /// A new cluster's first module ([`crate::upgrade::Genesis`]): swapped
    /// in like an unsigned upgrade while no module has been swapped in yet
    /// (`module_since` 0, which snapshots carry), refused after; so every
    /// replica decides alike, from its state alone.
    pub(super) fn genesis(&mut self, log_id: LogId, g: crate::upgrade::Genesis) -> UpgradeOutcome {
        let active = self.module.hash();
        if self.module_since != 0 {
            return UpgradeOutcome::Rejected {
                module: ModuleHash::of(&g.module),
                replaces: active,
                reason: format!(
                    "the cluster's module was already chosen (active since index {})",
                    self.module_since
                ),
            };
        }
        let up = UpgradeEntry {
            module: g.module,
            replaces: active,
        };
        let outcome = self.upgrade(log_id, up, None, Some(SignedFor::Upgrade));
        if let UpgradeOutcome::Swapped { module, .. } = &outcome {
            self.first_module = Some(*module);
        }
        outcome
    }

    /// The module a new cluster would record as its first, if this
    /// replica's cluster has not recorded one and runs another: `Some`
    /// only while nothing but Raft's own entries has been applied.
    pub fn genesis_needed(&self, first: &[u8]) -> Option<crate::upgrade::Genesis> {
        (self.fresh && self.module.hash() != ModuleHash::of(first)).then(|| {
            crate::upgrade::Genesis {
                module: first.to_vec(),
            }
        })
    }

    pub(super) fn upgrade(
        &mut self,
        log_id: LogId,
        up: UpgradeEntry,
        signature: Option<ModuleSignature>,
        bound: Option<SignedFor>,
    ) -> UpgradeOutcome {
        self.swap(log_id, up, Admit::Legacy { signature, bound })
    }

    /// Apply a versioned upgrade entry: as [`Replica::upgrade`], and the
    /// version must go up unless it is marked as a rollback; a swap
    /// records the module replaced as the way back (see
    /// [`crate::way_back`]).
    pub(super) fn versioned_upgrade(
        &mut self,
        log_id: LogId,
        v: VersionedUpgrade,
    ) -> UpgradeOutcome {
        let admit = Admit::Versioned {
            signature: v.signature,
            signed_for: v.signed_for,
            rollback: v.rollback,
            on_failure: v.on_failure,
        };
        self.swap(log_id, v.upgrade, admit)
    }

    /// Swap in `up`'s module, let in as `admit` says.
    pub(super) fn swap(&mut self, log_id: LogId, up: UpgradeEntry, admit: Admit) -> UpgradeOutcome {
        let started = Instant::now();
        let new_hash = match &admit {
            Admit::Refused { to, .. } => *to,
            _ => ModuleHash::of(&up.module),
        };
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
        let promotes_shadow = self
            .shadow
            .as_ref()
            .is_some_and(|s| s.module.hash() == new_hash);
        let (signature, bound) = match &admit {
            Admit::Legacy { signature, bound } => (*signature, *bound),
            Admit::Versioned {
                signature,
                signed_for,
                ..
            } => (*signature, Some(*signed_for)),
            Admit::Previous | Admit::Refused { .. } => (None, None),
        };
        let checked = match (&admit, bound) {
            (Admit::Refused { why, .. }, _) => Err(why.clone()),
            // Let in by this cluster before (see crate::way_back).
            (Admit::Previous, _) => Ok(()),
            (_, Some(SignedFor::Shadow)) if !promotes_shadow => {
                Err(MigrateError::Signature(SignatureError::NotTheShadow))
            }
            _ => self
                .signed(&new_hash, signature.as_ref(), bound.map(SignedFor::purpose))
                .map(|_| ()),
        };
        // Read before the swap: the version a versioned upgrade must pass.
        let must_pass = match &admit {
            Admit::Versioned {
                rollback: false, ..
            } => Some(self.healthy().and_then(|g| g.version())),
            _ => None,
        };
        let result = checked.and_then(|_| {
            let (module, migrated) =
                apply_upgrade(loader.engine(), &up, active, &mut self.guest, |b| {
                    loader.load(b)
                })?;
            match must_pass {
                Some(Ok(now)) => check_order(&now, &migrated.version)?,
                Some(Err(e)) => return Err(MigrateError::OldSnapshot(e)),
                None => {}
            }
            Ok((module, migrated))
        });
        let outcome = match result {
            Ok((module, mut migrated)) => {
                self.way_back = match &admit {
                    Admit::Versioned { on_failure, .. } => WayBack {
                        previous: Some(self.module.bytes().to_vec()),
                        on_failure: *on_failure,
                        fell_back: self.way_back.fell_back.take(),
                    },
                    // One step back only; and an entry written before
                    // versions leaves what it left then: no way back.
                    Admit::Legacy { .. } | Admit::Previous | Admit::Refused { .. } => WayBack {
                        fell_back: self.way_back.fell_back.take(),
                        ..WayBack::default()
                    },
                };
                let version = migrated.version.clone();
                let hash = migrated.instance.state_hash();
                self.module = module;
                self.guest = migrated.instance;
                self.checkpoint_at(migrated.state);
                self.module_since = log_id.index;
                // A module swapped in is in service, even one that was
                // taken out before (a rollback to it).
                self.failures.out_of_service = None;
                // The capacity's use is unchanged: `migrate` checked that
                // the new module holds exactly the old holdings, key by
                // key (crate::invariants), so counting them again is not
                // needed.
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

    /// Apply a shadow entry; a start carries its module's signature, if
    /// any, bound to its use (`bound`) or, written before bound signatures,
    /// not.
    pub(super) fn shadow_entry(
        &mut self,
        log_id: LogId,
        entry: ShadowEntry,
        signature: Option<ModuleSignature>,
        bound: bool,
    ) -> ShadowOutcome {
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
                let purpose = bound.then_some(Purpose::Shadow);
                let started = self
                    .signed(&hash, signature.as_ref(), purpose)
                    .and_then(|_| switch_to(loader.engine(), loader.load(&bytes), &mut self.guest));
                match started {
                    Ok((module, migrated)) => {
                        let version = migrated.version.clone();
                        tracing::info!(node = self.id, index = log_id.index, module = %hash, %version, "shadow mode started");
                        let mut shadow =
                            Shadow::new(module, migrated.instance, migrated.version, log_id.index);
                        // Kept for the promote, which must carry it.
                        shadow.signature = signature;
                        self.shadow = Some(shadow);
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

    /// What a signature for `purpose` must be bound to here and now: this
    /// cluster, and the active module with the index it became active at.
    /// The same on every node (the cluster id is shared by every member;
    /// the rest is replicated state).
    pub fn binding(&self, purpose: Purpose) -> Binding {
        Binding {
            purpose,
            cluster: self.cluster.bytes(),
            replaces: self.module.hash().0,
            since: self.module_since,
        }
    }

    /// Name the cluster this replica belongs to (a node's, once it opened
    /// its data dir; replay's, from the data dir it reads).
    pub fn bind_cluster(&mut self, cluster: Arc<dyn super::ClusterName>) {
        self.cluster = cluster;
    }

    /// The signature check of an upgrade or shadow start, against the keys
    /// trusted at this entry (see [`crate::signature`]): bound to
    /// `purpose` here, or (`None`, an entry from before bound signatures)
    /// over the module hash alone.
    fn signed(
        &self,
        module: &ModuleHash,
        signature: Option<&ModuleSignature>,
        purpose: Option<Purpose>,
    ) -> Result<Verdict, MigrateError> {
        let verdict = match purpose {
            Some(p) => self
                .module_keys
                .check_bound(module, &self.binding(p), signature),
            None => self.module_keys.check(module, signature),
        }
        .map_err(MigrateError::Signature)?;
        if let Verdict::Verified(key) = verdict {
            tracing::info!(node = self.id, %module, %key, "module signature verified");
        }
        Ok(verdict)
    }

    /// Apply a module-key entry.
    pub(super) fn module_keys_entry(
        &mut self,
        log_id: LogId,
        entry: &KeyEntry,
    ) -> Result<KeyChange, KeyError> {
        let result = self.module_keys.apply(entry);
        match &result {
            Ok(change) => tracing::info!(
                node = self.id,
                index = log_id.index,
                ?entry,
                ?change,
                keys = self.module_keys.len(),
                "module keys changed"
            ),
            Err(e) => {
                tracing::warn!(node = self.id, index = log_id.index, ?entry, reason = %e, "module key entry refused; nothing changed")
            }
        }
        result
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
