//! The 0.3 parts of the hash construction (`crate::hash`): every field of
//! a session, the session counter and every 0.3 field of a holding enter
//! the state hash, and equal 0.3 states hash equal whatever their history.
//! (That a 0.2 state hashes as in 0.2 is pinned by [`super::golden`].)

use super::apply;
use crate::{Command, Grant, LockState, OpenSession};

fn session() -> OpenSession {
    OpenSession::new(100)
        .by("p", "o")
        .request("r")
        .max_holdings(3)
}

fn grant() -> Grant {
    Grant::exclusive("k", 100)
        .by("p", "o")
        .session(1)
        .reentrant()
        .value("v")
}

/// The base state with one thing changed: the session it opens, the grant
/// it enters twice, or what happens before and after.
fn build(open: OpenSession, g: Grant, before: &[Command], after: &[Command]) -> LockState {
    let mut s = LockState::new();
    for c in before {
        apply(&mut s, c.clone());
    }
    apply(&mut s, open);
    apply(&mut s, g.clone());
    apply(
        &mut s,
        Grant {
            value: "x".into(),
            ..g
        },
    );
    for c in after {
        apply(&mut s, c.clone());
    }
    s
}

#[test]
fn every_0_3_part_of_the_state_enters_the_hash() {
    let other = || Command::OpenSession(OpenSession::new(1).by("z", "z"));
    let variants: Vec<(&str, LockState)> = vec![
        ("base", build(session(), grant(), &[], &[])),
        (
            "session owner",
            build(session().by("p", "o2"), grant(), &[], &[]),
        ),
        (
            "session request id",
            build(session().request("r2"), grant(), &[], &[]),
        ),
        (
            "session ttl",
            build(
                OpenSession {
                    ttl_ms: 101,
                    ..session()
                },
                grant(),
                &[],
                &[],
            ),
        ),
        (
            "max-holdings",
            build(session().max_holdings(4), grant(), &[], &[]),
        ),
        (
            "session principal",
            build(session().by("q", "o"), grant().by("q", "o"), &[], &[]),
        ),
        (
            "session id",
            build(
                session(),
                grant().session(2),
                &[other(), Command::CloseSession(1)],
                &[],
            ),
        ),
        (
            "next session",
            build(
                session(),
                grant(),
                &[],
                &[other(), Command::CloseSession(2)],
            ),
        ),
        ("live sessions", build(session(), grant(), &[], &[other()])),
        (
            "count",
            build(session(), grant(), &[], &[Command::release("k", 1)]),
        ),
        (
            "value",
            build(session(), grant(), &[], &[Command::proclaim("k", 1, "w")]),
        ),
        (
            "holding's session",
            build(session(), grant().session(0), &[], &[]),
        ),
    ];
    let mut seen: Vec<(&str, [u8; 32])> = Vec::new();
    for (name, s) in &variants {
        assert_eq!(s.state_hash(), s.recomputed_hash(), "{name}");
        let hash = s.state_hash();
        if let Some((other, _)) = seen.iter().find(|(_, h)| *h == hash) {
            panic!("{name} and {other} hash equal");
        }
        seen.push((name, hash));
    }
}

#[test]
fn equal_0_3_states_from_different_histories_hash_equal() {
    let y = || Grant::exclusive("y", 5).by("q", "o").reentrant();
    let x = || Grant::exclusive("x", 5).by("p", "o").session(1);
    let mut a = LockState::new();
    apply(&mut a, OpenSession::new(50).by("p", "o"));
    apply(&mut a, OpenSession::new(60).by("q", "o"));
    apply(&mut a, x());
    apply(&mut a, y().request("r"));
    apply(&mut a, y());
    apply(&mut a, Command::proclaim("x", 1, "v"));
    apply(&mut a, Command::CloseSession(2));
    let mut b = LockState::new();
    apply(&mut b, OpenSession::new(50).by("p", "o"));
    apply(&mut b, x().value("v"));
    apply(&mut b, OpenSession::new(60).by("q", "o"));
    apply(&mut b, y());
    apply(&mut b, y().request("r"));
    apply(&mut b, Command::ExpireSession(2));
    assert_eq!(a, b);
    assert_eq!(a.state_hash(), b.state_hash());
    apply(&mut b, Command::release("y", 2));
    assert_ne!(a.state_hash(), b.state_hash());
}
