//! The cases that put each checker to work, counted per run (the
//! simulation's coverage marks `check.*`): a checker that never met its
//! interesting case has shown nothing, however many runs pass.

use std::collections::HashSet;

use super::by_key;
use crate::jepsen::history::{Call, Holding, LockMode, Op, Ret};
use crate::jepsen::register::Write;

/// How close after a lease's promised end a next holding counts as a
/// close hand-over (ms).
const CLOSE_MS: f64 = 100.0;

/// Each interesting case and how often the run met it.
pub fn interesting(
    ops: &[Op],
    holdings: &[Holding],
    registers: &[(String, Vec<Write>, u64)],
) -> [(&'static str, u64); 3] {
    [
        ("check.close-handoff", close_handoffs(ops, holdings)),
        (
            "check.refused-release",
            ops.iter()
                .filter(|o| matches!(o.call, Call::Release { .. }) && o.ret == Ret::Refused)
                .count() as u64,
        ),
        (
            "check.fenced-write",
            registers.iter().map(|(_, _, rejected)| rejected).sum(),
        ),
    ]
}

/// Mutual exclusion near its bound: a mutex's holding that ended with
/// its lease (no release acknowledged), and the key's next holding
/// beginning within [`CLOSE_MS`] after that lease's promised end.
fn close_handoffs(ops: &[Op], holdings: &[Holding]) -> u64 {
    let released: HashSet<u64> = ops
        .iter()
        .filter(|o| o.ret == Ret::Released)
        .filter_map(|o| match o.call {
            Call::Release { token } => Some(token),
            Call::Acquire { .. } => None,
        })
        .collect();
    let mut n = 0;
    for (_, hs) in by_key(holdings) {
        let mutex = |h: &&Holding| h.mode == LockMode::Exclusive && h.limit == 1;
        let hs: Vec<&Holding> = hs.into_iter().filter(mutex).collect();
        for pair in hs.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let gap = b.from - a.until;
            if !released.contains(&a.token) && (0.0..=CLOSE_MS).contains(&gap) {
                n += 1;
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holding(token: u64, from: f64, until: f64) -> Holding {
        Holding {
            client: token as usize,
            key: "k".into(),
            token,
            mode: LockMode::Exclusive,
            limit: 1,
            from,
            until,
        }
    }

    #[test]
    fn a_hand_over_counts_only_after_a_lease_ran_out_close_to_its_end() {
        let release = |token| Op {
            client: 0,
            key: "k".into(),
            call: Call::Release { token },
            invoke: 0.0,
            complete: 0.0,
            ret: Ret::Released,
        };
        let hs = [
            holding(1, 0.0, 1000.0),
            holding(2, 1050.0, 2000.0), // 1 expired, 2 began 50 ms after
            holding(3, 2500.0, 3000.0), // 2 expired 500 ms before: not close
            holding(4, 3010.0, 4000.0), // 3 was released: not counted
        ];
        let ops = [release(3)];
        assert_eq!(close_handoffs(&ops, &hs), 1);
        assert_eq!(close_handoffs(&[], &hs), 2);
    }
}
