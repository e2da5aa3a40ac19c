//! Values (0.3): set by a new holding's grant, ignored by a repeat or a
//! reentry, bounded, replaced by `proclaim`; and a leader election, which
//! is what sessions, values and fencing tokens are for together.

use super::{apply, entered, granted, opened, refused, BUSY};
use crate::{Command, Grant, LockState, OpenSession, Outcome, MAX_VALUE_BYTES};

fn g() -> Grant {
    Grant::exclusive("k", 10).by("p", "o")
}

#[test]
fn a_grant_sets_the_value_of_a_new_holding_only() {
    let mut s = LockState::new();
    let mut plain = LockState::new();
    apply(&mut plain, g().request("r"));
    assert_eq!(
        apply(&mut s, g().request("r").reentrant().value("v1")),
        granted(1, 10)
    );
    assert_eq!(s.holders("k")[0].value, "v1");
    assert_ne!(s.state_hash(), plain.state_hash(), "the value is hashed");
    assert_eq!(s.snapshot()[4], 4);
    // A repeat and a reentry answer without touching it.
    let repeat = apply(&mut s, g().request("r").value("v2"));
    assert!(matches!(repeat, Outcome::Granted { repeat: true, .. }));
    assert_eq!(
        apply(&mut s, g().reentrant().value("v3")),
        entered(1, 10, 2)
    );
    assert_eq!(s.holders("k")[0].value, "v1");
}

#[test]
fn a_value_above_4096_bytes_is_unsupported() {
    let mut s = LockState::new();
    let big = "x".repeat(MAX_VALUE_BYTES + 1);
    let o = apply(&mut s, g().value(big.clone()));
    assert!(refused(&o, "unsupported").contains("4097 bytes"), "{o:?}");
    assert_eq!(s.counters().next_token, 1, "no token used");
    let most = "x".repeat(MAX_VALUE_BYTES);
    assert_eq!(apply(&mut s, g().value(most.clone())), granted(1, 10));
    // Checked before reentry: an oversized value is refused either way.
    let o = apply(&mut s, g().reentrant().value(big.clone()));
    refused(&o, "unsupported");
    // And by proclaim, which then changes nothing.
    let o = apply(&mut s, Command::proclaim("k", 1, big));
    refused(&o, "unsupported");
    assert_eq!(s.holders("k")[0].value, most);
}

#[test]
fn proclaim_replaces_the_value_of_a_live_holding() {
    let mut s = LockState::new();
    apply(&mut s, g());
    let (hash, bytes) = (s.state_hash(), s.snapshot());
    assert_eq!(
        apply(&mut s, Command::proclaim("k", 1, "hello")),
        Outcome::Proclaimed
    );
    assert_eq!(s.holders("k")[0].value, "hello");
    assert_ne!(s.state_hash(), hash);
    assert_eq!(s.snapshot()[4], 4);
    assert_eq!(
        apply(&mut s, Command::proclaim("k", 2, "x")),
        Outcome::NotFound
    );
    assert_eq!(
        apply(&mut s, Command::proclaim("j", 1, "x")),
        Outcome::NotFound
    );
    // Emptied again: the state is the 0.2 state it was.
    apply(&mut s, Command::proclaim("k", 1, ""));
    assert_eq!((s.state_hash(), s.snapshot()), (hash, bytes));
}

/// Candidates in sessions race for an exclusive key; the winner publishes
/// where it serves; when its session expires the next candidate wins with
/// a larger token (its epoch), so the old leader's token is fenced off.
#[test]
fn a_leader_election() {
    let mut s = LockState::new();
    let candidate = |who: &str, session| {
        Grant::exclusive("election/db", 0)
            .by(who, who)
            .session(session)
            .value(format!("{who}:5432"))
    };
    assert_eq!(
        apply(&mut s, OpenSession::new(3000).by("a", "a")),
        opened(1, 3000)
    );
    assert_eq!(
        apply(&mut s, OpenSession::new(3000).by("b", "b")),
        opened(2, 3000)
    );
    assert_eq!(apply(&mut s, candidate("a", 1)), granted(1, 3000));
    assert_eq!(apply(&mut s, candidate("b", 2)), BUSY);
    let leader = &s.holders("election/db")[0];
    assert_eq!((leader.token, leader.value.as_str()), (1, "a:5432"));
    apply(&mut s, Command::proclaim("election/db", 1, "a:6543"));
    let out = s.apply_entry(vec![Command::ExpireSession(1), candidate("b", 2).into()]);
    assert!(matches!(&out[0], Outcome::SessionEnded { freed, .. } if freed == &["election/db"]));
    assert_eq!(out[1], granted(2, 3000));
    assert_eq!(s.holders("election/db")[0].value, "b:5432");
    assert_eq!(
        apply(&mut s, Command::proclaim("election/db", 1, "stale")),
        Outcome::NotFound,
        "the old epoch is fenced off"
    );
}
