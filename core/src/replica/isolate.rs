//! Trap isolation: a guest call that fails fails its commands, not the
//! replica.
//!
//! The replica keeps a `Checkpoint` (`checkpoint.rs`) of its guest: the state at some
//! point (the module's `snapshot()` bytes, or nothing for an empty table)
//! and a journal of every batch the instance applied since. When an apply
//! call fails — a trap, the fuel budget, the memory limit, a malformed
//! answer — the instance is rebuilt to the state before that call (a new
//! instance, the checkpoint restored, the journal replayed) and the
//! call's groups are applied one at a time, each in a call of its own
//! with the full budget (a group is what the module decides together,
//! so it is never split). Every command of a group that fails alone is
//! answered `rejected(unsupported("module failed: …"))` (the host's
//! reason, [`crate::command::module_failed`], naming only the kind of
//! failure and the call; HTTP and the native protocol answer it with the
//! code `module_failed`), the instance is rebuilt again, and the next
//! group goes on. Every failure is recorded in the replicated
//! state ([`super::failures::FailureLog`]: which module, which index,
//! which command, why); a module that keeps failing is taken out of
//! service for the kinds of command it fails on (`failures.rs`).
//!
//! Why every node answers alike: whether a group fails alone depends on
//! the state before it, which every node shares, and not on how a node's
//! committed ranges were cut into calls — a call that fails only because
//! it carried many groups falls back to one group per call, where
//! nothing fails. A trap or a runaway loop fails everywhere. A stack
//! overflow is not isolated: its depth depends on the machine. Fuel and
//! memory also depend slightly on the instance's history (a restored table
//! is laid out differently from one built entry by entry): a command
//! within that noise of a budget could fail on one node only, which the
//! determinism audit reports; the reference modules stay at least ten
//! times inside both budgets (docs/configuration.md, "Limits").
//!
//! A failure that rebuilding cannot get past (the checkpoint's restore or
//! the journal's replay fails, or the host's own error) still stops the
//! replica, as before isolation existed.
//!
//! Cost when nothing fails: the journal's copy of each batch, and a new
//! checkpoint (one `snapshot()`) whenever the journal's commands, counted
//! as the log counts them ([`Command::wire_bytes`]), pass the checkpoint's
//! size and `checkpoint::MIN_JOURNAL_BYTES`: amortised, each applied byte is copied
//! once and serialised about once. Memory: the checkpoint (the state's
//! size) and the journal (as Rust values, a few times its log size).

use std::sync::Arc;

use super::checkpoint::Checkpoint;
use super::failures::{Kinds, ModuleFailure};
use super::Replica;
use crate::command::{legacy, module_failed, unforged, Command, Outcome};
use crate::engine::{EngineError, GuestInstance};

/// Whether `e` is the module's failure (isolated) rather than the host's.
fn is_module_fault(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::Trap { .. }
            | EngineError::FuelExhausted { .. }
            | EngineError::MemoryLimit { .. }
            | EngineError::OutcomeCount { .. }
            | EngineError::Poisoned(_)
    )
}

/// The failure as the replicated state records it, from the kind of
/// failure and the node's settings alone (the same on every node, whatever
/// wasmtime says in its own words); `None`: not isolated (a stack
/// overflow, whose depth differs between machines, and the host's own
/// errors stop the replica as before).
fn failure_kind(e: &EngineError) -> Option<String> {
    match e {
        EngineError::Trap { call, .. } => Some(format!("the module trapped in `{call}`")),
        EngineError::FuelExhausted { call, budget } => Some(format!(
            "the module ran out of fuel in `{call}` (budget {budget} per call)"
        )),
        EngineError::MemoryLimit { call, limit } => Some(format!(
            "the module passed the memory limit of {limit} bytes in `{call}`"
        )),
        EngineError::OutcomeCount { want, got } => Some(format!(
            "the module answered {got} outcomes for {want} commands"
        )),
        _ => None,
    }
}

/// How a failed group is named in the record: its first commands, and
/// how many more.
fn describe(commands: impl ExactSizeIterator<Item = String>) -> String {
    const SHOWN: usize = 3;
    let n = commands.len();
    let mut out: Vec<String> = commands.take(SHOWN).collect();
    if n > SHOWN {
        out.push(format!("and {} more", n - SHOWN));
    }
    out.join("; ")
}

/// A group of the current run that failed: its place in the run, what it
/// held and why.
pub(super) struct Failed {
    pub(super) group: usize,
    pub(super) command: String,
    pub(super) reason: String,
    pub(super) kinds: Kinds,
}

impl Replica {
    /// Apply `groups` (the `first`-th group of the run onwards) on the
    /// guest, isolating a failure: one outcome list per group. After a
    /// failed call every group goes alone (a group is one entry for the
    /// module, which decides its commands together: a grant refused busy
    /// keeps the later grants of its key in the group out); a group that
    /// fails alone has every command answered `module failed`, and is
    /// noted for [`Replica::record_failures`].
    ///
    /// While the module is out of service (`failures.rs`), the commands of
    /// the kinds it failed on are refused without entering it, and the
    /// rest of each group is applied as above (as the capacity bound takes
    /// a group's grants out): a release handed off to a waiter's grant
    /// still releases.
    pub(super) fn isolated_apply(
        &mut self,
        groups: &[Vec<Command>],
        first: usize,
    ) -> Result<Vec<Vec<Outcome>>, EngineError> {
        let Some(off) = self.failures.refusing(&self.module.hash()).cloned() else {
            return self.in_service(groups, |g| first + g);
        };
        let (sent, places) = off.split(groups);
        let answered = if sent.is_empty() {
            Vec::new()
        } else {
            self.in_service(&sent, |i| first + places[i])?
        };
        Ok(off.merge(groups, &places, answered))
    }

    /// [`Replica::isolated_apply`] for groups the module is in service for;
    /// `place` gives a group's place in the run.
    fn in_service(
        &mut self,
        groups: &[Vec<Command>],
        place: impl Fn(usize) -> usize,
    ) -> Result<Vec<Vec<Outcome>>, EngineError> {
        let e = match self.guest.apply(groups) {
            Ok(out) => {
                self.checkpoint.record(groups);
                return Ok(out
                    .into_iter()
                    .map(|g| g.into_iter().map(unforged).collect())
                    .collect());
            }
            Err(e) if is_module_fault(&e) => e,
            Err(e) => return Err(e),
        };
        tracing::warn!(node = self.id, error = %e, groups = groups.len(), "a guest call failed; applying its groups one at a time");
        self.rebuild()?;
        let mut out = Vec::with_capacity(groups.len());
        for (g, group) in groups.iter().enumerate() {
            let alone = std::slice::from_ref(group);
            match self.guest.apply(alone) {
                Ok(mut o) => {
                    self.checkpoint.record(alone);
                    let o = o.pop().unwrap_or_default();
                    out.push(o.into_iter().map(unforged).collect());
                }
                Err(e) => {
                    let command = describe(group.iter().map(Command::to_string));
                    let kinds = Kinds::of(group);
                    out.push(self.failed_alone(e, place(g), command, kinds, group.len())?);
                }
            }
        }
        Ok(out)
    }

    /// A world-0.1 log entry's commands (one group), isolated as
    /// [`Replica::isolated_apply`] does.
    pub(super) fn isolated_legacy(
        &mut self,
        commands: &[legacy::Command],
    ) -> Result<Vec<Outcome>, EngineError> {
        let Some(off) = self.failures.refusing(&self.module.hash()).cloned() else {
            return self.legacy_in_service(commands);
        };
        // One group, kept back and answered as a group of the current
        // world would be; what goes to the module goes in its own types.
        let group = [commands
            .iter()
            .map(Command::from_legacy)
            .collect::<Vec<_>>()];
        let sent: Vec<legacy::Command> = commands
            .iter()
            .zip(&group[0])
            .filter(|(_, c)| !off.kinds.has(c))
            .map(|(l, _)| l.clone())
            .collect();
        let (places, answered) = if sent.is_empty() {
            (&[][..], Vec::new())
        } else {
            (&[0][..], vec![self.legacy_in_service(&sent)?])
        };
        Ok(off
            .merge(&group, places, answered)
            .pop()
            .unwrap_or_default())
    }

    fn legacy_in_service(
        &mut self,
        commands: &[legacy::Command],
    ) -> Result<Vec<Outcome>, EngineError> {
        let e = match self.guest.apply_legacy(commands) {
            Ok(out) => {
                self.checkpoint.record_legacy(commands);
                return Ok(out.into_iter().map(unforged).collect());
            }
            Err(e) if is_module_fault(&e) => e,
            Err(e) => return Err(e),
        };
        tracing::warn!(node = self.id, error = %e, "a legacy entry failed; again on a rebuilt instance");
        self.rebuild()?;
        match self.guest.apply_legacy(commands) {
            Ok(out) => {
                self.checkpoint.record_legacy(commands);
                Ok(out.into_iter().map(unforged).collect())
            }
            Err(e) => {
                let command = describe(commands.iter().map(legacy::Command::to_string));
                let kinds = Kinds::of(
                    &commands
                        .iter()
                        .map(Command::from_legacy)
                        .collect::<Vec<_>>(),
                );
                self.failed_alone(e, 0, command, kinds, commands.len())
            }
        }
    }

    /// A group (the run's `group`-th, `command` as recorded, of `kinds`,
    /// `n` commands) failed alone with `e`: noted, the instance rebuilt,
    /// and each of its commands answered `module failed`; `e` itself when
    /// it is not the module's to isolate.
    fn failed_alone(
        &mut self,
        e: EngineError,
        group: usize,
        command: String,
        kinds: Kinds,
        n: usize,
    ) -> Result<Vec<Outcome>, EngineError> {
        let Some(reason) = failure_kind(&e) else {
            return Err(e);
        };
        tracing::warn!(node = self.id, error = %e, "a group failed alone");
        let answer = module_failed(&reason);
        self.failed.push(Failed {
            group,
            command,
            reason,
            kinds,
        });
        self.rebuild()?;
        Ok(vec![answer; n])
    }

    /// Record the failures noted since the last call; `index_of` gives the
    /// log index of a group of the run.
    pub(super) fn record_failures(&mut self, index_of: impl Fn(usize) -> u64) {
        let module = self.module.hash();
        for f in std::mem::take(&mut self.failed) {
            let index = index_of(f.group);
            tracing::error!(node = self.id, index, module = %module, command = %f.command, reason = %f.reason, "the lock module failed on a command; it was refused, the rest applied");
            self.failures.push(ModuleFailure {
                index,
                module,
                command: f.command,
                reason: f.reason,
                kinds: f.kinds,
            });
        }
    }

    /// Judge, at `index` (every entry up to it applied), whether the
    /// active module has failed often enough to be taken out of service
    /// (`failures.rs`).
    pub(super) fn judge_failures(&mut self, log_id: crate::entry::LogId) {
        let (index, module) = (log_id.index, self.module.hash());
        let Some(off) = self.failures.judge(index, module, self.module_since) else {
            return;
        };
        tracing::error!(node = self.id, index, module = %module, kinds = %off.kinds, failures = off.failures, "the lock module is out of service for the kinds of command it keeps failing on");
        if self.way_back.falls_back() {
            self.fall_back(log_id);
        }
    }

    /// Replace the instance by one rebuilt from the checkpoint.
    pub(super) fn rebuild(&mut self) -> Result<(), EngineError> {
        let started = std::time::Instant::now();
        let guest = self
            .checkpoint
            .rebuild(self.loader.engine(), &self.module)?;
        self.guest = guest;
        self.rebuilds += 1;
        tracing::info!(
            node = self.id,
            took_ms = started.elapsed().as_millis() as u64,
            "guest instance rebuilt from its checkpoint"
        );
        Ok(())
    }

    /// The instance, rebuilt first if a failed call left it unusable
    /// (what every read goes through).
    pub(super) fn healthy(&mut self) -> Result<&mut GuestInstance, EngineError> {
        self.heal()?;
        Ok(&mut self.guest)
    }

    /// An instance a read left failed is rebuilt before anything else
    /// uses it (reads are not replicated: one node's failed read must not
    /// stop its replica). A stopped replica is left as it stopped.
    pub(super) fn heal(&mut self) -> Result<(), EngineError> {
        if self.stopped.is_none() && self.guest.poisoned().is_some() {
            self.rebuild()?;
        }
        Ok(())
    }

    /// Take a new checkpoint when the journal has grown enough. A failure
    /// here is the module's and leaves the old checkpoint in place.
    pub(super) fn maybe_checkpoint(&mut self) {
        if !self.checkpoint.due() {
            return;
        }
        match self.guest.snapshot() {
            Ok(state) => self.checkpoint = Checkpoint::at(state),
            Err(e) => {
                self.checkpoint.back_off();
                tracing::warn!(node = self.id, error = %e, "a checkpoint of the guest failed; keeping the last one");
                let _ = self.heal();
            }
        }
    }

    /// A new checkpoint of the instance as it is now (after it was
    /// replaced by one whose state is `state`).
    pub(super) fn checkpoint_at(&mut self, state: impl Into<Arc<[u8]>>) {
        self.checkpoint = Checkpoint::at(state);
    }
}
