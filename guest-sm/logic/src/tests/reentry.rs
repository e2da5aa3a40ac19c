//! Reentrant grants (0.3): entering again, counting down, the identity
//! that may enter (principal, owner, session), the refusals, request ids
//! that move to the latest grant, and what a count does to the barrier,
//! the hash and the snapshot format.

use super::{apply, entered, granted, opened, refused, released, BUSY};
use crate::{Command, Grant, LockState, OpenSession, Outcome, PrefixPolicy};

fn g() -> Grant {
    Grant::exclusive("k", 10).by("p", "o").reentrant()
}

fn still_held(count: u32) -> Outcome {
    Outcome::Released {
        freed: false,
        count,
    }
}

#[test]
fn enter_twice_release_twice() {
    let mut s = LockState::new();
    assert_eq!(apply(&mut s, g()), granted(1, 10), "a first grant is new");
    assert_eq!(apply(&mut s, g().limit(3)), entered(1, 10, 2), "its lease");
    assert_eq!(apply(&mut s, g()), entered(1, 10, 3));
    assert_eq!(s.holders("k")[0].count, 3);
    assert_eq!(apply(&mut s, Grant::exclusive("k", 1).by("q", "o")), BUSY);
    assert_eq!(apply(&mut s, Command::release("k", 1)), still_held(2));
    assert_eq!(apply(&mut s, Command::release("k", 1)), still_held(1));
    assert_eq!(apply(&mut s, Grant::exclusive("k", 1).by("q", "o")), BUSY);
    assert_eq!(apply(&mut s, Command::release("k", 1)), released(true));
    assert_eq!(apply(&mut s, Command::release("k", 1)), Outcome::NotFound);
    // An expiry ends the lease: every count at once.
    apply(&mut s, g());
    apply(&mut s, g());
    assert_eq!(
        apply(&mut s, Command::expire("k", 2)),
        Outcome::Expired {
            existed: true,
            freed: true
        }
    );
}

#[test]
fn only_the_same_principal_owner_and_session_enter() {
    let mut s = LockState::new();
    apply(&mut s, g());
    // Without `reentrant` the same holder is another request.
    assert_eq!(apply(&mut s, Grant::exclusive("k", 10).by("p", "o")), BUSY);
    assert_eq!(apply(&mut s, g().by("p", "other")), BUSY);
    assert_eq!(apply(&mut s, g().by("q", "o")), BUSY);
    apply(&mut s, OpenSession::new(50).by("p", "o"));
    assert_eq!(apply(&mut s, g().session(1)), BUSY, "another session");
    // In a session: the session is part of the identity.
    apply(&mut s, Command::release("k", 1));
    assert_eq!(apply(&mut s, g().session(1)), granted(2, 50));
    assert_eq!(apply(&mut s, g().session(1)), entered(2, 50, 2));
    assert_eq!(apply(&mut s, g()), BUSY, "no session is another holder");
    // A session makes an anonymous owner someone.
    let anon = || Grant::exclusive("j", 1).by("p", "").reentrant();
    apply(&mut s, OpenSession::new(50).by("p", ""));
    assert_eq!(apply(&mut s, anon().session(2)), granted(3, 50));
    assert_eq!(apply(&mut s, anon().session(2)), entered(3, 50, 2));
}

#[test]
fn an_anonymous_or_other_mode_reentry_is_unsupported() {
    let mut s = LockState::new();
    let o = apply(&mut s, Grant::exclusive("k", 1).by("p", "").reentrant());
    assert!(
        refused(&o, "unsupported").contains("owner or a session"),
        "{o:?}"
    );
    let r = || Grant::shared("r", 1).limit(2).by("p", "o").reentrant();
    assert_eq!(apply(&mut s, r()), granted(1, 1));
    assert_eq!(apply(&mut s, r()), entered(1, 1, 2));
    let o = apply(&mut s, Grant::exclusive("r", 1).by("p", "o").reentrant());
    assert!(
        refused(&o, "unsupported").contains("in shared mode; it cannot enter it in exclusive"),
        "{o:?}"
    );
    // Another holder's reentrant grant takes a slot of its own.
    let q = || Grant::shared("r", 1).limit(2).by("q", "o").reentrant();
    assert_eq!(apply(&mut s, q()), granted(2, 1));
    assert_eq!(s.counters().next_token, 3, "refusals use no token");
}

#[test]
fn the_request_id_moves_to_the_latest_entry() {
    let mut s = LockState::new();
    apply(&mut s, g().request("r1"));
    assert_eq!(apply(&mut s, g().request("r2")), entered(1, 10, 2));
    assert_eq!(s.holders("k")[0].request_id, "r2");
    let hash = s.state_hash();
    assert_eq!(
        apply(&mut s, g().request("r2")),
        Outcome::Granted {
            token: 1,
            lease_ms: 10,
            repeat: true,
            count: 2
        },
        "a retry of the latest acquire"
    );
    assert_eq!(s.state_hash(), hash, "a repeat changes nothing");
    // No request id leaves the last one.
    assert_eq!(apply(&mut s, g()), entered(1, 10, 3));
    assert_eq!(s.holders("k")[0].request_id, "r2");
    // The earlier id is no longer remembered: not a repeat.
    assert_eq!(apply(&mut s, g().request("r1")), entered(1, 10, 4));
    assert_eq!(
        apply(&mut s, Grant::exclusive("k", 10).by("p", "o").request("r2")),
        BUSY
    );
}

#[test]
fn a_reentry_adds_no_holding_so_policy_and_quota_do_not_apply() {
    let mut s = LockState::new();
    apply(&mut s, g());
    let rules = vec![PrefixPolicy {
        reserved: true,
        max_held: Some(0),
        ..PrefixPolicy::new("k")
    }];
    apply(&mut s, Command::SetPolicy(rules));
    assert_eq!(apply(&mut s, g()), entered(1, 10, 2));
    assert_eq!(s.counters().holders, 1);
}

#[test]
fn a_count_cannot_pass_u32_max() {
    let mut s = LockState::new();
    apply(&mut s, g());
    s.update_holding("k", 1, |h| h.set_count(u32::MAX - 1));
    assert_eq!(apply(&mut s, g()), entered(1, 10, u32::MAX));
    let o = apply(&mut s, g());
    assert!(
        refused(&o, "unsupported").contains("4294967295 times"),
        "{o:?}"
    );
    assert_eq!(s.holders("k")[0].count, u32::MAX);
}

#[test]
fn counting_down_removes_nothing_so_the_barrier_holds() {
    let mut s = LockState::new();
    let reader = || Grant::shared("k", 1).limit(9).by("p", "o").reentrant();
    apply(&mut s, reader());
    apply(&mut s, reader());
    // The writer waits behind the reader; the reader queued behind the
    // writer must not overtake it, and a count going down removes no
    // holding, so it lifts nothing.
    let writer = || Command::Grant(Grant::exclusive("k", 1).by("q", "w"));
    let queued = || Command::Grant(Grant::shared("k", 1).limit(9).by("r", "o"));
    let out = s.apply_entry(vec![writer(), Command::release("k", 1), queued()]);
    assert_eq!(out, vec![BUSY, still_held(1), BUSY]);
    let out = s.apply_entry(vec![writer(), Command::release("k", 1), writer()]);
    assert_eq!(out, vec![BUSY, released(true), granted(2, 1)]);
}

#[test]
fn a_count_enters_the_hash_and_the_format_only_while_above_1() {
    let mut s = LockState::new();
    apply(&mut s, g());
    let (hash, bytes) = (s.state_hash(), s.snapshot());
    assert_eq!(bytes[4], 3);
    apply(&mut s, g());
    assert_ne!(s.state_hash(), hash);
    assert_eq!(s.snapshot()[4], 4);
    apply(&mut s, Command::release("k", 1));
    assert_eq!(s.state_hash(), hash, "the same state again");
    assert_eq!(s.snapshot(), bytes, "format 3 again");
    // A session, once opened, is remembered by the counter for good.
    assert_eq!(apply(&mut s, OpenSession::new(1)), opened(1, 1));
    apply(&mut s, Command::CloseSession(1));
    assert_eq!(s.snapshot()[4], 4);
    assert_ne!(s.state_hash(), hash);
}
