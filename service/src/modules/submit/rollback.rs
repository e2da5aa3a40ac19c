//! The leader's side of a rollback: return to the previous module
//! (`lockd_core::way_back`). The same checks as an upgrade first: the
//! leader's dry run (the migration back must keep every holding) and every
//! voter's pre-check; then one entry without module bytes: every node has
//! them.
//!
//! While the cluster trusts module keys, the rollback route is refused: a
//! key untrusted since the previous module was signed must not be enough
//! to bring it back. The operator signs the previous module for an upgrade
//! over the active one and upgrades to it with `--rollback` (which carries
//! the signature, and every check an upgrade has; docs/security.md,
//! "Signed modules").

use lockd_core::signature::SignedFor;
use lockd_core::upgrade::MigrateError;
use lockd_core::way_back::RollbackEntry;
use lockd_proto::UpgradeReply;

use super::{UpgradeError, Upgrader};
use lockd_replication::Request;

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
        let trusted = self.sm.module_keys().len();
        if trusted > 0 {
            return Err(UpgradeError::RollbackUnsigned { trusted });
        }
        let (timings, verdicts) = if precheck_first {
            let checked = self.precheck(&bytes).await?.0;
            let signed = (None, SignedFor::Upgrade);
            let verdicts = self.quorum_check(&bytes, true, false, signed).await?;
            (Some(checked), Some(verdicts))
        } else {
            (None, None)
        };
        let request = Request::Rollback(RollbackEntry {
            replaces: active,
            to,
        });
        let mut reply = self.answer_swap(request, &active, timings.as_ref()).await;
        if let Ok(r) = reply.as_mut() {
            r.verdicts = verdicts;
        }
        reply
    }
}
