//! Snapshot format 3, migration from formats 1 and 2 (written by the 0.1
//! modules themselves), the downgrade to format 1, and refusals.

use serde::Serialize;

use super::{apply, released};
use crate::parts::MAGIC;
use crate::snapshot::decode;
use crate::{
    Command, DowngradeError, Grant, Holder, LockState, Mode, Outcome, PrefixPolicy, Reason,
    SnapshotError,
};

pub(super) fn busy_state() -> LockState {
    let mut s = LockState::new();
    apply(&mut s, Grant::exclusive("m", 10).by("p", "o").request("r"));
    apply(&mut s, Grant::shared("r", 20).limit(3).by("p", "o2"));
    apply(&mut s, Grant::shared("r", 30).limit(3));
    apply(&mut s, Grant::exclusive("s", 40).limit(2).request("x"));
    let rule = PrefixPolicy {
        max_held: Some(7),
        max_lease_ms: Some(99),
        ..PrefixPolicy::new("r")
    };
    apply(&mut s, Command::SetPolicy(vec![rule]));
    apply(&mut s, Command::release("m", 1));
    s
}

#[test]
fn format_3_round_trips_canonically() {
    let s = busy_state();
    let bytes = s.snapshot();
    assert_eq!(bytes[..5], *b"LKSM\x03");
    let back = decode(&bytes).unwrap();
    assert_eq!(back, s, "derived data rebuilt as it was kept");
    assert_eq!(back.snapshot(), bytes);
    assert_eq!(back.state_hash(), s.state_hash());
    let mut fresh = LockState::new();
    fresh.restore(&bytes).unwrap();
    assert_eq!(fresh, s);
}

fn v1_table() -> guest_sm::LockTable {
    let mut t = guest_sm::LockTable::new();
    for (k, lease) in [("x", 5), ("y", 6), ("z", 7)] {
        t.apply(guest_sm::Command::Grant {
            key: k.into(),
            lease_ms: lease,
        });
    }
    t.apply(guest_sm::Command::Release { key: "y".into() });
    t
}

#[test]
fn a_0_1_state_migrates_as_exclusive_holdings_of_unknown_holders() {
    let v1 = v1_table();
    let mut s = LockState::new();
    s.restore(&v1.snapshot()).unwrap();
    let x = s.holders("x");
    assert_eq!(x.len(), 1);
    assert_eq!((x[0].token, x[0].lease_ms, x[0].limit), (1, 5, 1));
    assert_eq!((x[0].mode, x[0].holder.clone()), (Mode::Exclusive, None));
    assert_eq!(s.holders("z")[0].token, 3);
    assert_eq!(s.counters().next_token, 4);
    // Tokens continue; a migrated holding is busy to everyone.
    assert_eq!(
        apply(&mut s, Grant::exclusive("x", 1).request("r")),
        Outcome::Rejected(Reason::Busy)
    );
    assert!(matches!(
        apply(&mut s, Grant::exclusive("y", 1)),
        Outcome::Granted { token: 4, .. }
    ));
    // Released by token like any holding.
    assert_eq!(apply(&mut s, Command::release("x", 1)), released(true));
}

#[test]
fn a_format_2_state_migrates_with_its_reserved_prefix() {
    let mut v2 = guest_sm_world01_v2::V2::default();
    v2.restore(&v1_table().snapshot()).unwrap();
    let mut s = LockState::new();
    s.restore(&v2.snapshot()).unwrap();
    assert_eq!(s.holders("z")[0].token, 3);
    let rules = s.policy();
    assert_eq!(rules.len(), 1);
    assert!(rules[0].reserved && rules[0].prefix == guest_sm_world01_v2::RESERVED_PREFIX);
    assert!(matches!(
        apply(&mut s, Grant::exclusive("reserved/a", 1)),
        Outcome::Rejected(Reason::Policy(_))
    ));
}

#[test]
fn a_downgrade_writes_exactly_the_0_1_snapshot() {
    let v1 = v1_table();
    let mut s = LockState::new();
    s.restore(&v1.snapshot()).unwrap();
    assert_eq!(s.downgrade_snapshot().unwrap(), v1.snapshot());
    // Holders and request ids are dropped; tokens and leases are kept.
    apply(&mut s, Grant::exclusive("w", 9).by("p", "o").request("r"));
    let mut back = guest_sm::LockTable::new();
    back.restore(&s.downgrade_snapshot().unwrap()).unwrap();
    assert_eq!(back.get("w").map(|i| (i.token, i.lease_ms)), Some((4, 9)));
    assert_eq!(back.stats().next_token, 5);
}

#[test]
fn a_downgrade_refuses_what_0_1_cannot_represent() {
    let mut s = LockState::new();
    apply(&mut s, Command::SetPolicy(vec![PrefixPolicy::new("a")]));
    assert_eq!(s.downgrade_snapshot(), Err(DowngradeError::Policy(1)));
    apply(&mut s, Command::SetPolicy(vec![]));
    assert!(s.downgrade_snapshot().is_ok());
    apply(&mut s, Grant::shared("r", 1));
    assert_eq!(
        s.downgrade_snapshot(),
        Err(DowngradeError::Shared("r".into()))
    );
    apply(&mut s, Command::release("r", 1));
    apply(&mut s, Grant::exclusive("s", 1).limit(2));
    assert_eq!(
        s.downgrade_snapshot(),
        Err(DowngradeError::Semaphore {
            key: "s".into(),
            limit: 2
        })
    );
}

type Holdings<'a> = Vec<(u64, u64, Option<Holder>, &'a str)>;

#[derive(Serialize)]
struct Body<'a> {
    next_token: u64,
    policy: Vec<PrefixPolicy>,
    keys: Vec<(&'a str, Mode, u32, Holdings<'a>)>,
}

fn format_3(body: &Body<'_>) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(3);
    postcard::to_extend(body, out).unwrap()
}

fn one(token: u64) -> (u64, u64, Option<Holder>, &'static str) {
    (token, 1, Some(Holder::default()), "")
}

#[test]
fn every_broken_invariant_is_refused_by_name() {
    use SnapshotError as E;
    let ok = Body {
        next_token: 5,
        policy: vec![],
        keys: vec![("a", Mode::Exclusive, 1, vec![one(1)])],
    };
    assert!(decode(&format_3(&ok)).is_ok());
    let with = |keys, next_token| {
        decode(&format_3(&Body {
            next_token,
            policy: vec![],
            keys,
        }))
    };
    let k = |key, limit, holdings| (key, Mode::Shared, limit, holdings);
    let cases: Vec<(Result<LockState, E>, E)> = vec![
        (with(vec![], 0), E::NextTokenZero(0)),
        (
            with(vec![k("b", 1, vec![one(1)]), k("a", 1, vec![one(2)])], 5),
            E::KeysOutOfOrder { key: "a".into() },
        ),
        (
            with(vec![k("a", 1, vec![])], 5),
            E::NoHolders { key: "a".into() },
        ),
        (
            with(vec![k("a", 0, vec![one(1)])], 5),
            E::ZeroLimit { key: "a".into() },
        ),
        (
            with(vec![k("a", 1, vec![one(1), one(2)])], 5),
            E::OverLimit {
                key: "a".into(),
                holders: 2,
                limit: 1,
            },
        ),
        (
            with(vec![k("a", 3, vec![one(2), one(1)])], 5),
            E::TokensOutOfOrder {
                key: "a".into(),
                token: 1,
            },
        ),
        (
            with(vec![k("a", 1, vec![one(5)])], 5),
            E::TokenOutOfRange {
                key: "a".into(),
                token: 5,
                next_token: 5,
            },
        ),
        (
            with(vec![k("a", 1, vec![one(1)]), k("b", 1, vec![one(1)])], 5),
            E::DuplicateToken { token: 1 },
        ),
        (
            with(vec![k("a", 1, vec![(1, 1, None, "r")])], 5),
            E::RequestWithoutHolder {
                key: "a".into(),
                token: 1,
            },
        ),
        (
            with(
                vec![k(
                    "a",
                    2,
                    vec![
                        (1, 1, Some(Holder::default()), "r"),
                        (2, 1, Some(Holder::default()), "r"),
                    ],
                )],
                5,
            ),
            E::DuplicateRequest {
                key: "a".into(),
                request_id: "r".into(),
            },
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got.err(), Some(want));
    }
    let bad_policy = Body {
        policy: vec![PrefixPolicy::new("p"), PrefixPolicy::new("p")],
        ..ok
    };
    assert!(matches!(decode(&format_3(&bad_policy)), Err(E::Policy(_))));
    let mut trailing = format_3(&Body {
        policy: vec![],
        ..bad_policy
    });
    trailing.push(0);
    assert_eq!(decode(&trailing).err(), Some(E::TrailingBytes(1)));
    assert_eq!(decode(b"nope").err(), Some(E::BadMagic));
    let unknown = |format| E::UnknownFormat { format, newest: 4 };
    assert_eq!(decode(b"LKSM").err(), Some(unknown(0)));
    assert_eq!(decode(b"LKSM\x05").err(), Some(unknown(5)));
    assert!(matches!(decode(b"LKSM\x03\x05"), Err(E::Decode(_))));
}

#[test]
fn a_format_2_header_must_match_its_body() {
    let mut out = MAGIC.to_vec();
    out.push(2);
    let body = ("", 3u64, 2u64, vec![("a", 1u64, 1u64)]);
    let bytes = postcard::to_extend(&body, out).unwrap();
    assert_eq!(
        decode(&bytes).err(),
        Some(SnapshotError::HeldCount { header: 2, body: 1 })
    );
}

#[test]
fn a_refused_restore_changes_nothing() {
    let mut s = busy_state();
    let before = s.clone();
    assert!(s
        .restore(b"LKSM\x01\x05\x02\x01a\x01\x01\x01b\x01\x01")
        .is_err());
    assert_eq!(s, before);
}
