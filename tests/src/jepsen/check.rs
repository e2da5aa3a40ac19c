//! The checkers. Each returns the violations it found, each a sentence.

use std::collections::{BTreeMap, HashMap};

use super::history::{Call, Op, Ret};
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
