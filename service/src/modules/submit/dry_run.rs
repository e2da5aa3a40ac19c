//! The dry run of a module on this node: its size against the node's
//! bound, load and compile, migrate the live state into it, and the
//! version order. The leader's check before proposing, and a voter's
//! answer at the quorum pre-check.

use std::time::Instant;

use lockd_core::upgrade::{migrate, MigrateError};
use lockd_core::way_back::check_order;

use super::{Precheck, UpgradeError, Upgrader};

impl Upgrader {
    /// The dry run: load `module` (compiling it once, for the apply path too)
    /// and migrate the current state into it.
    pub(super) async fn precheck(&self, module: &[u8]) -> Result<(Precheck, String), UpgradeError> {
        let _turn = self
            .prechecks
            .try_acquire()
            .map_err(|_| UpgradeError::Busy(self.id))?;
        let pre = self.sm.precompiler().clone();
        let bytes = module.to_vec();
        let started = Instant::now();
        let loaded = crate::blocking::run(move || {
            pre.prepare(&bytes);
            pre.load(&bytes)
        })
        .await
        .map_err(|e| UpgradeError::Internal(format!("compile task: {e}")))?
        .map_err(|e| UpgradeError::Refused(MigrateError::Load(e)))?;
        let compile_us = started.elapsed().as_micros() as u64;
        let (state, stats) = self
            .sm
            .capture(loaded.world())
            .map_err(UpgradeError::Refused)?;
        let engine = self.sm.engine().clone();
        let started = Instant::now();
        let version = crate::blocking::run(move || {
            migrate(&engine, &loaded, &state, &stats).map(|m| m.version)
        })
        .await
        .map_err(|e| UpgradeError::Internal(format!("migrate task: {e}")))?
        .map_err(UpgradeError::Refused)?;
        let timings = Precheck {
            compile_us,
            migrate_us: started.elapsed().as_micros() as u64,
        };
        Ok((timings, version))
    }

    /// This node's dry run of `module`: its own bound on size, then load,
    /// compile and migrate the live state (`precheck`), then, unless
    /// `rollback`, the version order. The leader's check and a voter's
    /// answer ([`super::precheck`](crate::modules::precheck)) alike.
    pub(in crate::modules) async fn dry_run(
        &self,
        module: &[u8],
        rollback: bool,
    ) -> Result<Precheck, UpgradeError> {
        if let Some(why) = self.sm.precompiler().over_bound(module) {
            return Err(UpgradeError::OverNodeBound(why));
        }
        let (checked, version) = self.precheck(module).await?;
        if !rollback {
            let active = self
                .sm
                .version()
                .map_err(|e| UpgradeError::Refused(MigrateError::OldSnapshot(e)))?;
            check_order(&active, &version).map_err(UpgradeError::Refused)?;
        }
        Ok(checked)
    }
}
