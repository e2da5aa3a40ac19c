//! Unit tests of `lin`; those of retried acquires and held links in
//! `tests/retries.rs`.

use super::*;

mod retries;

/// No fault windows; two seconds of slack after a lease.
fn calm() -> Horizon {
    Horizon {
        slack_ms: 2000.0,
        rearm_ms: 2000.0,
        unstable: Vec::new(),
        stretch: 0.0,
        retried_grants: false,
        first_try: Default::default(),
        held: Vec::new(),
    }
}

/// [`calm`], with retry-safe acquires (their lost grants modelled).
fn retried() -> Horizon {
    Horizon {
        retried_grants: true,
        ..calm()
    }
}

fn check(h: &[Op]) -> Result<(), NotShown> {
    check_key(h, &calm())
}

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
    op(i, c, Call::acquire(1000, 0), ret)
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
    assert_eq!(check(&h), Ok(()));
}

#[test]
fn two_holders_at_once_fail() {
    let h = [
        acq(0.0, 1.0, Ret::Granted(1)),
        acq(2.0, 3.0, Ret::Granted(2)),
    ];
    assert!(check(&h).is_err());
}

#[test]
fn a_grant_after_the_lease_could_end_passes() {
    let h = [
        acq(0.0, 1.0, Ret::Granted(1)),
        acq(900.0, 1001.0, Ret::Granted(2)),
    ];
    assert_eq!(check(&h), Ok(()));
    let early = [
        acq(0.0, 1.0, Ret::Granted(1)),
        acq(900.0, 999.0, Ret::Granted(2)),
    ];
    assert!(
        check(&early).is_err(),
        "a lease may not end before lease_ms"
    );
}

/// Rule: a lease counts from the later of its acquire's invoke and the
/// invokes of operations that must precede it.
#[test]
fn a_lease_counts_from_the_operations_that_precede_its_grant() {
    // Token 1 is released at 700..750; the slow acquire invoked at 0
    // can only have been granted after that release, so its lease runs
    // until 700 + 1000 at the earliest.
    let before = |third: Op| {
        vec![
            acq(0.0, 10.0, Ret::Granted(1)),
            rel(700.0, 750.0, 1, Ret::Released),
            acq(0.0, 900.0, Ret::Granted(2)),
            third,
        ]
    };
    let early = before(acq(1200.0, 1300.0, Ret::Granted(3)));
    assert!(
        check(&early).is_err(),
        "token 2's lease cannot have ended at 1300 ms"
    );
    let later = before(acq(1600.0, 1750.0, Ret::Granted(3)));
    assert_eq!(check(&later), Ok(()));
}

#[test]
fn decreasing_tokens_fail_and_concurrency_is_respected() {
    let h = [
        acq(0.0, 1.0, Ret::Granted(2)),
        rel(2.0, 3.0, 2, Ret::Released),
        acq(4.0, 5.0, Ret::Granted(1)),
    ];
    assert!(check(&h).is_err());
    // Overlapping ops may take effect in either order.
    let h = [acq(0.0, 10.0, Ret::Held), acq(1.0, 2.0, Ret::Granted(1))];
    assert_eq!(check(&h), Ok(()));
}

/// Rule: an unknown outcome may or may not have happened, and a grant
/// whose answer was lost may end at once.
#[test]
fn unknown_outcomes_may_or_may_not_happen() {
    let h = [acq(0.0, 1.0, Ret::Unknown), acq(2.0, 3.0, Ret::Granted(2))];
    assert_eq!(check(&h), Ok(()));
    let h = [acq(0.0, 1.0, Ret::Unknown), acq(2.0, 3.0, Ret::Held)];
    assert_eq!(check(&h), Ok(()));
    let h = [
        acq(0.0, 1.0, Ret::Granted(1)),
        rel(2.0, 3.0, 1, Ret::Unknown),
        acq(4.0, 5.0, Ret::Held),
    ];
    assert_eq!(check(&h), Ok(()));
    // But an unknown acquire cannot explain a second known holder.
    let h = [
        acq(0.0, 1.0, Ret::Unknown),
        acq(2.0, 3.0, Ret::Granted(2)),
        acq(4.0, 5.0, Ret::Granted(3)),
    ];
    assert!(check(&h).is_err());
}

/// Rule: a lease whose outcome is unknown ends by the client giving up
/// + lease + slack; after that it cannot excuse a "held".
#[test]
fn an_unknown_grant_cannot_hold_past_its_latest_end() {
    // Gave up at 3000: ends by 3000 + 1000 + 2000.
    let late = [
        acq(0.0, 3000.0, Ret::Unknown),
        acq(10_000.0, 10_010.0, Ret::Held),
    ];
    assert!(check(&late).is_err(), "a held at 10 s with no holder left");
    let inside = [
        acq(0.0, 3000.0, Ret::Unknown),
        acq(5000.0, 5010.0, Ret::Held),
    ];
    assert_eq!(check(&inside), Ok(()));
    // A leader change in a fault window may re-arm it up to the
    // window's end.
    let faulty = Horizon {
        slack_ms: 2000.0,
        rearm_ms: 2000.0,
        unstable: vec![(2500.0, 9000.0)],
        stretch: 0.0,
        retried_grants: false,
        first_try: Default::default(),
        held: Vec::new(),
    };
    assert_eq!(check_key(&late, &faulty), Ok(()));
    // A window that ended before the lease was armed extends nothing.
    let past = Horizon {
        slack_ms: 2000.0,
        rearm_ms: 2000.0,
        unstable: vec![(100.0, 2000.0)],
        stretch: 0.0,
        retried_grants: false,
        first_try: Default::default(),
        held: Vec::new(),
    };
    assert!(check_key(&late, &past).is_err());
}

/// Rule: an acquire whose client died while it waited (no answer, given
/// up at once) may still be granted until its wait ends: its lease is
/// armed by then (+ slack), not by the client's giving up.
#[test]
fn a_dead_clients_waiting_acquire_arms_by_the_end_of_its_wait() {
    let waited = |wait_ms| op(0.0, 20.0, Call::acquire(1000, wait_ms), Ret::Unknown);
    // Armed by 1 500 + 2 000 at the latest, held to 3 500 + 1 000 + 2 000
    // (counted from the giving up, it would be gone by 3 020).
    let held_at = |wait_ms, t: f64| [waited(wait_ms), acq(t, t + 10.0, Ret::Held)];
    assert_eq!(check(&held_at(1500, 6000.0)), Ok(()));
    assert!(check(&held_at(1500, 7000.0)).is_err(), "gone by 6 500");
    // Without a wait, a request on its way still commits after its
    // client's death: armed by 0 + 2 000, gone by 5 000.
    assert_eq!(check(&held_at(0, 4000.0)), Ok(()));
    assert!(check(&held_at(0, 5500.0)).is_err(), "gone by 5 000");
    // Queued behind a holder that died holding (seed 45): granted when
    // that lease ran out, long after its own client's death, so the
    // holder before it may end before its point too.
    let behind = |t: f64| {
        [
            acq(0.0, 30.0, Ret::Granted(1)),
            op(80.0, 90.0, Call::acquire(1000, 1500), Ret::Unknown),
            acq(t, t + 10.0, Ret::Held),
        ]
    };
    assert_eq!(check(&behind(4000.0)), Ok(()));
    assert!(check(&behind(7000.0)).is_err(), "gone by 3 580 + 3 000");
}

/// Two dead clients' acquires of one lease whose holders would end alike
/// are not interchangeable when the earlier cannot take effect as late as
/// the later (seed 310025): only the later can follow a holder that ends
/// after the earlier's latest point.
#[test]
fn acquires_with_different_latest_points_are_not_twins() {
    let ops = [
        op(0.0, 10.0, Call::acquire(2500, 0), Ret::Granted(1)),
        // Latest points 100 + 2 000 and 1 500 + 2 000; both gone by
        // 5 100 and 6 500, which no invoke between tells apart.
        op(100.0, 105.0, Call::acquire(1000, 0), Ret::Unknown),
        op(1500.0, 1505.0, Call::acquire(1000, 0), Ret::Unknown),
        acq(5000.0, 5010.0, Ret::Held),
    ];
    assert_eq!(check(&ops), Ok(()));
}

/// Rule: the same upper bound holds for known grants.
#[test]
fn a_known_grant_cannot_hold_past_its_latest_end() {
    let late = [
        acq(0.0, 10.0, Ret::Granted(1)),
        acq(5000.0, 5010.0, Ret::Held),
    ];
    assert!(check(&late).is_err(), "ends by 10 + 1000 + 2000");
    let inside = [
        acq(0.0, 10.0, Ret::Granted(1)),
        acq(2000.0, 2010.0, Ret::Held),
    ];
    assert_eq!(check(&inside), Ok(()));
}

/// Tokens that go down (no linearization), with forty acquires of unknown
/// outcome invoked beside the first, each with a lease of its own (so no
/// two are interchangeable).
fn tokens_down_behind_forty_unknowns() -> Vec<Op> {
    let mut h = vec![
        acq(0.0, 10.0, Ret::Granted(2)),
        acq(60_000.0, 60_010.0, Ret::Granted(1)),
    ];
    h.extend((0..40u32).map(|i| {
        let call = Call::acquire(1000 + u64::from(i), 0);
        op(f64::from(i) * 0.1, 50_000.0, call, Ret::Unknown)
    }));
    h
}

/// Rule (the search's, not the model's): acquires of unknown outcome that
/// leave the same holder are placed in invoke order only. Forty of them
/// with one lease are searched as one: a violation behind them is found,
/// and a linearization that needs one of them (the "held") is too.
#[test]
fn interchangeable_unknowns_are_searched_in_order() {
    let mut h = vec![
        acq(0.0, 10.0, Ret::Granted(2)),
        acq(60_000.0, 60_010.0, Ret::Granted(1)),
        acq(49_000.0, 49_001.0, Ret::Held),
    ];
    h.extend((0..40).map(|i| acq(f64::from(i) * 0.1, 50_000.0, Ret::Unknown)));
    violated_within(&h, &calm(), 20_000);
    h[1].ret = Ret::Granted(3);
    assert_eq!(check_key_within(&h, &calm(), 20_000), Ok(()));
}

/// `h` is found not linearizable within `bound` search states.
fn violated_within(h: &[Op], horizon: &Horizon, bound: usize) {
    match check_key_within(h, horizon, bound) {
        Err(NotShown::Violated(_)) => {}
        other => panic!("expected a violation, got {other:?}"),
    }
}

/// Rule: a search that reaches its bound says undecided, never
/// linearizable: here the tokens go down (no linearization), and forty
/// acquires of unknown outcome make the space of placements too big to
/// search through.
#[test]
fn a_search_past_its_bound_is_undecided() {
    let mut h = tokens_down_behind_forty_unknowns();
    // A "held" they may all explain, so none can be left out.
    h.push(acq(49_000.0, 49_001.0, Ret::Held));
    match check_key_within(&h, &calm(), 20_000) {
        Err(NotShown::Undecided(why)) => {
            assert!(why.contains("40 of unknown outcome"), "{why}")
        }
        other => panic!("expected undecided, got {other:?}"),
    }
}

#[test]
fn windows_chain_while_the_holder_is_alive() {
    let h = Horizon {
        slack_ms: 100.0,
        rearm_ms: 100.0,
        unstable: vec![(500.0, 1000.0), (1500.0, 3000.0), (9000.0, 9500.0)],
        stretch: 0.0,
        retried_grants: false,
        first_try: Default::default(),
        held: Vec::new(),
    };
    // Armed at 0, lease 1000: 1100; the first window re-arms to 2100,
    // which reaches the second (to 4100); the third is too late.
    assert_eq!(h.latest_end(0.0, 1000.0), 4100.0);
}
