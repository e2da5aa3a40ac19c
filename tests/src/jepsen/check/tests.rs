//! Unit tests of `check`.

use super::*;
use crate::jepsen::history::LockMode;

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
    Call::acquire(lease_ms, 0)
}

fn holding(client: usize, token: u64, from: f64, until: f64) -> Holding {
    Holding {
        client,
        key: "k".into(),
        token,
        mode: LockMode::Exclusive,
        limit: 1,
        from,
        until,
    }
}

fn slot(client: usize, limit: u32, mode: LockMode, from: f64, until: f64) -> Holding {
    Holding {
        mode,
        limit,
        ..holding(client, client as u64 + 1, from, until)
    }
}

#[test]
fn a_semaphore_holds_up_to_its_limit_and_no_more() {
    let three = [
        slot(0, 3, LockMode::Exclusive, 0.0, 100.0),
        slot(1, 3, LockMode::Exclusive, 10.0, 100.0),
        slot(2, 3, LockMode::Exclusive, 20.0, 100.0),
        // After one left: room again.
        slot(3, 3, LockMode::Exclusive, 100.0, 150.0),
    ];
    assert!(holders(&three).is_empty());
    assert_eq!(most_at_once(&three, |_| true), 3);
    let mut four = three.to_vec();
    four.push(slot(4, 3, LockMode::Exclusive, 50.0, 60.0));
    let v = holders(&four);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].what.contains("4 holders at once, above limit 3"),
        "{v:?}"
    );
}

#[test]
fn readers_share_but_a_writer_overlaps_no_one() {
    let readers = [
        slot(0, 4, LockMode::Shared, 0.0, 100.0),
        slot(1, 4, LockMode::Shared, 10.0, 100.0),
        holding(2, 9, 100.0, 150.0),
    ];
    assert!(holders(&readers).is_empty());
    let mut clash = readers.to_vec();
    clash.push(holding(3, 10, 90.0, 95.0));
    let v = holders(&clash);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].what.contains("other mode"), "{v:?}");
    // A reader inside a writer's window, too.
    let v = holders(&[
        holding(0, 1, 0.0, 100.0),
        slot(1, 4, LockMode::Shared, 50.0, 60.0),
    ]);
    assert_eq!(v.len(), 1, "{v:?}");
}

#[test]
fn a_denial_is_a_violation() {
    let ops = [op(
        0,
        acquire(800),
        0.0,
        1.0,
        Ret::Denied("unsupported".into()),
    )];
    assert_eq!(no_denials(&ops).len(), 1);
}

#[test]
fn overlapping_holdings_are_a_violation() {
    let v = holders(&[holding(0, 1, 0.0, 100.0), holding(1, 2, 90.0, 200.0)]);
    assert_eq!(v.len(), 1, "{v:?}");
    // Caught also behind a short holding that ended in between.
    let v = holders(&[
        holding(0, 1, 0.0, 500.0),
        holding(1, 2, 10.0, 20.0),
        holding(2, 3, 300.0, 400.0),
    ]);
    assert_eq!(v.len(), 2, "{v:?}");
}

#[test]
fn holdings_one_after_another_pass() {
    let v = holders(&[
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
    assert!(v[0].what.contains("token 926"), "{v:?}");
    assert_eq!(v[0].checker, Checker::RefusalInsideLease);
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

fn fin(at: f64, holder: Result<Option<u64>, String>) -> BTreeMap<String, Final> {
    BTreeMap::from([("k".to_string(), Final { at, holder })])
}

#[test]
fn a_final_read_that_failed_is_a_violation() {
    let ops = [op(0, acquire(800), 0.0, 5.0, Ret::Granted(1))];
    let v = survived(&ops, &fin(5000.0, Err("503 not leader".into())));
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].checker, Checker::Survived);
}

#[test]
fn an_unexpired_unreleased_grant_must_still_be_held() {
    let ops = [op(0, acquire(600_000), 0.0, 5.0, Ret::Granted(7))];
    assert!(survived(&ops, &fin(5000.0, Ok(Some(7)))).is_empty());
    let v = survived(&ops, &fin(5000.0, Ok(None)));
    assert_eq!(v.len(), 1, "a lost grant: {v:?}");
    // Once its lease may have ended, free is fine.
    assert!(survived(&ops, &fin(600_001.0, Ok(None))).is_empty());
}

#[test]
fn an_acknowledged_release_must_not_be_undone() {
    let ops = [
        op(0, acquire(600_000), 0.0, 5.0, Ret::Granted(7)),
        op(0, Call::Release { token: 7 }, 6.0, 8.0, Ret::Released),
    ];
    assert!(survived(&ops, &fin(5000.0, Ok(None))).is_empty());
    let v = survived(&ops, &fin(5000.0, Ok(Some(7))));
    assert_eq!(v.len(), 1, "a release undone: {v:?}");
    // An unknown release may or may not have happened.
    let unknown = [
        op(0, acquire(600_000), 0.0, 5.0, Ret::Granted(7)),
        op(0, Call::Release { token: 7 }, 6.0, 8.0, Ret::Unknown),
    ];
    assert!(survived(&unknown, &fin(5000.0, Ok(Some(7)))).is_empty());
    assert!(survived(&unknown, &fin(5000.0, Ok(None))).is_empty());
}

#[test]
fn a_key_held_by_an_older_token_than_acknowledged_fails() {
    let ops = [
        op(0, acquire(800), 0.0, 5.0, Ret::Granted(7)),
        op(1, acquire(800), 900.0, 905.0, Ret::Granted(9)),
    ];
    let v = survived(&ops, &fin(950.0, Ok(Some(7))));
    assert!(v.iter().any(|v| v.what.contains("older")), "{v:?}");
}

/// A semaphore's key is not read as a mutex's at the end, though its
/// releases look alike (seed 302318); a mutex's is.
#[test]
fn only_mutex_keys_are_read_at_the_end() {
    let on = |key: &str, call: Call, ret: Ret| Op {
        key: key.into(),
        ..op(0, call, 0.0, 1.0, ret)
    };
    let slot = Call::Acquire {
        lease_ms: 1000,
        wait_ms: 0,
        mode: LockMode::Exclusive,
        limit: 3,
        session: false,
    };
    let ops = [
        on("sem0", slot, Ret::Granted(1)),
        on("sem0", Call::Release { token: 1 }, Ret::Released),
        on("j0", acquire(1000), Ret::Granted(2)),
        on("j0", Call::Release { token: 2 }, Ret::Released),
    ];
    let keys: Vec<String> = mutex_keys(&ops).into_iter().collect();
    assert_eq!(keys, ["j0"]);
}
