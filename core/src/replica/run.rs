//! [`Run`]: the lock command groups of consecutive committed entries,
//! waiting for one guest call.

use crate::command::Command;
use crate::entry::LogId;

/// Lock command groups of consecutive entries, waiting for one guest call.
#[derive(Default)]
pub(super) struct Run {
    pub(super) groups: Vec<Vec<Command>>,
    /// Per entry: (response slot, number of groups (0 = answered Noop),
    /// log id).
    pub(super) entries: Vec<(usize, usize, LogId)>,
    /// The last entry applied before the run's first.
    pub(super) before: Option<LogId>,
    pub(super) last: Option<LogId>,
}

impl Run {
    pub(super) fn push(&mut self, slot: usize, log_id: LogId, groups: Vec<Vec<Command>>) {
        self.entries.push((slot, groups.len(), log_id));
        self.groups.extend(groups);
        self.last = Some(log_id);
    }

    pub(super) fn push_empty(&mut self, slot: usize, log_id: LogId) {
        self.entries.push((slot, 0, log_id));
        self.last = Some(log_id);
    }

    /// The log index of the `i`-th group (only looked up for the few
    /// shadow differences kept as examples).
    pub(super) fn index_of(&self, mut i: usize) -> u64 {
        for &(_, n, log_id) in &self.entries {
            if i < n {
                return log_id.index;
            }
            i -= n;
        }
        0
    }
}
