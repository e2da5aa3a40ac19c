//! Sessions (0.3): opening, repeats and limits, grants in a session and
//! their policy cases, ending a session (closed or expired, late or
//! duplicated), its effect on the busy barrier, and the queries.

use super::{apply, granted, opened, refused, released, BUSY};
use crate::{Command, Grant, LockRef, LockState, OpenSession, Outcome, PrefixPolicy, Reason};

fn open(who: &str) -> OpenSession {
    OpenSession::new(500).by(who, "o")
}

fn ended(released: &[(&str, u64)], freed: &[&str]) -> Outcome {
    Outcome::SessionEnded {
        existed: true,
        released: released
            .iter()
            .map(|(key, token)| LockRef {
                key: key.to_string(),
                token: *token,
            })
            .collect(),
        freed: freed.iter().map(|k| k.to_string()).collect(),
    }
}

const GONE: Outcome = Outcome::SessionEnded {
    existed: false,
    released: Vec::new(),
    freed: Vec::new(),
};

#[test]
fn opening_gives_new_ids_and_a_retry_its_session_back() {
    let mut s = LockState::new();
    assert_eq!(apply(&mut s, open("alice").request("r1")), opened(1, 500));
    let hash = s.state_hash();
    let retry = OpenSession::new(7).by("alice", "o").request("r1");
    assert_eq!(
        apply(&mut s, retry.clone()),
        Outcome::SessionOpened {
            id: 1,
            ttl_ms: 500,
            repeat: true
        },
        "the session's own TTL"
    );
    assert_eq!(s.state_hash(), hash, "a repeat changes nothing");
    // Another owner or no request id: another session.
    assert_eq!(apply(&mut s, retry.by("alice", "p")), opened(2, 7));
    assert_eq!(apply(&mut s, open("alice")), opened(3, 500));
    assert_eq!(apply(&mut s, open("alice")), opened(4, 500));
    // Remembered while the session lives; its id is never given again.
    apply(&mut s, Command::CloseSession(1));
    assert_eq!(apply(&mut s, open("alice").request("r1")), opened(5, 500));
    let o = apply(&mut s, OpenSession::new(0).by("alice", "o"));
    assert!(refused(&o, "unsupported").contains("TTL"), "{o:?}");
    let c = s.counters();
    assert_eq!(
        (c.sessions, c.next_session),
        (4, 6),
        "a refusal takes no id"
    );
}

#[test]
fn max_sessions_counts_the_principal_s_live_sessions() {
    let mut s = LockState::new();
    let two = |who| open(who).max_sessions(2);
    assert_eq!(apply(&mut s, two("alice").request("a")), opened(1, 500));
    assert_eq!(apply(&mut s, two("alice")), opened(2, 500));
    let o = apply(&mut s, two("alice"));
    assert!(refused(&o, "policy").contains("2 live sessions"), "{o:?}");
    // Another principal counts its own; the owner does not matter.
    assert_eq!(apply(&mut s, two("bob")), opened(3, 500));
    let o = apply(&mut s, two("alice").by("alice", "other"));
    refused(&o, "policy");
    // A retry is answered before the limit, even a limit of 0.
    assert!(matches!(
        apply(&mut s, open("alice").request("a").max_sessions(0)),
        Outcome::SessionOpened {
            id: 1,
            repeat: true,
            ..
        }
    ));
    apply(&mut s, Command::ExpireSession(2));
    assert_eq!(apply(&mut s, two("alice")), opened(4, 500));
}

#[test]
fn a_grant_in_a_session_is_its_principal_s_and_lives_as_long_as_it() {
    let mut s = LockState::new();
    apply(&mut s, open("alice").max_holdings(2));
    let g = |key| Grant::exclusive(key, 10).by("alice", "x").session(1);
    assert_eq!(
        apply(&mut s, g("a")),
        granted(1, 500),
        "the lease is the TTL"
    );
    let h = &s.holders("a")[0];
    assert_eq!((h.session, h.lease_ms, h.count), (1, 500, 1));
    assert_eq!(
        apply(&mut s, g("b").session(9)),
        Outcome::Rejected(Reason::NoSession(9))
    );
    let o = apply(&mut s, g("b").by("bob", "x"));
    assert!(refused(&o, "policy").contains("another principal"), "{o:?}");
    assert_eq!(apply(&mut s, g("b")), granted(2, 500));
    let o = apply(&mut s, g("c"));
    assert!(refused(&o, "policy").contains("holds 2 locks"), "{o:?}");
    // A release makes room: the session's set follows its holdings.
    assert_eq!(apply(&mut s, Command::release("a", 1)), released(true));
    assert_eq!(apply(&mut s, g("c")), granted(3, 500));
    let info = s.session(1).expect("lives");
    let held: Vec<(String, u64)> = info
        .holdings
        .into_iter()
        .map(|r| (r.key, r.token))
        .collect();
    assert_eq!(held, [("b".to_string(), 2), ("c".to_string(), 3)]);
    // No session's grant after one of a session: 0.2's rules.
    assert_eq!(apply(&mut s, Grant::exclusive("b", 1)), BUSY);
}

#[test]
fn a_session_s_grant_may_not_outlive_a_lease_cap() {
    let mut s = LockState::new();
    apply(&mut s, open("alice"));
    let cap = |ms| PrefixPolicy {
        max_lease_ms: Some(ms),
        ..PrefixPolicy::new("capped/")
    };
    apply(&mut s, Command::SetPolicy(vec![cap(499)]));
    let g = || Grant::exclusive("capped/k", 10).by("alice", "x").session(1);
    let o = apply(&mut s, g());
    assert!(
        refused(&o, "policy").contains("caps leases at 499"),
        "{o:?}"
    );
    apply(&mut s, Command::SetPolicy(vec![cap(500)]));
    assert_eq!(apply(&mut s, g()), granted(1, 500));
    // The session's checks come before busy: a dead session never waits.
    assert_eq!(
        apply(&mut s, g().session(2)),
        Outcome::Rejected(Reason::NoSession(2))
    );
}

#[test]
fn ending_a_session_removes_its_holdings_in_key_order() {
    let mut s = LockState::new();
    apply(&mut s, open("p"));
    apply(&mut s, open("p"));
    let g = |key: &str| Grant::shared(key, 1).limit(2).by("p", "o").session(1);
    apply(&mut s, g("c")); // 1
    apply(&mut s, g("a")); // 2
    apply(&mut s, Grant::shared("b", 9).limit(3)); // 3, not the session's
    apply(&mut s, g("b").limit(3)); // 4
    apply(&mut s, g("a")); // 5: "a" is full
    apply(&mut s, Grant::exclusive("z", 9).by("p", "o").session(2)); // 6
    let before = s.clone();
    // "a" was full and is free, "c" is free; "b" keeps a holder and had
    // room: no waiter can get in there.
    let want = ended(&[("a", 2), ("a", 5), ("b", 4), ("c", 1)], &["a", "c"]);
    assert_eq!(apply(&mut s, Command::CloseSession(1)), want);
    assert!(s.holders("a").is_empty() && s.holders("c").is_empty());
    assert_eq!(s.holders("b").len(), 1);
    assert_eq!(s.session(1), None);
    assert_eq!(s.holders("z")[0].session, 2, "another session is untouched");
    // Late and duplicated ends change nothing.
    let after = s.state_hash();
    assert_eq!(apply(&mut s, Command::CloseSession(1)), GONE);
    assert_eq!(apply(&mut s, Command::ExpireSession(1)), GONE);
    assert_eq!(apply(&mut s, Command::ExpireSession(77)), GONE);
    assert_eq!(s.state_hash(), after);
    // Expiry is the same operation as closing.
    let mut t = before;
    assert_eq!(apply(&mut t, Command::ExpireSession(1)), want);
    assert_eq!(t, s);
}

#[test]
fn an_entered_holding_goes_whole_with_its_session() {
    let mut s = LockState::new();
    apply(&mut s, open("p"));
    let g = || Grant::exclusive("k", 1).by("p", "o").session(1).reentrant();
    apply(&mut s, g());
    apply(&mut s, g());
    assert_eq!(s.holders("k")[0].count, 2);
    assert_eq!(
        apply(&mut s, Command::ExpireSession(1)),
        ended(&[("k", 1)], &["k"])
    );
    assert_eq!(s.counters().holders, 0);
}

#[test]
fn a_session_s_end_lifts_the_busy_barrier_in_its_entry() {
    let mut s = LockState::new();
    apply(&mut s, open("p"));
    apply(&mut s, Grant::exclusive("k", 1).by("p", "o").session(1));
    let waiter = || Command::Grant(Grant::exclusive("k", 1).by("q", "w"));
    let out = s.apply_entry(vec![waiter(), Command::ExpireSession(1), waiter()]);
    assert_eq!(out[0], BUSY);
    assert_eq!(out[1], ended(&[("k", 1)], &["k"]));
    assert_eq!(out[2], granted(2, 1));
    // A session that held nothing of the key lifts nothing: the reader
    // behind the waiting writer stays behind it.
    apply(&mut s, Command::release("k", 2));
    apply(&mut s, Grant::shared("k", 1).limit(9));
    apply(&mut s, open("p"));
    let out = s.apply_entry(vec![
        Grant::exclusive("k", 1).into(),
        Command::CloseSession(2),
        Grant::shared("k", 1).limit(9).into(),
    ]);
    assert_eq!(out, vec![BUSY, ended(&[], &[]), BUSY]);
}

#[test]
fn sessions_list_in_id_order() {
    let mut s = LockState::new();
    for who in ["a", "b", "c", "d"] {
        apply(&mut s, open(who).request("r"));
    }
    apply(&mut s, Command::CloseSession(2));
    let ids =
        |after, limit| -> Vec<u64> { s.list_sessions(after, limit).iter().map(|i| i.id).collect() };
    assert_eq!(ids(None, u32::MAX), [1, 3, 4]);
    assert_eq!(ids(None, 2), [1, 3]);
    assert_eq!(ids(Some(1), 1), [3]);
    assert!(ids(Some(4), 9).is_empty());
    let three = s.session(3).expect("lives");
    assert_eq!((three.holder.principal.as_str(), three.ttl_ms), ("c", 500));
    assert_eq!(
        (three.request_id.as_str(), three.max_holdings),
        ("r", u32::MAX)
    );
    assert_eq!(s.session(2), None);
}

#[test]
fn session_ids_are_never_reused_even_at_the_end_of_the_counter() {
    let mut s = LockState::new();
    s.sessions.set_next(u64::MAX - 1);
    assert_eq!(apply(&mut s, open("p")), opened(u64::MAX - 1, 500));
    let o = apply(&mut s, open("p"));
    assert!(refused(&o, "unsupported").contains("exhausted"), "{o:?}");
    assert_eq!(s.counters().next_session, u64::MAX);
}
