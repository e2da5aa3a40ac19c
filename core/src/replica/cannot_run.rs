//! Cannot run: a module the cluster swaps in that this node cannot.
//!
//! A swap is decided alike on every node, from the state and the entry:
//! a module that does not load, does not migrate or breaks an invariant is
//! rejected everywhere. But some reasons are a node's own — a
//! `--max-module-bytes` set lower on it, an engine that cannot compile
//! what its peers compile (a rolling binary upgrade) — and a node that
//! rejected the swap for one of those would go on with another module
//! than its peers: a split cluster.
//!
//! So before a swap, a node checks that it can run the module:
//!
//! * a module over this node's own bound ([`crate::precompile::Precompiler::over_bound`])
//!   is one it cannot run, whatever the log says;
//! * a module the last pre-check record admits ([`crate::precheck`]: a
//!   quorum of voters loaded and dry-ran it) must load here; if it does
//!   not, the failure is this node's.
//!
//! Either way the node stops applying *before* the swap's entry (its
//! applied index stays below it; a snapshot whose module is over the
//! bound is not installed, [`Replica::runnable_snapshot`]), records why (status'
//! `module_cannot_run`), and refuses every later `apply`: the host's Raft
//! stops on the error, so the node neither applies, votes nor leads until
//! it is restarted with what can run the module (a higher bound, another
//! binary); it then replays the log to the swap and goes on. A load
//! failure of a module no record admits stays a rejection, decided alike
//! everywhere, as before.

use super::Replica;
use crate::engine::{EngineError, ModuleHash};
use crate::entry::{LogId, Request};
use crate::precheck::{PrecheckRecord, PrecheckSeen};

/// The module an entry swaps in, if it carries one (a rollback returns to
/// a module this cluster ran, and carries none).
pub(super) fn swapped_in(req: &Request) -> Option<&[u8]> {
    match req {
        Request::Upgrade(_)
        | Request::SignedUpgrade(_)
        | Request::BoundUpgrade(_)
        | Request::VersionedUpgrade(_)
        | Request::Genesis(_) => req.module_bytes(),
        _ => None,
    }
}

impl Replica {
    /// Keep a pre-check record (bounded); whether it lets its module in.
    pub(super) fn keep_precheck(&mut self, log_id: LogId, record: PrecheckRecord) -> bool {
        let record = record.bounded();
        let passes = record.passes();
        self.precheck = Some(PrecheckSeen {
            index: log_id.index,
            record,
        });
        passes
    }

    /// Whether this node can run `module`, swapped in at `log_id`; if not,
    /// stop here (see the module docs).
    pub(super) fn runnable_here(
        &mut self,
        log_id: LogId,
        module: &[u8],
    ) -> Result<(), EngineError> {
        let hash = ModuleHash::of(module);
        if hash == self.module.hash() {
            return Ok(());
        }
        let mut why = self.over_bound(module);
        let admitted = self
            .precheck
            .as_ref()
            .is_some_and(|p| p.record.admits(&hash));
        if why.is_none() && admitted {
            // Prepared, so the swap's own load takes this one's result.
            self.loader.prepare(module);
            if let Err(e) = self.loader.load(module) {
                why = Some(format!(
                    "it does not load here, though a quorum of voters loaded it: {e}"
                ));
            }
        }
        match why {
            Some(reason) => Err(self.stop_for(log_id.index, hash, reason)),
            None => Ok(()),
        }
    }

    /// Whether this node can run the active module of a snapshot taken at
    /// `index` that it is about to install (the module its cluster runs):
    /// one over its own bound it cannot, and it stops without installing.
    pub fn runnable_snapshot(&mut self, index: u64, module: &[u8]) -> Result<(), EngineError> {
        match self.over_bound(module) {
            Some(reason) => Err(self.stop_for(index, ModuleHash::of(module), reason)),
            None => Ok(()),
        }
    }

    /// Why `module` is over this node's own bound, if it is.
    fn over_bound(&self, module: &[u8]) -> Option<String> {
        #[cfg(feature = "faults")]
        if crate::faults::get().ignore_module_bound {
            return None;
        }
        self.loader.over_bound(module)
    }

    /// Stop applying at `index`, for `module`, because of `reason`.
    fn stop_for(&mut self, index: u64, module: ModuleHash, reason: String) -> EngineError {
        tracing::error!(node = self.id, index, %module, %reason, "this node cannot run the module its cluster runs; it stops applying");
        self.cannot_run = Some(lockd_proto::ModuleCannotRun {
            index,
            module_hash: module.to_string(),
            reason: reason.clone(),
        });
        EngineError::CannotRun(format!("module {module} at index {index}: {reason}"))
    }

    /// The last pre-check record, with its index.
    pub fn precheck(&self) -> Option<&PrecheckSeen> {
        self.precheck.as_ref()
    }

    /// The module this node cannot run, if it stopped for one.
    pub fn cannot_run(&self) -> Option<&lockd_proto::ModuleCannotRun> {
        self.cannot_run.as_ref()
    }
}
