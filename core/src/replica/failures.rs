//! The failures of the cluster's lock modules, as the replicated state
//! records them, and when a module that keeps failing is taken out of
//! service.
//!
//! Every command a module failed on is refused alone (see `isolate.rs`),
//! and each such failure costs a rebuild of the instance: a replay from
//! the last checkpoint, 0.2 s at 100 000 held locks and 2.6 s at 1 000 000
//! (docs/benchmarks.md), during which no node applies anything. A module
//! that fails again and again would hold the whole cluster in rebuilds.
//!
//! **Out of service.** At every [`JUDGED_EVERY`]-th index, once every entry
//! up to it is applied, the replica counts the active module's failures at
//! the indices of the last [`WINDOW`] entries. At [`THRESHOLD`] or more,
//! the module is out of service from the next entry on: every command of a
//! kind it failed on (grant, release, expire, …) is refused `module
//! failed` without entering the module, naming the index, the count and
//! the kinds; every other command is applied as before, the rest of its
//! group included (as the capacity bound takes grants out of a group: a
//! release handed off to a waiter's grant still releases). It
//! stays so until another module is swapped in (an upgrade, or a rollback
//! to the previous one); a module swapped in again starts afresh, its
//! failures from before not counted. Every node decides at the same index from the
//! same replicated failures, whatever its batches, so every node refuses
//! the same commands.
//!
//! Recorded in snapshots from format 7 on; a failure read from format 6
//! has no kinds, and counts towards the threshold without adding one.

use std::collections::VecDeque;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::command::{module_failed, Command, Outcome};
use crate::engine::ModuleHash;

/// Failures kept by name (in status and snapshots); the count is total.
pub const KEEP_FAILURES: usize = 16;

/// Failures of the active module, within [`WINDOW`] entries, that take it
/// out of service.
pub const THRESHOLD: usize = 8;

/// The window of log entries over which [`THRESHOLD`] is counted.
pub const WINDOW: u64 = 1024;

/// The indices at which the threshold is judged: multiples of this. The
/// apply path ends its guest call at each, so that every failure up to it
/// is recorded on every node before it is judged.
pub const JUDGED_EVERY: u64 = 64;

const _: () = assert!(
    THRESHOLD <= KEEP_FAILURES,
    "the threshold counts kept failures"
);

/// The kinds of lock command, as a set (a bit each).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kinds(u16);

/// The kinds' names, by bit.
const KIND_NAMES: [&str; 8] = [
    "grant",
    "release",
    "expire",
    "set-policy",
    "open-session",
    "close-session",
    "expire-session",
    "proclaim",
];

impl Kinds {
    /// The kinds of `commands`.
    pub fn of<'a>(commands: impl IntoIterator<Item = &'a Command>) -> Kinds {
        Kinds(commands.into_iter().fold(0, |set, c| set | Kinds::bit(c)))
    }

    fn bit(c: &Command) -> u16 {
        1 << match c {
            Command::Grant(_) => 0,
            Command::Release(_) => 1,
            Command::Expire(_) => 2,
            Command::SetPolicy(_) => 3,
            Command::OpenSession(_) => 4,
            Command::CloseSession(_) => 5,
            Command::ExpireSession(_) => 6,
            Command::Proclaim(_) => 7,
        }
    }

    /// Whether `c` is of one of these kinds.
    pub fn has(self, c: &Command) -> bool {
        self.0 & Kinds::bit(c) != 0
    }

    pub fn is_empty(self) -> bool {
        self.known() == 0
    }

    /// The bits that name a kind (the disk is not trusted to set no other).
    fn known(self) -> u16 {
        self.0 & ((1 << KIND_NAMES.len()) - 1)
    }

    /// The kinds' names, in a fixed order.
    pub fn names(self) -> Vec<String> {
        KIND_NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.known() & (1 << i) != 0)
            .map(|(_, n)| n.to_string())
            .collect()
    }
}

impl fmt::Display for Kinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names().join(", "))
    }
}

/// A command the module failed on, as the replicated state records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleFailure {
    /// The log index of the command's entry.
    pub index: u64,
    /// The module that failed.
    pub module: ModuleHash,
    /// The command, as [`Command`]'s `Display` shows it.
    pub command: String,
    /// The failure (trap, fuel, memory, a malformed answer).
    pub reason: String,
    /// The kinds of command its group held (empty: read from format 6).
    pub kinds: Kinds,
}

impl ModuleFailure {
    pub fn status(&self) -> lockd_proto::ModuleFailure {
        lockd_proto::ModuleFailure {
            index: self.index,
            module_hash: self.module.to_string(),
            command: self.command.clone(),
            reason: self.reason.clone(),
        }
    }
}

/// A module taken out of service: from the entry after `since`, the
/// commands of `kinds` are refused without entering it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutOfService {
    pub module: ModuleHash,
    /// The index at which the threshold was judged passed.
    pub since: u64,
    /// Its failures within the window then.
    pub failures: u64,
    pub kinds: Kinds,
}

impl OutOfService {
    /// The reason every refused command is given (after `module failed: `).
    pub fn reason(&self) -> String {
        format!(
            "out of service since index {}: the module failed {} times within {WINDOW} entries on {}; replace it",
            self.since, self.failures, self.kinds
        )
    }

    /// What of `groups` still goes to the module: each group without the
    /// commands of these kinds (the groups left empty dropped), and the
    /// place in `groups` of each.
    pub(super) fn split(&self, groups: &[Vec<Command>]) -> (Vec<Vec<Command>>, Vec<usize>) {
        let mut sent = Vec::new();
        let mut places = Vec::new();
        for (g, group) in groups.iter().enumerate() {
            let rest: Vec<Command> = group
                .iter()
                .filter(|c| !self.kinds.has(c))
                .cloned()
                .collect();
            if !rest.is_empty() {
                sent.push(rest);
                places.push(g);
            }
        }
        (sent, places)
    }

    /// The outcomes of `groups`, from the module's `answered` for what
    /// [`OutOfService::split`] sent (at `places`): `module failed`, with
    /// [`OutOfService::reason`], for each command it kept back.
    pub(super) fn merge(
        &self,
        groups: &[Vec<Command>],
        places: &[usize],
        answered: Vec<Vec<Outcome>>,
    ) -> Vec<Vec<Outcome>> {
        let refused = module_failed(&self.reason());
        let mut answered = places.iter().copied().zip(answered).peekable();
        groups
            .iter()
            .enumerate()
            .map(|(g, group)| {
                let mut own = match answered.peek() {
                    Some((at, _)) if *at == g => {
                        answered.next().map(|(_, o)| o).unwrap_or_default()
                    }
                    _ => Vec::new(),
                }
                .into_iter();
                group
                    .iter()
                    .map(|c| match self.kinds.has(c) {
                        true => refused.clone(),
                        false => own.next().unwrap_or(Outcome::Noop),
                    })
                    .collect()
            })
            .collect()
    }

    pub fn status(&self) -> lockd_proto::ModuleOutOfService {
        lockd_proto::ModuleOutOfService {
            module_hash: self.module.to_string(),
            since: self.since,
            failures: self.failures,
            kinds: self.kinds.names(),
            reason: self.reason(),
        }
    }
}

/// The failures of the cluster's modules: how many, the last
/// [`KEEP_FAILURES`], and a module out of service. Replicated (applied
/// identically, kept in snapshots).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureLog {
    pub total: u64,
    pub recent: VecDeque<ModuleFailure>,
    pub out_of_service: Option<OutOfService>,
}

impl FailureLog {
    pub(super) fn push(&mut self, failure: ModuleFailure) {
        self.total += 1;
        self.recent.push_back(failure);
        while self.recent.len() > KEEP_FAILURES {
            self.recent.pop_front();
        }
    }

    /// The out-of-service record that holds for `active`, if any.
    pub fn refusing(&self, active: &ModuleHash) -> Option<&OutOfService> {
        self.out_of_service
            .as_ref()
            .filter(|o| &o.module == active && !o.kinds.is_empty())
    }

    /// Judge the threshold at `index` (a multiple of [`JUDGED_EVERY`],
    /// every entry up to it applied) for the `active` module, active since
    /// `since` (its failures before it was last swapped in do not count);
    /// the record when it has just been taken out of service.
    pub(super) fn judge(
        &mut self,
        index: u64,
        active: ModuleHash,
        since: u64,
    ) -> Option<&OutOfService> {
        if self.refusing(&active).is_some() {
            return None;
        }
        let within: Vec<&ModuleFailure> = self
            .recent
            .iter()
            .filter(|f| f.module == active && f.index > since && f.index + WINDOW > index)
            .collect();
        let kinds = Kinds(within.iter().fold(0, |set, f| set | f.kinds.known()));
        if within.len() < THRESHOLD || kinds.is_empty() {
            return None;
        }
        self.out_of_service = Some(OutOfService {
            module: active,
            since: index,
            failures: within.len() as u64,
            kinds,
        });
        self.out_of_service.as_ref()
    }
}

/// Whether `index` is one at which the threshold is judged.
pub fn judged_at(index: u64) -> bool {
    index > 0 && index.is_multiple_of(JUDGED_EVERY)
}

/// Whether one of `first..=last` is judged (without walking the range).
pub fn judged_within(first: u64, last: u64) -> bool {
    first <= last && last / JUDGED_EVERY > first.saturating_sub(1) / JUDGED_EVERY
}

/// Format 6's record, before kinds and out of service (read, never
/// written).
#[derive(Deserialize)]
pub(crate) struct FailureLogV6 {
    total: u64,
    recent: VecDeque<ModuleFailureV6>,
}

#[derive(Deserialize)]
struct ModuleFailureV6 {
    index: u64,
    module: ModuleHash,
    command: String,
    reason: String,
}

impl FailureLogV6 {
    pub(crate) fn current(self) -> FailureLog {
        FailureLog {
            total: self.total,
            recent: self
                .recent
                .into_iter()
                .map(|f| ModuleFailure {
                    index: f.index,
                    module: f.module,
                    command: f.command,
                    reason: f.reason,
                    kinds: Kinds::default(),
                })
                .collect(),
            out_of_service: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn judged_within_agrees_with_walking_the_range() {
        for first in 0..300u64 {
            for last in first.saturating_sub(2)..first + 200 {
                let walked = first <= last && (first..=last).any(super::judged_at);
                assert_eq!(
                    super::judged_within(first, last),
                    walked,
                    "{first}..={last}"
                );
            }
        }
    }
}
