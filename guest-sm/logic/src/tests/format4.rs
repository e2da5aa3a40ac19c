//! Snapshot format 4 (0.3): written exactly when the state uses something
//! of 0.3, round-trips a state and its hash, is refused by a 0.2 module,
//! refuses every broken invariant by name, and the downgrade to 0.1 refuses
//! what 0.3 adds. Hostile format-4 input is in [`super::fuzz4`].

use serde::Serialize;

use super::apply;
use crate::parts::MAGIC;
use crate::snapshot::{decode, decode_as};
use crate::{
    Command, DowngradeError, Grant, Holder, LockState, Mode, OpenSession, PrefixPolicy,
    SnapshotError, World,
};

/// Sessions (one ended, one with a request id and a bound), holdings in
/// them, a reentered holding, values, policy.
pub fn state_0_3() -> LockState {
    let mut s = LockState::new();
    apply(&mut s, OpenSession::new(100).by("p", "o").request("r"));
    apply(&mut s, OpenSession::new(200).by("q", "").max_holdings(2));
    apply(&mut s, OpenSession::new(300).by("p", "o2"));
    apply(
        &mut s,
        Grant::exclusive("a", 1).by("p", "x").session(1).value("v"),
    );
    apply(
        &mut s,
        Grant::shared("b", 2).limit(3).by("q", "w").session(2),
    );
    apply(
        &mut s,
        Grant::shared("b", 2).limit(3).by("q", "w").reentrant(),
    );
    apply(
        &mut s,
        Grant::shared("b", 2).limit(3).by("q", "w").reentrant(),
    );
    apply(&mut s, Grant::exclusive("c", 9).request("x").value("hello"));
    apply(&mut s, Command::CloseSession(3));
    let rule = PrefixPolicy {
        max_held: Some(7),
        ..PrefixPolicy::new("b")
    };
    apply(&mut s, Command::SetPolicy(vec![rule]));
    s
}

#[test]
fn a_0_3_state_round_trips_in_format_4() {
    let s = state_0_3();
    let bytes = s.snapshot();
    assert_eq!(bytes[..5], *b"LKSM\x04");
    let back = decode(&bytes).unwrap();
    assert_eq!(back, s, "derived data rebuilt as it was kept");
    assert_eq!(back.snapshot(), bytes);
    assert_eq!(back.state_hash(), s.state_hash());
    assert_eq!(back.counters().next_session, 4);
    assert_eq!(back.session(1), s.session(1));
    let mut fresh = LockState::new();
    fresh.restore(&bytes).unwrap();
    assert_eq!(fresh, s);
    // The restored state goes on exactly as the original.
    let mut t = s.clone();
    let next = || OpenSession::new(5).by("p", "o").max_sessions(2);
    assert_eq!(fresh.apply(next().into()), t.apply(next().into()));
    assert_eq!(
        fresh.apply(Command::CloseSession(2)),
        t.apply(Command::CloseSession(2))
    );
    assert_eq!(fresh, t);
}

#[test]
fn a_0_2_module_refuses_format_4() {
    let bytes = state_0_3().snapshot();
    let err = decode_as(World::V02, &bytes).err();
    assert_eq!(
        err,
        Some(SnapshotError::UnknownFormat {
            format: 4,
            newest: 3
        })
    );
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some("unknown snapshot format 4 (this module reads formats 1, 2 and 3)")
    );
    let err = decode(b"LKSM\x05").err().map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("unknown snapshot format 5 (this module reads formats 1, 2, 3 and 4)")
    );
}

#[test]
fn a_session_counter_that_moved_alone_is_format_4() {
    let mut s = LockState::new();
    apply(&mut s, Grant::exclusive("k", 1));
    assert_eq!(s.snapshot()[4], 3);
    apply(&mut s, OpenSession::new(1));
    apply(&mut s, Command::ExpireSession(1));
    let bytes = s.snapshot();
    assert_eq!(bytes[4], 4, "the counter must not go back to 1");
    let back = decode(&bytes).unwrap();
    assert_eq!(back.counters().next_session, 2);
    assert_eq!(back.state_hash(), s.state_hash());
}

#[test]
fn a_downgrade_refuses_what_0_3_adds() {
    let mut s = LockState::new();
    apply(&mut s, Grant::exclusive("k", 1).by("p", "o").reentrant());
    apply(&mut s, Grant::exclusive("k", 1).by("p", "o").reentrant());
    let e = s.downgrade_snapshot().unwrap_err();
    assert_eq!(
        e,
        DowngradeError::Reentered {
            key: "k".into(),
            token: 1,
            count: 2
        }
    );
    assert!(e.to_string().contains("entered 2 times"), "{e}");
    apply(&mut s, Command::release("k", 1));
    assert!(s.downgrade_snapshot().is_ok());
    apply(&mut s, Command::proclaim("k", 1, "v"));
    assert_eq!(
        s.downgrade_snapshot(),
        Err(DowngradeError::Value {
            key: "k".into(),
            token: 1
        })
    );
    apply(&mut s, Command::proclaim("k", 1, ""));
    apply(&mut s, OpenSession::new(1));
    apply(&mut s, OpenSession::new(1));
    let e = s.downgrade_snapshot().unwrap_err();
    assert_eq!(e, DowngradeError::Sessions(2));
    assert!(e.to_string().contains("2 live session(s)"), "{e}");
    apply(&mut s, Command::CloseSession(1));
    apply(&mut s, Command::CloseSession(2));
    let e = s.downgrade_snapshot().unwrap_err();
    assert_eq!(e, DowngradeError::SessionCounter(3));
    assert!(e.to_string().contains("ids could be reused"), "{e}");
}

pub(super) type Row<'a> = (u64, u64, Option<Holder>, &'a str, u64, u32, String);
pub(super) type SessionRow<'a> = (u64, Holder, &'a str, u64, u32);

#[derive(Clone, Debug, Serialize)]
pub(super) struct Body4<'a> {
    pub next_token: u64,
    pub policy: Vec<PrefixPolicy>,
    pub next_session: u64,
    pub sessions: Vec<SessionRow<'a>>,
    pub keys: Vec<(&'a str, Mode, u32, Vec<Row<'a>>)>,
}

pub(super) fn format_4(body: &Body4<'_>) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(4);
    postcard::to_extend(body, out).unwrap()
}

fn who(principal: &str) -> Holder {
    Holder::new(principal, "o")
}

/// Token `token` of a key, in session 1 of principal "p" with TTL 100.
fn row(token: u64) -> Row<'static> {
    (token, 100, Some(who("p")), "", 1, 2, "v".into())
}

fn ok() -> Body4<'static> {
    Body4 {
        next_token: 5,
        policy: vec![],
        next_session: 3,
        sessions: vec![(1, who("p"), "r", 100, 2), (2, who("p"), "", 7, 0)],
        keys: vec![("a", Mode::Exclusive, 1, vec![row(1)])],
    }
}

#[test]
fn every_broken_format_4_invariant_is_refused_by_name() {
    use SnapshotError as E;
    let s = decode(&format_4(&ok())).unwrap();
    assert_eq!(s.holders("a")[0].count, 2);
    assert_eq!(s.session(1).map(|i| i.holdings.len()), Some(1));
    let with = |change: &dyn Fn(&mut Body4<'static>)| {
        let mut b = ok();
        change(&mut b);
        decode(&format_4(&b)).err()
    };
    let at = |session| ("a".to_string(), 1, session);
    let cases: Vec<(Option<E>, E)> = vec![
        (with(&|b| b.next_session = 0), E::NextSessionZero(0)),
        (
            with(&|b| b.sessions[1].0 = 1),
            E::DuplicateSession { id: 1 },
        ),
        (
            with(&|b| b.sessions.swap(0, 1)),
            E::SessionsOutOfOrder { id: 1 },
        ),
        (
            with(&|b| b.sessions[1].0 = 3),
            E::SessionOutOfRange {
                id: 3,
                next_session: 3,
            },
        ),
        (
            with(&|b| b.sessions[0].0 = 0),
            E::SessionOutOfRange {
                id: 0,
                next_session: 3,
            },
        ),
        (with(&|b| b.sessions[1].3 = 0), E::ZeroTtl { id: 2 }),
        (
            with(&|b| b.sessions[1].2 = "r"),
            E::DuplicateSessionRequest {
                request_id: "r".into(),
            },
        ),
        (with(&|b| b.keys[0].3[0].4 = 2), {
            let (key, token, _) = at(0);
            E::SessionLease {
                key,
                token,
                session: 2,
                lease_ms: 100,
            }
        }),
        (with(&|b| b.keys[0].3[0].4 = 9), {
            let (key, token, session) = at(9);
            E::NoSuchSession {
                key,
                token,
                session,
            }
        }),
        (with(&|b| b.keys[0].3[0].2 = Some(who("q"))), {
            let (key, token, session) = at(1);
            E::SessionPrincipal {
                key,
                token,
                session,
            }
        }),
        (with(&|b| b.keys[0].3[0].2 = None), {
            let (key, token, session) = at(1);
            E::SessionPrincipal {
                key,
                token,
                session,
            }
        }),
        (
            with(&|b| b.sessions[0].4 = 0),
            E::OverMaxHoldings {
                session: 1,
                max_holdings: 0,
            },
        ),
        (
            with(&|b| b.keys[0].3[0].5 = 0),
            E::ZeroCount {
                key: "a".into(),
                token: 1,
            },
        ),
        (
            with(&|b| b.keys[0].3[0].6 = "v".repeat(4097)),
            E::ValueTooLong {
                key: "a".into(),
                token: 1,
                bytes: 4097,
            },
        ),
        (
            with(&|b| b.keys[0].3[0].0 = 5),
            E::TokenOutOfRange {
                key: "a".into(),
                token: 5,
                next_token: 5,
            },
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got, Some(want));
    }
    // Two holdings of session 1 (max 2) are fine; a third is one too many.
    let keys = |n: u64| {
        let names = ["a", "b", "c"];
        (1..=n)
            .map(|t| (names[t as usize - 1], Mode::Exclusive, 1, vec![row(t)]))
            .collect::<Vec<_>>()
    };
    assert!(decode(&format_4(&Body4 {
        keys: keys(2),
        ..ok()
    }))
    .is_ok());
    assert_eq!(
        decode(&format_4(&Body4 {
            keys: keys(3),
            ..ok()
        }))
        .err(),
        Some(E::OverMaxHoldings {
            session: 1,
            max_holdings: 2
        })
    );
    let mut trailing = format_4(&ok());
    trailing.push(0);
    assert_eq!(decode(&trailing).err(), Some(E::TrailingBytes(1)));
    let cut = format_4(&ok());
    assert!(matches!(decode(&cut[..cut.len() - 1]), Err(E::Decode(_))));
}
