//! The checkers. Each returns the violations it found, each naming the
//! checker that found it and saying what it saw in a sentence.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use super::history::{Call, Holding, Op, Ret};
use super::lin::{Horizon, NotShown};
use super::register::Write;

/// Which checker found a violation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checker {
    LostUpdate,
    Tokens,
    Linearizable,
    /// A key whose linearizability search hit its bound: not shown either
    /// way (a clean run fails on it; it catches nothing).
    Undecided,
    MutualExclusion,
    RefusalInsideLease,
    /// Acknowledged grants and releases against the final state, and the
    /// holder that renewed its lock through every fault.
    Survived,
    /// A node found what it had acknowledged lost or damaged: its data did
    /// not open again after a crash, or Raft stopped on a storage error.
    Durability,
    /// Waiting clients served within a bound after the faults healed.
    Liveness,
    /// While a majority of the nodes ran on working disks and could all
    /// talk both ways, the cluster elected a leader and committed what it
    /// had within a bound (the simulation's `progress`).
    Progress,
    /// Equal state (and module) on every node at the end.
    Convergence,
    /// Every node's state the same at each index two of them recorded
    /// (the simulation's, from the determinism audit's points).
    AppliedAlike,
    /// A node takes office at most once in a term: a restarted leader
    /// stands anew (the simulation's, from every node's own metrics).
    LeadsOnce,
    /// Entries of one log id alike on every node, and logs that agree at
    /// an index alike below it (the simulation's, from the nodes' logs).
    LogMatching,
    /// Every acknowledged grant and release in the applied history of
    /// every node that finishes the run (the simulation's, from what each
    /// node's watch hub published: `sim::applied`).
    Acknowledged,
    /// A keepalive refused while the lease its last acknowledged renewal
    /// promised still ran (the simulation's renewer, `sim::renewer`).
    Keepalive,
    /// The run itself broke: a client task panicked, a fault did not happen.
    Harness,
}

/// One violation: the checker and what it saw.
#[derive(Clone, Debug)]
pub struct Violation {
    pub checker: Checker,
    pub what: String,
}

impl Violation {
    pub fn new(checker: Checker, what: impl Into<String>) -> Violation {
        Violation {
            checker,
            what: what.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:?}] {}", self.checker, self.what)
    }
}

/// 1. No lost update: replaying the accepted writes of each key in the order
///    the register accepted them, every write read the value the previous
///    accepted write left.
pub fn lost_updates(registers: &[(String, Vec<Write>, u64)]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (key, writes, _) in registers {
        let mut value = 0;
        for w in writes {
            if w.read != value {
                out.push(Violation::new(
                    Checker::LostUpdate,
                    format!(
                        "lost update on {key}: client {} with token {} read {} but the register held {value}",
                        w.client, w.token, w.read
                    ),
                ));
            }
            value = w.wrote;
        }
    }
    out
}

/// 2. Tokens are never reused, and on each key a grant that completed before
///    another was invoked has the smaller token.
pub fn tokens(ops: &[Op]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut owner: HashMap<u64, &Op> = HashMap::new();
    for o in ops {
        if let Ret::Granted(t) = o.ret {
            if let Some(prev) = owner.insert(t, o) {
                out.push(Violation::new(
                    Checker::Tokens,
                    format!(
                        "token {t} granted twice: to client {} on {} and client {} on {}",
                        prev.client, prev.key, o.client, o.key
                    ),
                ));
            }
        }
    }
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for o in ops.iter().filter(|o| matches!(o.ret, Ret::Granted(_))) {
        by_key.entry(&o.key).or_default().push(o);
    }
    for (key, grants) in by_key {
        for a in &grants {
            for b in &grants {
                if let (Ret::Granted(ta), Ret::Granted(tb)) = (&a.ret, &b.ret) {
                    if a.complete < b.invoke && ta >= tb {
                        out.push(Violation::new(
                            Checker::Tokens,
                            format!("{key}: token {tb} granted after token {ta} had been granted"),
                        ));
                    }
                }
            }
        }
    }
    out
}

/// 3. Each mutex key's lock operations are linearizable (see
///    [`super::lin`]). Keys taken shared or as semaphores are left to
///    [`holders`], [`tokens`] and [`no_refusal_inside_lease`]: the model
///    has one holder; so are keys held in sessions, whose ends move with
///    keepalives the model does not see.
pub fn linearizable(ops: &[Op], horizon: &Horizon) -> Vec<Violation> {
    let mut by_key: BTreeMap<&str, Vec<Op>> = BTreeMap::new();
    for o in ops {
        by_key.entry(&o.key).or_default().push(o.clone());
    }
    by_key
        .into_iter()
        .filter(|(_, ops)| {
            !ops.iter()
                .any(|o| o.call.is_shared_or_counted() || o.call.in_session())
        })
        .filter_map(|(key, ops)| {
            super::lin::check_key(&ops, horizon).err().map(|e| match e {
                NotShown::Violated(e) => {
                    Violation::new(Checker::Linearizable, format!("{key}: {e}"))
                }
                NotShown::Undecided(e) => Violation::new(Checker::Undecided, format!("{key}: {e}")),
            })
        })
        .collect()
}

/// 3a. Holders as the clients saw them: on each key, at no time did more
///    clients believe they held it than its limit allows, nor did a holder
///    of one mode overlap a holder of the other (see [`Holding`]). With
///    limit 1 this is mutual exclusion: an exclusive holder overlaps no
///    other holder. Unlike the fenced register, this sees a service that
///    grants a key twice even when every token is unique.
pub fn holders(holdings: &[Holding]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (key, hs) in by_key(holdings) {
        let mut live: Vec<&Holding> = Vec::new();
        for h in hs {
            live.retain(|l| l.until > h.from);
            let room = live
                .iter()
                .map(|l| l.limit)
                .chain([h.limit])
                .min()
                .unwrap_or(1);
            let clash = live.iter().find(|l| l.mode != h.mode);
            if clash.is_some() || live.len() + 1 > room as usize {
                let others: Vec<String> = live
                    .iter()
                    .map(|l| {
                        format!(
                            "client {} with token {} ({:?}, limit {}) from {:.0} to {:.0} ms",
                            l.client, l.token, l.mode, l.limit, l.from, l.until
                        )
                    })
                    .collect();
                let what = match clash {
                    Some(_) => "a holder of the other mode".to_string(),
                    None => format!("{} holders at once, above limit {room}", live.len() + 1),
                };
                out.push(Violation::new(
                    Checker::MutualExclusion,
                    format!(
                        "{key}: client {} held token {} ({:?}, limit {}) from {:.0} to {:.0} ms beside {what}: {}",
                        h.client,
                        h.token,
                        h.mode,
                        h.limit,
                        h.from,
                        h.until,
                        others.join("; ")
                    ),
                ));
            }
            live.push(h);
        }
    }
    out
}

/// The most holders any key had at once, as the clients saw them, among
/// holdings `of` a kind: shows a run really shared its keys.
pub fn most_at_once(holdings: &[Holding], of: impl Fn(&Holding) -> bool) -> usize {
    let kept: Vec<Holding> = holdings.iter().filter(|h| of(h)).cloned().collect();
    by_key(&kept)
        .into_values()
        .map(|hs| {
            let mut live: Vec<&Holding> = Vec::new();
            let mut most = 0;
            for h in hs {
                live.retain(|l| l.until > h.from);
                live.push(h);
                most = most.max(live.len());
            }
            most
        })
        .max()
        .unwrap_or(0)
}

/// Each key's holdings with a window, in order of their start.
fn by_key(holdings: &[Holding]) -> BTreeMap<&str, Vec<&Holding>> {
    let mut by_key: BTreeMap<&str, Vec<&Holding>> = BTreeMap::new();
    for h in holdings.iter().filter(|h| h.until > h.from) {
        by_key.entry(&h.key).or_default().push(h);
    }
    for hs in by_key.values_mut() {
        hs.sort_by(|a, b| a.from.total_cmp(&b.from));
    }
    by_key
}

/// 3c. No denial: in a run without policy data, on a module with every
///    feature the clients use, no acquire is refused by policy, a quota,
///    or as unsupported.
pub fn no_denials(ops: &[Op]) -> Vec<Violation> {
    ops.iter()
        .filter_map(|o| match &o.ret {
            Ret::Denied(why) => Some(Violation::new(
                Checker::Harness,
                format!(
                    "{}: client {}'s {:?} was denied: {why}",
                    o.key, o.client, o.call
                ),
            )),
            _ => None,
        })
        .collect()
}

/// 3b. No refusal inside a lease: a holder's release answered "not held" or
///    "wrong token" before its lease could have ended is a violation. The
///    lease is counted from the acquire's *invoke* — the earliest it can
///    have started, so the end it gives is the earliest the service may
///    ever end it ("a lease never ends early").
pub fn no_refusal_inside_lease(ops: &[Op]) -> Vec<Violation> {
    let mut grants: HashMap<(&str, u64), &Op> = HashMap::new();
    for o in ops {
        if let Ret::Granted(t) = o.ret {
            grants.insert((o.key.as_str(), t), o);
        }
    }
    let mut out = Vec::new();
    for o in ops {
        let (Call::Release { token }, Ret::Refused) = (&o.call, &o.ret) else {
            continue;
        };
        let Some(g) = grants.get(&(o.key.as_str(), *token)) else {
            continue;
        };
        let Call::Acquire { lease_ms, .. } = g.call else {
            continue;
        };
        let earliest_end = g.invoke + lease_ms as f64;
        if o.complete < earliest_end {
            out.push(Violation::new(
                Checker::RefusalInsideLease,
                format!(
                    "{}: the release of token {token} by client {} was refused at {:.0} ms, inside its lease (acquire invoked at {:.0} ms with a lease of {lease_ms} ms, so it could not end before {:.0} ms)",
                    o.key, o.client, o.complete, g.invoke, earliest_end
                ),
            ));
        }
    }
    out
}

/// A key as read after the run.
#[derive(Clone, Debug)]
pub struct Final {
    /// When the read was sent (ms since the run started).
    pub at: f64,
    /// Its holder's token, `None` when free; `Err` when it could not be read.
    pub holder: Result<Option<u64>, String>,
}

/// The keys a final read can judge: those only ever taken as mutexes (a
/// semaphore's or readers' key may end with several holders, which one
/// token cannot show). A key's releases alone do not say what it is.
pub fn mutex_keys(ops: &[Op]) -> std::collections::BTreeSet<String> {
    let counted: std::collections::BTreeSet<&str> = ops
        .iter()
        .filter(|o| o.call.is_shared_or_counted())
        .map(|o| o.key.as_str())
        .collect();
    ops.iter()
        .filter(|o| !counted.contains(o.key.as_str()))
        .map(|o| o.key.clone())
        .collect()
}

/// 4. Acknowledged operations survived, against the final state of each key
///    read after the run:
///    * a key that could not be read is a violation (never taken as free);
///    * a key held at the end is held by its newest acknowledged grant or a
///      later one, never by a token whose release was acknowledged;
///    * an acknowledged grant whose lease cannot have ended by the read, and
///      whose release was never attempted, is still held with its token.
pub fn survived(ops: &[Op], finals: &BTreeMap<String, Final>) -> Vec<Violation> {
    let mut out = Vec::new();
    let bad = |what: String| Violation::new(Checker::Survived, what);
    for (key, fin) in finals {
        let on_key: Vec<&Op> = ops.iter().filter(|o| &o.key == key).collect();
        let holder = match &fin.holder {
            Ok(h) => *h,
            Err(e) => {
                out.push(bad(format!("{key}: the final read failed: {e}")));
                continue;
            }
        };
        let release_tried = |t: u64| {
            on_key
                .iter()
                .any(|o| o.call == Call::Release { token: t } && o.ret != Ret::Refused)
        };
        let grants = on_key.iter().filter_map(|o| match (&o.call, &o.ret) {
            (Call::Acquire { lease_ms, .. }, Ret::Granted(t)) => Some((*t, o.invoke, *lease_ms)),
            _ => None,
        });
        let newest = grants.clone().map(|g| g.0).max().unwrap_or(0);
        if let Some(t) = holder {
            if t < newest {
                out.push(bad(format!(
                    "{key} ends held by token {t}, older than the acknowledged grant {newest}"
                )));
            }
            if on_key
                .iter()
                .any(|o| o.call == Call::Release { token: t } && o.ret == Ret::Released)
            {
                out.push(bad(format!(
                    "{key} ends held by token {t}, whose release was acknowledged"
                )));
            }
        }
        for (t, invoke, lease_ms) in grants {
            let unexpired = fin.at < invoke + lease_ms as f64;
            if unexpired && !release_tried(t) && holder != Some(t) {
                out.push(bad(format!(
                    "{key}: acknowledged grant {t} (lease {lease_ms} ms, acquire invoked at {invoke:.0} ms, never released) is gone at {:.0} ms: the key reads {holder:?}",
                    fin.at
                )));
            }
        }
    }
    out
}

mod interesting;
pub use interesting::interesting;

#[cfg(test)]
mod tests;
