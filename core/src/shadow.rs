//! Shadow mode: a candidate module beside the active one.
//!
//! A shadow is started by a committed [`crate::upgrade::ShadowEntry::Start`], so every
//! node starts it at the same index from the same state (the active module's
//! snapshot, migrated by [`crate::upgrade::migrate`]). From then on every committed
//! batch is applied to the active module — whose outcomes are the real ones
//! — and then to the shadow, whose outcomes are only compared: lock state,
//! tokens and clients never see them. At every audit point the two state
//! hashes are compared too. A shadow that fails (trap, fuel, memory) is
//! marked failed and fed nothing more; the active module is unaffected.
//!
//! The shadow lives in memory only: it is not part of Raft snapshots, so a
//! node that restores a snapshot taken after the shadow started runs
//! without it (start it again). Promotion goes through a normal upgrade
//! entry with the shadow's bytes, carrying the signature the shadow was
//! started with (kept here, see [`crate::signature`]).

use lockd_proto::{OutcomeDiff, ShadowStatus};

use crate::command::{legacy, Command, Outcome};
use crate::engine::EngineError;
use crate::engine::{GuestInstance, GuestModule};
use crate::signature::ModuleSignature;

/// Differing outcomes kept as examples.
const EXAMPLES: usize = 16;

pub struct Shadow {
    pub module: GuestModule,
    pub instance: GuestInstance,
    /// The signature its start entry carried: a promote carries it on.
    pub signature: Option<ModuleSignature>,
    /// Identity, counters and examples, in the form status reports them.
    status: ShadowStatus,
}

impl Shadow {
    pub fn new(
        module: GuestModule,
        instance: GuestInstance,
        version: String,
        since_index: u64,
    ) -> Shadow {
        let status = ShadowStatus {
            module_hash: module.hash().to_string(),
            module_version: version,
            since_index,
            commands_compared: 0,
            outcome_diffs: 0,
            hash_checks: 0,
            hash_diffs: 0,
            failed: None,
            examples: Vec::new(),
            module_world: Some(module.world().number().to_string()),
        };
        Shadow {
            module,
            instance,
            signature: None,
            status,
        }
    }

    pub fn failed(&self) -> Option<&str> {
        self.status.failed.as_deref()
    }

    /// Feed the groups the active module just applied (`index_of(g)` is
    /// the log index of `groups[g]`) and compare outcomes.
    pub fn feed(
        &mut self,
        groups: &[Vec<Command>],
        index_of: impl Fn(usize) -> u64,
        active: &[Vec<Outcome>],
    ) {
        if self.status.failed.is_some() || groups.is_empty() {
            return;
        }
        let result = self.instance.apply(groups);
        let commands = groups
            .iter()
            .enumerate()
            .flat_map(|(g, cs)| cs.iter().map(move |c| (g, c)));
        self.compare(
            commands.map(|(g, c)| (index_of(g), c as &dyn std::fmt::Display)),
            active.iter().flatten(),
            result.map(|o| o.into_iter().flatten().collect()),
        );
    }

    /// Feed a log entry in world 0.1's types (see
    /// [`GuestInstance::apply_legacy`]).
    pub fn feed_legacy(&mut self, commands: &[legacy::Command], index: u64, active: &[Outcome]) {
        if self.status.failed.is_some() || commands.is_empty() {
            return;
        }
        let result = self.instance.apply_legacy(commands);
        self.compare(
            commands
                .iter()
                .map(|c| (index, c as &dyn std::fmt::Display)),
            active.iter(),
            result,
        );
    }

    fn compare<'a>(
        &mut self,
        commands: impl Iterator<Item = (u64, &'a dyn std::fmt::Display)>,
        active: impl Iterator<Item = &'a Outcome>,
        shadow: Result<Vec<Outcome>, EngineError>,
    ) {
        let outcomes = match shadow {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(module = %self.module.hash(), error = %e, "shadow module failed; it gets no more input");
                self.status.failed = Some(e.to_string());
                return;
            }
        };
        let st = &mut self.status;
        for (((index, command), a), s) in commands.zip(active).zip(&outcomes) {
            st.commands_compared += 1;
            if a != s {
                st.outcome_diffs += 1;
                if st.examples.len() < EXAMPLES {
                    st.examples.push(OutcomeDiff {
                        index,
                        command: command.to_string(),
                        active: a.to_string(),
                        candidate: s.to_string(),
                    });
                }
            }
        }
    }

    /// Compare the shadow's state hash with the active module's.
    pub fn check_hash(&mut self, active: &[u8; 32]) {
        if self.status.failed.is_some() {
            return;
        }
        match self.instance.state_hash() {
            Ok(h) => {
                self.status.hash_checks += 1;
                if &h != active {
                    self.status.hash_diffs += 1;
                }
            }
            Err(e) => self.status.failed = Some(e.to_string()),
        }
    }

    pub fn status(&self) -> ShadowStatus {
        self.status.clone()
    }
}
