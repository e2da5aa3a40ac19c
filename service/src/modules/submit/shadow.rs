//! The leader's side of shadow mode: start a candidate beside the active
//! module (signature and dry run first, as for an upgrade), promote it (an
//! upgrade with its bytes and the signature it was started with), or stop
//! it.

use lockd_proto::signature::Purpose;
use lockd_proto::{UpgradeReply, UpgradeResult};

use super::{rejected, reply_at, How, UpgradeError, Upgrader};
use lockd_core::signature::{ModuleSignature, SignedFor, SignedShadowStart};
use lockd_core::upgrade::{ShadowEntry, ShadowOutcome};
use lockd_replication::{Request, Response};

impl Upgrader {
    /// Start `module` as a shadow on every node, from the state at the entry.
    pub async fn shadow_start(
        &self,
        module: Vec<u8>,
        signature: Option<ModuleSignature>,
        precheck_first: bool,
    ) -> Result<UpgradeReply, UpgradeError> {
        self.check_leader()?;
        self.settle().await?;
        let timings = if precheck_first {
            self.check_signature(&module, signature.as_ref(), Purpose::Shadow)?;
            let checked = self.precheck(&module).await?.0;
            // A shadow is no upgrade: a refusal always blocks it.
            let signed = (signature, lockd_core::signature::SignedFor::Shadow);
            Some((
                checked,
                self.quorum_check(&module, true, false, signed).await?,
            ))
        } else {
            None
        };
        let (timings, verdicts) = timings.unzip();
        let active = self.sm.module_hash();
        let request = match signature {
            Some(signature) => Request::BoundShadow(SignedShadowStart { module, signature }),
            None => Request::Shadow(ShadowEntry::Start { module }),
        };
        let (index, response) = self.propose(request).await?;
        let mut reply = reply_at(index, &active, timings.as_ref());
        match response {
            Response::Shadow(ShadowOutcome::Started { module, version }) => {
                reply.result = UpgradeResult::ShadowStarted;
                reply.module_hash = module.to_string();
                reply.version = Some(version);
                reply.verdicts = verdicts;
                Ok(reply)
            }
            Response::Shadow(ShadowOutcome::Failed { module, reason }) => {
                Err(rejected(reply, module, reason))
            }
            other => Err(UpgradeError::Internal(format!(
                "a shadow entry was answered {other:?}"
            ))),
        }
    }

    /// Promote the running shadow: a normal upgrade entry with its bytes
    /// and the signature it was started with.
    pub async fn shadow_promote(&self) -> Result<UpgradeReply, UpgradeError> {
        self.check_leader()?;
        let shadow = self.sm.shadow_module().ok_or(UpgradeError::NoShadow)?;
        if let Some(f) = shadow.failed {
            return Err(UpgradeError::ShadowFailed(f));
        }
        self.upgrade(
            shadow.bytes.to_vec(),
            None,
            shadow.signature,
            true,
            SignedFor::Shadow,
            How::default(),
        )
        .await
    }

    /// Stop shadow mode on every node.
    pub async fn shadow_abort(&self) -> Result<UpgradeReply, UpgradeError> {
        self.check_leader()?;
        if self.sm.shadow_module().is_none() {
            return Err(UpgradeError::NoShadow);
        }
        let active = self.sm.module_hash();
        let (index, response) = self.propose(Request::Shadow(ShadowEntry::Stop)).await?;
        let module = match response {
            Response::Shadow(ShadowOutcome::Stopped { module }) => module,
            other => {
                return Err(UpgradeError::Internal(format!(
                    "a shadow entry was answered {other:?}"
                )))
            }
        };
        Ok(UpgradeReply {
            result: UpgradeResult::ShadowStopped,
            module_hash: module.map(|m| m.to_string()).unwrap_or_default(),
            ..reply_at(index, &active, None)
        })
    }
}
