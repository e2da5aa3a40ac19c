//! Linearizability of one key's lock operations (Wing & Gong's search, with
//! memoisation as in Lowe's and Porcupine's checkers).
//!
//! The model is a lock with fencing tokens and leases:
//!
//! * `acquire → granted(t)`: the key is free and `t` is above every token
//!   granted before; the key is now held by `t`.
//! * `acquire → held`: the key is held.
//! * `release(t) → released`: the key is held by `t`; now free.
//! * `release(t) → refused`: the key is not held by `t`.
//! * expiry: a holder may disappear without any client operation, but never
//!   before `lease_ms` after its acquire was *invoked* (the earliest a lease
//!   may end). A grant whose answer never arrived (unknown outcome) may have
//!   been released at once (the client was gone).
//!
//! Operations whose outcome is unknown may be linearized anywhere after their
//! invocation, or not at all.

use std::collections::HashSet;

use super::history::{Call, Op, Ret};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Holder {
    /// `None`: granted by an acquire whose answer was lost.
    token: Option<u64>,
    /// The earliest time the lease may end, as f64 bits (ms).
    may_end: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct State {
    holder: Option<Holder>,
    last_token: u64,
}

fn may_end(h: &Holder, at: f64) -> bool {
    h.token.is_none() || at >= f64::from_bits(h.may_end)
}

/// The states `op` can lead to from `s` if linearized (at a point no later
/// than its completion).
fn step(s: State, op: &Op) -> Vec<State> {
    // The holder may have expired before this op's linearization point.
    let mut starts = vec![s];
    if let Some(h) = s.holder {
        if may_end(&h, op.complete) {
            starts.push(State { holder: None, ..s });
        }
    }
    let mut out = Vec::new();
    for s in starts {
        match (&op.call, &op.ret) {
            (Call::Acquire { lease_ms, .. }, Ret::Granted(t))
                if s.holder.is_none() && *t > s.last_token =>
            {
                let may = op.invoke + *lease_ms as f64;
                out.push(State {
                    holder: Some(Holder {
                        token: Some(*t),
                        may_end: may.to_bits(),
                    }),
                    last_token: *t,
                });
            }
            (Call::Acquire { .. }, Ret::Held) if s.holder.is_some() => out.push(s),
            (Call::Acquire { lease_ms, .. }, Ret::Unknown) if s.holder.is_none() => {
                let may = op.invoke + *lease_ms as f64;
                out.push(State {
                    holder: Some(Holder {
                        token: None,
                        may_end: may.to_bits(),
                    }),
                    ..s
                });
            }
            (Call::Release { token }, Ret::Released | Ret::Unknown)
                if s.holder.is_some_and(|h| h.token == Some(*token)) =>
            {
                out.push(State { holder: None, ..s });
            }
            (Call::Release { token }, Ret::Refused)
                if s.holder.is_none_or(|h| h.token != Some(*token)) =>
            {
                out.push(s);
            }
            _ => {}
        }
    }
    out
}

/// Check one key's history. `Err` explains the first operation that could
/// not be placed.
pub fn check_key(ops: &[Op]) -> Result<(), String> {
    let mut ops: Vec<Op> = ops.to_vec();
    ops.sort_by(|a, b| a.invoke.total_cmp(&b.invoke));
    let n = ops.len();
    let unknown: Vec<bool> = ops.iter().map(|o| o.ret == Ret::Unknown).collect();
    let complete: Vec<f64> = ops
        .iter()
        .map(|o| {
            if o.ret == Ret::Unknown {
                f64::INFINITY
            } else {
                o.complete
            }
        })
        .collect();
    let words = n.div_ceil(64).max(1);
    let mut done = vec![0u64; words];
    let mut seen: HashSet<(Vec<u64>, State)> = HashSet::new();
    let mut deepest = 0usize;
    let start = State {
        holder: None,
        last_token: 0,
    };
    if search(
        &ops,
        &unknown,
        &complete,
        &mut done,
        start,
        0,
        &mut seen,
        &mut deepest,
    ) {
        return Ok(());
    }
    Err(format!(
        "no linearization: stuck after {deepest} of {n} operations; around {:?}",
        ops.iter()
            .skip(deepest.saturating_sub(2))
            .take(5)
            .collect::<Vec<_>>()
    ))
}

#[allow(clippy::too_many_arguments)]
fn search(
    ops: &[Op],
    unknown: &[bool],
    complete: &[f64],
    done: &mut Vec<u64>,
    s: State,
    count: usize,
    seen: &mut HashSet<(Vec<u64>, State)>,
    deepest: &mut usize,
) -> bool {
    let is_done = |done: &Vec<u64>, i: usize| done[i / 64] & (1 << (i % 64)) != 0;
    *deepest = (*deepest).max(count);
    // Finished when every op with a known outcome is placed.
    if (0..ops.len()).all(|i| unknown[i] || is_done(done, i)) {
        return true;
    }
    // Only ops invoked before every pending op completed can go next.
    let min_complete = (0..ops.len())
        .filter(|i| !is_done(done, *i))
        .map(|i| complete[i])
        .fold(f64::INFINITY, f64::min);
    for i in 0..ops.len() {
        if is_done(done, i) {
            continue;
        }
        if ops[i].invoke > min_complete {
            break; // sorted by invocation
        }
        for next in step(s, &ops[i]) {
            done[i / 64] |= 1 << (i % 64);
            if seen.insert((done.clone(), next))
                && search(ops, unknown, complete, done, next, count + 1, seen, deepest)
            {
                return true;
            }
            done[i / 64] &= !(1 << (i % 64));
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(invoke: f64, complete: f64, call: Call, ret: Ret) -> Op {
        Op {
            client: 0,
            key: "k".into(),
            call,
            invoke,
            complete,
            ret,
        }
    }
    fn acq(i: f64, c: f64, ret: Ret) -> Op {
        op(
            i,
            c,
            Call::Acquire {
                lease_ms: 1000,
                wait_ms: 0,
            },
            ret,
        )
    }
    fn rel(i: f64, c: f64, t: u64, ret: Ret) -> Op {
        op(i, c, Call::Release { token: t }, ret)
    }

    #[test]
    fn sequential_history_passes() {
        let h = [
            acq(0.0, 1.0, Ret::Granted(1)),
            acq(2.0, 3.0, Ret::Held),
            rel(4.0, 5.0, 1, Ret::Released),
            acq(6.0, 7.0, Ret::Granted(2)),
        ];
        assert_eq!(check_key(&h), Ok(()));
    }

    #[test]
    fn two_holders_at_once_fail() {
        let h = [
            acq(0.0, 1.0, Ret::Granted(1)),
            acq(2.0, 3.0, Ret::Granted(2)),
        ];
        assert!(check_key(&h).is_err());
    }

    #[test]
    fn a_grant_after_the_lease_could_end_passes() {
        let h = [
            acq(0.0, 1.0, Ret::Granted(1)),
            acq(900.0, 1001.0, Ret::Granted(2)),
        ];
        assert_eq!(check_key(&h), Ok(()));
        let early = [
            acq(0.0, 1.0, Ret::Granted(1)),
            acq(900.0, 999.0, Ret::Granted(2)),
        ];
        assert!(
            check_key(&early).is_err(),
            "a lease may not end before lease_ms"
        );
    }

    #[test]
    fn decreasing_tokens_fail_and_concurrency_is_respected() {
        let h = [
            acq(0.0, 1.0, Ret::Granted(2)),
            rel(2.0, 3.0, 2, Ret::Released),
            acq(4.0, 5.0, Ret::Granted(1)),
        ];
        assert!(check_key(&h).is_err());
        // Overlapping ops may take effect in either order.
        let h = [acq(0.0, 10.0, Ret::Held), acq(1.0, 2.0, Ret::Granted(1))];
        assert_eq!(check_key(&h), Ok(()));
    }

    #[test]
    fn unknown_outcomes_may_or_may_not_happen() {
        let h = [acq(0.0, 1.0, Ret::Unknown), acq(2.0, 3.0, Ret::Granted(2))];
        assert_eq!(check_key(&h), Ok(()));
        let h = [
            acq(0.0, 1.0, Ret::Granted(1)),
            rel(2.0, 3.0, 1, Ret::Unknown),
            acq(4.0, 5.0, Ret::Held),
        ];
        assert_eq!(check_key(&h), Ok(()));
    }
}
