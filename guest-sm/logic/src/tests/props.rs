//! Properties over random command streams, of 0.2's commands and of all
//! of 0.3's ([`super::strategies`]): the incremental hash equals the hash
//! computed from scratch after every entry (and every command), equal
//! states have equal hashes whatever their history, the state's invariants
//! hold ([`super::invariants`]), tokens strictly increase, snapshots
//! round-trip, and no bytes make `restore` panic.

use proptest::prelude::*;

use super::invariants::check_invariants;
use super::strategies::{command_0_3, entries, entries_0_3};
use crate::snapshot::decode;
use crate::{Command, Grant, LockState, Mode, Outcome, PrefixPolicy};

/// Apply `entries`, checking after each one the invariants and the tokens:
/// a new holding's token is above every earlier one, and a repeat or a
/// reentry (count above 1) names a live holding.
fn run(s: &mut LockState, entries: Vec<Vec<Command>>) -> Result<(), TestCaseError> {
    let mut last = s.next_token.saturating_sub(1);
    for e in entries {
        let mut live: Vec<u64> = s
            .keys
            .values()
            .flat_map(|k| k.holdings.keys().copied())
            .collect();
        for o in s.apply_entry(e) {
            if let Outcome::Granted {
                token,
                repeat,
                count,
                ..
            } = o
            {
                if repeat || count > 1 {
                    prop_assert!(live.contains(&token), "{:?} of a token not held", o);
                } else {
                    prop_assert!(token > last, "token {} after {}", token, last);
                    last = token;
                    live.push(token);
                }
            }
        }
        check_invariants(s)?;
    }
    Ok(())
}

/// A state rebuilt from its snapshot (in key and token order, with no
/// removals) is equal and has the same hash: history-independent.
fn round_trips(s: &LockState) -> Result<(), TestCaseError> {
    let back = decode(&s.snapshot()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(back.state_hash(), s.state_hash());
    prop_assert_eq!(back.snapshot(), s.snapshot());
    prop_assert_eq!(&back, s);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_and_hashes_agree(entries in entries()) {
        let mut s = LockState::new();
        run(&mut s, entries)?;
        prop_assert!(s.is_0_2(), "0.2's commands use nothing of 0.3");
        round_trips(&s)?;
    }

    #[test]
    fn invariants_hold_and_hashes_agree_with_0_3(entries in entries_0_3()) {
        let mut s = LockState::new();
        run(&mut s, entries)?;
        round_trips(&s)?;
    }

    /// Each command an entry of its own: the hashes agree after every one.
    #[test]
    fn the_hash_agrees_after_every_0_3_command(
        commands in prop::collection::vec(command_0_3(), 1..80),
    ) {
        let mut s = LockState::new();
        for c in commands {
            s.apply(c);
            prop_assert_eq!(s.state_hash(), s.recomputed_hash(), "incremental hash drifted");
        }
        check_invariants(&s)?;
    }

    /// Whatever the bytes, restore returns, and a refusal keeps the state.
    #[test]
    fn restore_of_any_bytes_never_panics(
        mut bytes in prop::collection::vec(any::<u8>(), 0..300),
        format in 0u8..6,
    ) {
        if format > 0 {
            bytes.splice(0..0, [b'L', b'K', b'S', b'M', format]);
        }
        let mut s = LockState::new();
        s.apply(Grant::exclusive("kept", 1).into());
        let before = s.clone();
        if s.restore(&bytes).is_err() {
            prop_assert_eq!(s, before);
        } else {
            check_invariants(&s)?;
        }
    }

    /// Valid snapshots (format 3 or 4) with bytes flipped: an error or a
    /// consistent state.
    #[test]
    fn mutated_snapshots_never_panic(
        entries in entries_0_3(),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..6),
    ) {
        let mut s = LockState::new();
        s.apply_entries(entries);
        let mut bytes = s.snapshot();
        for (at, x) in flips {
            let n = bytes.len();
            bytes[at % n] ^= x;
        }
        if let Ok(t) = decode(&bytes) {
            check_invariants(&t)?;
        }
    }
}

#[test]
fn equal_states_from_different_histories_hash_equal() {
    let reserved = |p: &str| PrefixPolicy {
        reserved: true,
        ..PrefixPolicy::new(p)
    };
    let y = || Command::Grant(Grant::shared("y", 2).limit(2).by("p", "o"));
    let mut a = LockState::new();
    a.apply(Grant::exclusive("x", 1).into());
    a.apply(y());
    a.apply(Command::SetPolicy(vec![reserved("q")]));
    a.apply(Command::expire("y", 2));
    a.apply(y());
    a.apply(Command::SetPolicy(vec![reserved("z")]));
    let mut b = LockState::new();
    b.apply(Command::SetPolicy(vec![reserved("z")]));
    b.apply(Grant::exclusive("x", 1).into());
    b.apply(Grant::exclusive("w", 5).into());
    assert_ne!(a.state_hash(), b.state_hash());
    b.apply(Command::release("w", 2));
    b.apply(y());
    // Both: x held by 1, y by 3, next token 4, one rule.
    assert_eq!(a, b);
    assert_eq!(a.state_hash(), b.state_hash());
    assert_eq!(a.holders("y")[0].mode, Mode::Shared);
}

/// Two states that differ in one field of one holding (or in the counter,
/// or in the policy) have different hashes.
#[test]
fn every_part_of_the_state_enters_the_hash() {
    fn base() -> Grant {
        Grant::exclusive("k", 10).by("p", "o").request("r")
    }
    type Build = Box<dyn Fn(&mut LockState)>;
    let variants: Vec<(&str, Build)> = vec![
        ("base", Box::new(|s| drop(s.apply(base().into())))),
        (
            "key",
            Box::new(|s| {
                drop(
                    s.apply(
                        Grant {
                            key: "j".into(),
                            ..base()
                        }
                        .into(),
                    ),
                )
            }),
        ),
        (
            "mode",
            Box::new(|s| {
                drop(
                    s.apply(
                        Grant {
                            mode: Mode::Shared,
                            ..base()
                        }
                        .into(),
                    ),
                )
            }),
        ),
        ("limit", Box::new(|s| drop(s.apply(base().limit(2).into())))),
        (
            "lease",
            Box::new(|s| {
                drop(
                    s.apply(
                        Grant {
                            lease_ms: 11,
                            ..base()
                        }
                        .into(),
                    ),
                )
            }),
        ),
        (
            "principal",
            Box::new(|s| drop(s.apply(base().by("q", "o").into()))),
        ),
        (
            "owner",
            Box::new(|s| drop(s.apply(base().by("p", "n").into()))),
        ),
        (
            "request id",
            Box::new(|s| drop(s.apply(base().request("x").into()))),
        ),
        (
            "token",
            Box::new(|s| {
                s.next_token = 2;
                s.apply(base().into());
                s.next_token = 2;
            }),
        ),
        (
            "next token",
            Box::new(|s| {
                s.apply(base().into());
                s.next_token = 3;
            }),
        ),
        (
            "policy",
            Box::new(|s| {
                s.apply(Command::SetPolicy(vec![PrefixPolicy::new("z")]));
                s.apply(base().into());
            }),
        ),
    ];
    let mut seen: Vec<(&str, [u8; 32])> = Vec::new();
    for (name, build) in &variants {
        let mut s = LockState::new();
        build(&mut s);
        assert_eq!(s.state_hash(), s.recomputed_hash(), "{name}");
        let hash = s.state_hash();
        if let Some((other, _)) = seen.iter().find(|(_, h)| *h == hash) {
            panic!("{name} and {other} hash equal");
        }
        seen.push((name, hash));
    }
    // An unknown holder (a migrated 0.1 holding) is not the anonymous one.
    let mut migrated = LockState::new();
    let mut v1 = guest_sm::LockTable::new();
    v1.apply(guest_sm::Command::Grant {
        key: "k".into(),
        lease_ms: 10,
    });
    migrated.restore(&v1.snapshot()).unwrap();
    let mut anonymous = LockState::new();
    anonymous.apply(Grant::exclusive("k", 10).into());
    assert_ne!(migrated.state_hash(), anonymous.state_hash());
}
