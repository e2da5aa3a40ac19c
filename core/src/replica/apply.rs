//! The apply path: committed entries in, one response per entry out, one
//! guest call per run of lock entries (split at module, key and capacity
//! entries and at audit points); where a failed guest call stops the
//! replica.

use super::cannot_run;
use super::failures;
use super::run::Run;
use super::Replica;
use crate::command::{legacy, Command, Outcome};
use crate::engine::EngineError;
use crate::entry::{Entry, LogId, Payload, Request, Response, StoredMembership};
use crate::signature::SignedFor;
use crate::upgrade::ShadowEntry;
use lockd_proto::{AuditKind, PoisonedAt};

impl Replica {
    /// Apply committed entries, in order; one response per entry.
    pub fn apply(
        &mut self,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<Vec<Response>, EngineError> {
        // Stopped: nothing more is applied, not even entries without commands.
        if let Some(at) = self.stopped {
            return Err(EngineError::Poisoned(format!(
                "applying stopped at entries {}..={}",
                at.first, at.last
            )));
        }
        if let Some(c) = &self.cannot_run {
            return Err(EngineError::CannotRun(format!(
                "applying stopped before index {}: {}",
                c.index, c.reason
            )));
        }
        self.heal()?;
        if self.checkpoint.over_cap() {
            return Err(EngineError::Poisoned(
                "the guest's checkpoints keep failing (its `snapshot`): the journal of what it applied since is full".into(),
            ));
        }
        let mut run = Run::default();
        let mut responses: Vec<Option<Response>> = Vec::new();
        for entry in entries {
            let log_id = entry.log_id;
            if matches!(entry.payload, Payload::Normal(_)) {
                self.fresh = false;
            }
            if let Payload::Normal(req) = &entry.payload {
                if let Some(module) = cannot_run::swapped_in(req) {
                    self.flush(&mut run, &mut responses)?;
                    self.runnable_here(log_id, module)?;
                }
            }
            let slot = responses.len();
            if run.entries.is_empty() {
                run.before = self.last_applied;
            }
            match entry.payload {
                Payload::Normal(req @ (Request::Commands(_) | Request::Commands03(_))) => {
                    let groups = req.into_commands().unwrap_or_default();
                    #[cfg(feature = "faults")]
                    let groups = self.forget_grant(log_id, groups);
                    run.push(slot, log_id, groups);
                    responses.push(None);
                }
                Payload::Normal(Request::Lock(commands)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcomes = self.apply_legacy(log_id, &commands)?;
                    self.record_failures(|_| log_id.index);
                    self.maybe_checkpoint();
                    responses.push(Some(Response::Lock(vec![outcomes])));
                }
                Payload::Membership(m) => {
                    self.membership = StoredMembership {
                        log_id: Some(log_id),
                        membership: m,
                    };
                    run.push_empty(slot, log_id);
                    responses.push(None);
                }
                Payload::Blank => {
                    run.push_empty(slot, log_id);
                    responses.push(None);
                }
                Payload::Normal(Request::Genesis(g)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcome = self.genesis(log_id, g);
                    responses.push(Some(Response::Upgrade(outcome)));
                }
                Payload::Normal(Request::Upgrade(up)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcome = self.upgrade(log_id, up, None, Some(SignedFor::Upgrade));
                    responses.push(Some(Response::Upgrade(outcome)));
                }
                Payload::Normal(Request::SignedUpgrade(s)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcome = self.upgrade(log_id, s.upgrade, Some(s.signature), None);
                    responses.push(Some(Response::Upgrade(outcome)));
                }
                Payload::Normal(Request::BoundUpgrade(s)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcome =
                        self.upgrade(log_id, s.upgrade, Some(s.signature), Some(s.signed_for));
                    responses.push(Some(Response::Upgrade(outcome)));
                }
                Payload::Normal(Request::VersionedUpgrade(v)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcome = self.versioned_upgrade(log_id, v);
                    responses.push(Some(Response::Upgrade(outcome)));
                }
                Payload::Normal(Request::Rollback(r)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcome = self.rollback(log_id, r);
                    responses.push(Some(Response::Upgrade(outcome)));
                }
                Payload::Normal(Request::Shadow(sh)) => {
                    self.flush(&mut run, &mut responses)?;
                    let outcome = self.shadow_entry(log_id, sh, None, true);
                    responses.push(Some(Response::Shadow(outcome)));
                }
                Payload::Normal(Request::SignedShadow(s)) => {
                    self.flush(&mut run, &mut responses)?;
                    let start = ShadowEntry::Start { module: s.module };
                    let outcome = self.shadow_entry(log_id, start, Some(s.signature), false);
                    responses.push(Some(Response::Shadow(outcome)));
                }
                Payload::Normal(Request::BoundShadow(s)) => {
                    self.flush(&mut run, &mut responses)?;
                    let start = ShadowEntry::Start { module: s.module };
                    let outcome = self.shadow_entry(log_id, start, Some(s.signature), true);
                    responses.push(Some(Response::Shadow(outcome)));
                }
                Payload::Normal(Request::ModuleKeys(k)) => {
                    self.flush(&mut run, &mut responses)?;
                    let result = self.module_keys_entry(log_id, &k);
                    responses.push(Some(Response::ModuleKeys(result, self.module_keys.clone())));
                }
                Payload::Normal(Request::Precheck(record)) => {
                    self.flush(&mut run, &mut responses)?;
                    let passes = self.keep_precheck(log_id, record);
                    responses.push(Some(Response::Precheck(passes)));
                }
                Payload::Normal(Request::Capacity(bounds)) => {
                    self.flush(&mut run, &mut responses)?;
                    let status = self.set_capacity(bounds);
                    responses.push(Some(Response::Capacity(status)));
                }
            }
            self.last_applied = Some(log_id);
            if self.audit.due(log_id.index) {
                self.flush(&mut run, &mut responses)?;
                self.audit_point(log_id.index);
            }
            if failures::judged_at(log_id.index) {
                self.flush(&mut run, &mut responses)?;
                self.judge_failures(log_id);
            }
        }
        self.flush(&mut run, &mut responses)?;
        Ok(responses
            .into_iter()
            .map(|r| r.unwrap_or(Response::Lock(vec![vec![Outcome::Noop]])))
            .collect())
    }

    /// A log entry in world 0.1's types, on its own (see
    /// [`GuestInstance::apply_legacy`]).
    fn apply_legacy(
        &mut self,
        log_id: LogId,
        commands: &[legacy::Command],
    ) -> Result<Vec<Outcome>, EngineError> {
        match self.isolated_legacy(commands) {
            Ok(outcomes) => {
                let as_v02: Vec<Command> = commands.iter().map(Command::from_legacy).collect();
                self.usage.account(&as_v02, &outcomes);
                if let Some(changes) = self.changes.as_mut() {
                    let (groups, answered) = (
                        std::slice::from_ref(&as_v02),
                        std::slice::from_ref(&outcomes),
                    );
                    crate::changes::of_entry(log_id.index, groups, answered, changes);
                }
                if let Some(shadow) = self.shadow.as_mut() {
                    shadow.feed_legacy(commands, log_id.index, &outcomes);
                }
                Ok(outcomes)
            }
            Err(e) => {
                self.failed.clear();
                let mut alone = Run {
                    before: self.last_applied,
                    ..Run::default()
                };
                alone.entries.push((0, commands.len().max(1), log_id));
                self.stop_at(&alone);
                Err(e)
            }
        }
    }

    /// Apply the waiting run in one guest call and fill its responses.
    fn flush(
        &mut self,
        run: &mut Run,
        responses: &mut [Option<Response>],
    ) -> Result<(), EngineError> {
        // Every entry that is not a lock entry comes after a flush: a guest
        // a failed call outside isolation left (an upgrade's capture, an
        // audit point's hash) is rebuilt before it is used again.
        self.heal()?;
        if run.entries.is_empty() {
            return Ok(());
        }
        let run = std::mem::take(run);
        let span = tracing::debug_span!(
            "apply",
            node = self.id,
            term = run.last.map(|l| l.leader_id.term),
            index = run.last.map(|l| l.index),
            entries = run.entries.len(),
            groups = run.groups.len()
        );
        let _enter = span.enter();
        let (outcomes, seen) = if run.groups.is_empty() {
            (Vec::new(), None)
        } else {
            match self.apply_groups(&run.groups) {
                Ok(applied) => applied,
                Err(e) => {
                    self.failed.clear();
                    self.stop_at(&run);
                    return Err(e);
                }
            }
        };
        self.record_failures(|g| run.index_of(g));
        self.maybe_checkpoint();
        if let Some(shadow) = self.shadow.as_mut() {
            // The shadow sees what the module saw: not the grants the
            // capacity bound refused.
            match &seen {
                None => shadow.feed(&run.groups, |g| run.index_of(g), &outcomes),
                Some((sent, answered)) => shadow.feed(sent, |g| run.index_of(g), answered),
            }
        }
        #[cfg(feature = "faults")]
        self.plant_divergence(run.last);
        if let Some(changes) = self.changes.as_mut() {
            let mut at = 0;
            for &(_, n, log_id) in &run.entries {
                let end = (at + n).min(outcomes.len()).min(run.groups.len());
                crate::changes::of_entry(
                    log_id.index,
                    &run.groups[at..end],
                    &outcomes[at..end],
                    changes,
                );
                at = end;
            }
        }
        let mut outcomes = outcomes.into_iter();
        for (slot, n, _) in run.entries {
            let r = if n == 0 {
                vec![vec![Outcome::Noop]]
            } else {
                outcomes.by_ref().take(n).collect()
            };
            if let Some(place) = responses.get_mut(slot) {
                *place = Some(Response::Lock(r));
            }
        }
        Ok(())
    }

    /// After the guest call of `run` failed: the last entry applied is the
    /// one before the first entry with commands (any earlier entries of the
    /// run carry none and are applied), and the entries with commands are
    /// where applying stopped. Every node therefore reports the same, however
    /// its committed ranges were cut into runs, as long as the failed call
    /// holds the same lock entries (one when the failing command came
    /// alone).
    fn stop_at(&mut self, run: &Run) {
        let Some(at) = run.entries.iter().position(|e| e.1 > 0) else {
            return;
        };
        let first = run.entries[at].2.index;
        let last = run
            .entries
            .iter()
            .rev()
            .find(|e| e.1 > 0)
            .map_or(first, |e| e.2.index);
        self.last_applied = match at.checked_sub(1) {
            Some(before) => Some(run.entries[before].2),
            None => run.before,
        };
        self.stopped = Some(PoisonedAt { first, last });
        tracing::error!(
            node = self.id,
            first,
            last,
            "applying stopped: the guest failed on these entries"
        );
    }

    /// Record the state hash at `index` (and compare the shadow's).
    fn audit_point(&mut self, index: u64) {
        match self.guest.state_hash() {
            Ok(hash) => {
                self.audit
                    .record(index, &hash, self.module.hash(), AuditKind::Interval);
                if let Some(shadow) = self.shadow.as_mut() {
                    shadow.check_hash(&hash);
                }
            }
            Err(e) => {
                tracing::error!(node = self.id, index, error = %e, "state hash failed at an audit point")
            }
        }
    }

    /// Test-only fault: at `LOCKD_FAULT_FORGET_GRANT_AT` or after, this
    /// node applies the first grant under another key, so it loses a
    /// write the other nodes keep (what the simulation's acknowledged-
    /// writes checker must catch).
    #[cfg(feature = "faults")]
    fn forget_grant(&mut self, log_id: LogId, mut groups: Vec<Vec<Command>>) -> Vec<Vec<Command>> {
        let Some((at, node)) = crate::faults::get().forget_grant_at else {
            return groups;
        };
        if self.grant_forgotten || log_id.index < at || node.is_some_and(|n| n != self.id) {
            return groups;
        }
        if let Some(Command::Grant(g)) = groups
            .iter_mut()
            .flatten()
            .find(|c| matches!(c, Command::Grant(_)))
        {
            tracing::warn!(node = self.id, index = log_id.index, key = %g.key, "FAULT: a grant applied under another key");
            g.key = "fault/forgotten".into();
            self.grant_forgotten = true;
        }
        groups
    }

    /// Test-only fault: once the applied index reaches
    /// `LOCKD_FAULT_DIVERGE_AT`, this node applies one extra grant that no
    /// other node applies, so its state hash diverges from there on.
    #[cfg(feature = "faults")]
    fn plant_divergence(&mut self, last: Option<LogId>) {
        let Some((at, node)) = crate::faults::get().diverge_at else {
            return;
        };
        if node.is_some_and(|n| n != self.id) {
            return;
        }
        if last.is_some_and(|l| l.index >= at) && !self.fault_done {
            self.fault_done = true;
            tracing::warn!(node = self.id, "FAULT: planting a state divergence");
            let planted = [vec![crate::command::Command::grant("fault/diverged", 1)]];
            if self.guest.apply(&planted).is_ok() {
                self.checkpoint.record(&planted);
            }
        }
    }
}
