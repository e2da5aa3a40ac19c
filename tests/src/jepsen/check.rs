//! The checkers. Each returns the violations it found, each a sentence.

use std::collections::{BTreeMap, HashMap};

use super::history::{Call, Holding, Op, Ret};
use super::register::Write;

/// 1. No lost update: replaying the accepted writes of each key in the order
///    the register accepted them, every write read the value the previous
///    accepted write left.
pub fn lost_updates(registers: &[(String, Vec<Write>, u64)]) -> Vec<String> {
    let mut out = Vec::new();
    for (key, writes, _) in registers {
        let mut value = 0;
        for w in writes {
            if w.read != value {
                out.push(format!(
                    "lost update on {key}: client {} with token {} read {} but the register held {value}",
                    w.client, w.token, w.read
                ));
            }
            value = w.wrote;
        }
    }
    out
}

/// 2. Tokens are never reused, and on each key a grant that completed before
///    another was invoked has the smaller token.
pub fn tokens(ops: &[Op]) -> Vec<String> {
    let mut out = Vec::new();
    let mut owner: HashMap<u64, &Op> = HashMap::new();
    for o in ops {
        if let Ret::Granted(t) = o.ret {
            if let Some(prev) = owner.insert(t, o) {
                out.push(format!(
                    "token {t} granted twice: to client {} on {} and client {} on {}",
                    prev.client, prev.key, o.client, o.key
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
                        out.push(format!(
                            "{key}: token {tb} granted after token {ta} had been granted"
                        ));
                    }
                }
            }
        }
    }
    out
}

/// 3. Each key's lock operations are linearizable (see [`super::lin`]).
pub fn linearizable(ops: &[Op]) -> Vec<String> {
    let mut by_key: BTreeMap<&str, Vec<Op>> = BTreeMap::new();
    for o in ops {
        by_key.entry(&o.key).or_default().push(o.clone());
    }
    by_key
        .into_iter()
        .filter_map(|(key, ops)| {
            super::lin::check_key(&ops)
                .err()
                .map(|e| format!("{key}: {e}"))
        })
        .collect()
}

/// 3a. Mutual exclusion as the clients saw it: on each key, no two clients
///    believed they held it at the same time (see [`Holding`]). Unlike the
///    fenced register, this sees a service that grants a key twice even when
///    every token is unique.
pub fn mutual_exclusion(holdings: &[Holding]) -> Vec<String> {
    let mut by_key: BTreeMap<&str, Vec<&Holding>> = BTreeMap::new();
    for h in holdings.iter().filter(|h| h.until > h.from) {
        by_key.entry(&h.key).or_default().push(h);
    }
    let mut out = Vec::new();
    for (key, mut hs) in by_key {
        hs.sort_by(|a, b| a.from.total_cmp(&b.from));
        // Each holding against the one that reaches furthest before it.
        let mut reach: Option<&Holding> = None;
        for h in hs {
            if let Some(r) = reach {
                if h.from < r.until {
                    out.push(format!(
                        "{key}: client {} held token {} from {:.0} to {:.0} ms while client {} held token {} from {:.0} to {:.0} ms",
                        h.client, h.token, h.from, h.until, r.client, r.token, r.from, r.until
                    ));
                }
            }
            if reach.is_none_or(|r| h.until > r.until) {
                reach = Some(h);
            }
        }
    }
    out
}

/// 3b. No refusal inside a lease: a holder's release answered "not held" or
///    "wrong token" before its lease could have ended is a violation. The
///    lease is counted from the acquire's *invoke* — the earliest it can
///    have started, so the end it gives is the earliest the service may
///    ever end it ("a lease never ends early").
pub fn no_refusal_inside_lease(ops: &[Op]) -> Vec<String> {
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
            out.push(format!(
                "{}: the release of token {token} by client {} was refused at {:.0} ms, inside its lease (acquire invoked at {:.0} ms with a lease of {lease_ms} ms, so it could not end before {:.0} ms)",
                o.key, o.client, o.complete, g.invoke, earliest_end
            ));
        }
    }
    out
}

/// 4. Acknowledged operations survived: a key still held at the end is held
///    by its newest acknowledged grant (or a later one), never by a token
///    whose release was acknowledged.
pub fn survived(ops: &[Op], final_holders: &BTreeMap<String, Option<u64>>) -> Vec<String> {
    let mut out = Vec::new();
    for (key, holder) in final_holders {
        let Some(t) = holder else { continue };
        let newest = ops
            .iter()
            .filter(|o| &o.key == key)
            .filter_map(|o| {
                if let Ret::Granted(g) = o.ret {
                    Some(g)
                } else {
                    None
                }
            })
            .max()
            .unwrap_or(0);
        if *t < newest {
            out.push(format!(
                "{key} ends held by token {t}, older than the acknowledged grant {newest}"
            ));
        }
        let released = ops.iter().any(|o| {
            &o.key == key && o.call == Call::Release { token: *t } && o.ret == Ret::Released
        });
        if released {
            out.push(format!(
                "{key} ends held by token {t}, whose release was acknowledged"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(client: usize, call: Call, invoke: f64, complete: f64, ret: Ret) -> Op {
        Op {
            client,
            key: "k".into(),
            call,
            invoke,
            complete,
            ret,
        }
    }

    fn acquire(lease_ms: u64) -> Call {
        Call::Acquire {
            lease_ms,
            wait_ms: 0,
        }
    }

    fn holding(client: usize, token: u64, from: f64, until: f64) -> Holding {
        Holding {
            client,
            key: "k".into(),
            token,
            from,
            until,
        }
    }

    #[test]
    fn overlapping_holdings_are_a_violation() {
        let v = mutual_exclusion(&[holding(0, 1, 0.0, 100.0), holding(1, 2, 90.0, 200.0)]);
        assert_eq!(v.len(), 1, "{v:?}");
        // Caught also behind a short holding that ended in between.
        let v = mutual_exclusion(&[
            holding(0, 1, 0.0, 500.0),
            holding(1, 2, 10.0, 20.0),
            holding(2, 3, 300.0, 400.0),
        ]);
        assert_eq!(v.len(), 2, "{v:?}");
    }

    #[test]
    fn holdings_one_after_another_pass() {
        let v = mutual_exclusion(&[
            holding(0, 1, 0.0, 100.0),
            holding(1, 2, 100.0, 200.0),
            holding(0, 3, 250.0, 260.0),
        ]);
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn a_refusal_inside_the_lease_is_a_violation() {
        let ops = [
            op(0, acquire(1200), 0.0, 5.0, Ret::Granted(926)),
            op(0, Call::Release { token: 926 }, 340.0, 342.0, Ret::Refused),
        ];
        let v = no_refusal_inside_lease(&ops);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("token 926"), "{v:?}");
    }

    #[test]
    fn a_refusal_after_the_lease_could_end_is_allowed() {
        let ops = [
            op(0, acquire(1200), 0.0, 5.0, Ret::Granted(926)),
            // Counted from the invoke: 1200 ms after 0.0.
            op(
                0,
                Call::Release { token: 926 },
                1150.0,
                1201.0,
                Ret::Refused,
            ),
            op(1, acquire(1200), 0.0, 5.0, Ret::Granted(927)),
            op(1, Call::Release { token: 927 }, 10.0, 12.0, Ret::Released),
        ];
        assert!(no_refusal_inside_lease(&ops).is_empty());
    }
}
