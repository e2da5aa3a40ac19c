//! The cluster's capacity bound, enforced at apply: the most holdings and
//! the most key bytes the lock table may keep.
//!
//! Why the host enforces it and not the module: the bound protects the
//! guest's fuel and memory budgets (a table too big to snapshot or hash
//! within them would stop every replica at the same index), so it must hold
//! whatever module is active, of either world.
//!
//! # The rule, per group (one world-0.2 entry)
//!
//! Let `held` and `key_bytes` be the exact use after the previous group,
//! and `G` and `B` the number of grants in the group and their key bytes.
//! If `held + G > max_held` or `key_bytes + B > max_key_bytes`, every grant
//! of the group is answered `rejected(quota("cluster capacity: ..."))` by
//! the host and only the group's other commands go to the module;
//! otherwise the whole group goes. A grant that would have been refused
//! anyway, or that repeats a holding, counts as well: the bound is checked
//! before the module answers.
//!
//! The rule depends on the exact use before each group, never on how the
//! committed ranges were cut into guest calls, so every node answers alike.
//! To keep one guest call per range in the common case, [`plan`] finds the
//! first group at which the *upper bound* of the use (the use at the call's
//! start plus every grant before it) could break the bound; only there is
//! the call split and the use read exactly. It also cuts a long range into
//! calls of at most [`MAX_COMMANDS_PER_CALL`] commands.

use lockd_proto::CapacityStatus;
use serde::{Deserialize, Serialize};

use super::Replica;
use crate::command::{Command, Outcome, Reason};
use crate::engine::EngineError;

pub use crate::command::{is_capacity, CAPACITY_REASON};

/// The cluster's capacity bounds as the log and snapshots carry them (the
/// server's format; the API's [`lockd_proto::Capacity`] has the same
/// fields and converts both ways).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capacity {
    /// The most holdings the cluster keeps (a shared or semaphore key
    /// counts each holder).
    pub max_held: u64,
    /// The most key bytes those holdings may have together.
    pub max_key_bytes: u64,
}

impl From<lockd_proto::Capacity> for Capacity {
    fn from(c: lockd_proto::Capacity) -> Capacity {
        Capacity {
            max_held: c.max_held,
            max_key_bytes: c.max_key_bytes,
        }
    }
}

impl From<Capacity> for lockd_proto::Capacity {
    fn from(c: Capacity) -> lockd_proto::Capacity {
        lockd_proto::Capacity {
            max_held: c.max_held,
            max_key_bytes: c.max_key_bytes,
        }
    }
}

/// The bounds a new cluster starts with: every guest call on a table this
/// full, of either reference module, stays at least ten times inside its
/// fuel and memory budgets (capacity-bench; docs/configuration.md,
/// "Limits").
pub const DEFAULT_CAPACITY: Capacity = Capacity {
    max_held: 100_000,
    max_key_bytes: 8 << 20,
};

/// The use of the capacity: exact after every group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub held: u64,
    pub key_bytes: u64,
}

impl Usage {
    pub fn status(self, limits: Capacity) -> CapacityStatus {
        CapacityStatus {
            limits: limits.into(),
            held: self.held,
            key_bytes: self.key_bytes,
        }
    }

    fn remove(&mut self, key: &str) {
        self.held = self.held.saturating_sub(1);
        self.key_bytes = self.key_bytes.saturating_sub(key.len() as u64);
    }

    /// Count what applying `cmds` with `outcomes` changed.
    pub fn account(&mut self, cmds: &[Command], outcomes: &[Outcome]) {
        for (c, o) in cmds.iter().zip(outcomes) {
            match (c, o) {
                // A reentrant holder entering again adds no holding.
                (Command::Grant(g), Outcome::Granted(x)) if !x.repeat && x.count <= 1 => {
                    self.held = self.held.saturating_add(1);
                    self.key_bytes = self.key_bytes.saturating_add(g.key.len() as u64);
                }
                // A release that only lowers a count removes none.
                (Command::Release(r), Outcome::Released(x)) if x.count == 0 => self.remove(&r.key),
                (
                    Command::Expire(r),
                    Outcome::Expired(crate::command::Expired { existed: true, .. }),
                ) => self.remove(&r.key),
                (_, Outcome::SessionEnded(e)) => {
                    for r in &e.released {
                        self.remove(&r.key);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The grants of a group and their key bytes.
fn demand(group: &[Command]) -> (u64, u64) {
    group.iter().fold((0, 0), |(n, b), c| match c {
        Command::Grant(g) => (n + 1, b + g.key.len() as u64),
        _ => (n, b),
    })
}

/// The most commands one `apply` call carries (a group is never cut).
/// A committed range can hold thousands of entries after a catch-up; cut
/// at this size, every call stays far inside the fuel budget (1024 grants
/// take 1-2 % of it, capacity-bench) however long the range. Cutting a
/// range between groups changes no outcome.
pub const MAX_COMMANDS_PER_CALL: usize = 4096;

/// The number of leading groups one guest call may take from `use_` on:
/// they certainly fit the bounds whatever the module answers, and hold at
/// most [`MAX_COMMANDS_PER_CALL`] commands (or are one group). 0: the first
/// group could pass a bound and must be decided by [`refusal`].
pub fn plan(groups: &[Vec<Command>], use_: Usage, limits: Capacity) -> usize {
    let (mut held, mut bytes, mut commands) = (use_.held, use_.key_bytes, 0);
    for (i, g) in groups.iter().enumerate() {
        let (n, b) = demand(g);
        held = held.saturating_add(n);
        bytes = bytes.saturating_add(b);
        commands += g.len();
        if held > limits.max_held || bytes > limits.max_key_bytes {
            return i;
        }
        if commands > MAX_COMMANDS_PER_CALL {
            return i.max(1);
        }
    }
    groups.len()
}

/// Decide one group exactly. `None`: it fits, send it whole. `Some(why)`:
/// its grants are refused with `why`.
pub fn refusal(group: &[Command], use_: Usage, limits: Capacity) -> Option<String> {
    let (n, b) = demand(group);
    if use_.held.saturating_add(n) > limits.max_held {
        return Some(format!(
            "{CAPACITY_REASON}: {} holdings, the bound is {} (an admin can raise it)",
            use_.held, limits.max_held
        ));
    }
    if use_.key_bytes.saturating_add(b) > limits.max_key_bytes {
        return Some(format!(
            "{CAPACITY_REASON}: holdings use {} key bytes, {b} more would pass the bound of {} (an admin can raise it)",
            use_.key_bytes, limits.max_key_bytes
        ));
    }
    None
}

/// The group without its grants, and where they were.
pub fn without_grants(group: &[Command]) -> (Vec<Command>, Vec<bool>) {
    let is_grant: Vec<bool> = group
        .iter()
        .map(|c| matches!(c, Command::Grant(_)))
        .collect();
    let rest = group
        .iter()
        .zip(&is_grant)
        .filter(|(_, g)| !**g)
        .map(|(c, _)| c.clone())
        .collect();
    (rest, is_grant)
}

/// The group's outcomes: the refusal for each grant, the module's answers
/// (for the rest) in order.
pub fn merge(is_grant: &[bool], rest: Vec<Outcome>, why: &str) -> Vec<Outcome> {
    let mut rest = rest.into_iter();
    is_grant
        .iter()
        .map(|g| {
            if *g {
                Outcome::Rejected(Reason::Quota(why.to_string()))
            } else {
                rest.next().unwrap_or(Outcome::Noop)
            }
        })
        .collect()
}

/// The groups of a range as the module saw them and its answers, when that
/// differs from the range (some grants refused by the bound): what the
/// shadow is fed.
pub(super) type Seen = (Vec<Vec<Command>>, Vec<Vec<Outcome>>);

/// The outcomes of a range's groups, and [`Seen`] when it differs.
pub(super) type Applied = (Vec<Vec<Outcome>>, Option<Seen>);

impl Replica {
    /// The bounds and their use now.
    pub fn capacity(&self) -> CapacityStatus {
        self.usage.status(self.capacity)
    }

    /// Apply a capacity entry: the new bounds hold for every later group.
    /// Bounds below the current use are kept as asked: holdings stay, new
    /// grants are refused until enough are freed.
    pub(super) fn set_capacity(&mut self, bounds: Capacity) -> CapacityStatus {
        tracing::info!(
            node = self.id,
            max_held = bounds.max_held,
            max_key_bytes = bounds.max_key_bytes,
            "capacity bounds set"
        );
        self.capacity = bounds;
        self.usage.status(bounds)
    }

    /// The capacity's use, read from the module: every holding's key, page
    /// by page. Only where the use cannot be followed command by command: a
    /// restored snapshot, a new module after an upgrade.
    pub(super) fn measure_usage(&mut self) -> Result<Usage, EngineError> {
        const PAGE: u32 = 4096;
        let mut usage = Usage::default();
        let mut after: Option<String> = None;
        loop {
            let page = self.guest.list_keys("", after.as_deref(), PAGE)?;
            for k in &page {
                let n = k.holders.len() as u64;
                usage.held = usage.held.saturating_add(n);
                usage.key_bytes = usage
                    .key_bytes
                    .saturating_add(n.saturating_mul(k.key.len() as u64));
            }
            match page.last() {
                Some(last) if page.len() as u32 == PAGE => after = Some(last.key.clone()),
                _ => return Ok(usage),
            }
        }
    }

    /// Apply lock command groups within the capacity bound (see
    /// [`capacity`]): one guest call for the groups that certainly fit, a
    /// split only where a bound could be reached. Returns the outcomes, and
    /// the groups as the module saw them (the refused grants taken out)
    /// with its answers, for the shadow.
    pub(super) fn apply_groups(&mut self, groups: &[Vec<Command>]) -> Result<Applied, EngineError> {
        let mut out: Vec<Vec<Outcome>> = Vec::with_capacity(groups.len());
        let mut seen: Option<Seen> = None;
        let mut at = 0;
        while at < groups.len() {
            // The groups that certainly fit; or, where one could pass a
            // bound, that group alone, decided on the exact use.
            let (n, refused) = match plan(&groups[at..], self.usage, self.capacity) {
                0 => (1, refusal(&groups[at], self.usage, self.capacity)),
                fit => (fit, None),
            };
            let part = &groups[at..at + n];
            match refused {
                None => {
                    let outcomes = self.isolated_apply(part, at)?;
                    for (g, o) in part.iter().zip(&outcomes) {
                        self.usage.account(g, o);
                    }
                    if let Some((sent, answered)) = seen.as_mut() {
                        sent.extend(part.iter().cloned());
                        answered.extend(outcomes.iter().cloned());
                    }
                    out.extend(outcomes);
                }
                Some(why) => {
                    let (rest, is_grant) = without_grants(&part[0]);
                    let answers = if rest.is_empty() {
                        Vec::new()
                    } else {
                        let mut o = self.isolated_apply(std::slice::from_ref(&rest), at)?;
                        let answers = o.pop().unwrap_or_default();
                        self.usage.account(&rest, &answers);
                        answers
                    };
                    let merged = merge(&is_grant, answers.clone(), &why);
                    let (sent, answered) =
                        seen.get_or_insert_with(|| (groups[..at].to_vec(), out.clone()));
                    sent.push(rest);
                    answered.push(answers);
                    out.push(merged);
                }
            }
            at += n;
        }
        Ok((out, seen))
    }
}

#[cfg(test)]
mod tests;
