//! The leader's side of a rollback: return to the previous module
//! (`lockd_core::way_back`). The same dry run as an upgrade first (the
//! migration back must keep every holding), then one entry without
//! module bytes: every node has them.

use lockd_core::upgrade::MigrateError;
use lockd_core::way_back::RollbackEntry;
use lockd_proto::UpgradeReply;

use super::{UpgradeError, Upgrader};
use crate::raft::Request;

impl Upgrader {
    /// Return to the module the active one replaced; `precheck_first`
    /// as for an upgrade.
    pub async fn rollback(&self, precheck_first: bool) -> Result<UpgradeReply, UpgradeError> {
        self.check_leader()?;
        self.settle().await?;
        let active = self.sm.module_hash();
        let Some((to, bytes)) = self.sm.previous_module() else {
            return Err(UpgradeError::Refused(MigrateError::NoPrevious));
        };
        let timings = if precheck_first {
            Some(self.precheck(&bytes).await?.0)
        } else {
            None
        };
        let request = Request::Rollback(RollbackEntry {
            replaces: active,
            to,
        });
        self.answer_swap(request, &active, timings.as_ref()).await
    }
}
