//! Random commands for the property tests: 0.2's (grants of both modes and
//! several limits, holders and request ids, releases, expiries, policy)
//! and 0.3's (sessions, grants in them, reentrant grants, values,
//! proclaim), over few keys, holders, tokens and session ids so that they
//! meet often. The 0.3 fields keep their defaults most of the time, so the
//! 0.2 paths stay as well covered as before.

use proptest::prelude::*;

use crate::{Command, Grant, OpenSession, PrefixPolicy, MAX_VALUE_BYTES};

pub const KEYS: &[&str] = &["a", "b", "p/a", "p/b", ""];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => Just(String::new()),
        3 => prop::sample::select(&["v", "leader-1", "x"][..]).prop_map(str::to_string),
        1 => prop::sample::select(&[MAX_VALUE_BYTES, MAX_VALUE_BYTES + 1][..])
            .prop_map(|n| "v".repeat(n)),
    ]
}

/// A 0.2 grant (every 0.3 field at its default).
pub fn grant() -> impl Strategy<Value = Grant> {
    (
        prop::sample::select(KEYS),
        any::<bool>(),
        1u32..4,
        prop::sample::select(&["", "alice", "bob"][..]),
        prop::sample::select(&["", "r1", "r2"][..]),
        0u64..300,
    )
        .prop_map(|(key, shared, limit, who, req, lease)| {
            let g = if shared {
                Grant::shared(key, lease)
            } else {
                Grant::exclusive(key, lease)
            };
            g.limit(limit).by(who, who).request(req)
        })
}

/// A grant that may use 0.3: a session (mostly none), reentry, a value.
pub fn grant_0_3() -> impl Strategy<Value = Grant> {
    (
        grant(),
        prop_oneof![3 => Just(0u64), 2 => 1u64..5],
        prop::bool::weighted(0.4),
        value(),
    )
        .prop_map(|(g, session, reentrant, value)| {
            let g = g.session(session).value(value);
            if reentrant {
                g.reentrant()
            } else {
                g
            }
        })
}

pub fn rule() -> impl Strategy<Value = PrefixPolicy> {
    (
        prop::sample::select(&["", "p/", "a", "b"][..]),
        prop::bool::weighted(0.2),
        prop::option::of(1u64..200),
        prop::option::of(1u32..4),
        prop::option::of(0u64..5),
    )
        .prop_map(
            |(prefix, reserved, max_lease_ms, max_holders, max_held)| PrefixPolicy {
                prefix: prefix.into(),
                reserved,
                max_lease_ms,
                max_holders,
                max_held,
            },
        )
}

fn open_session() -> impl Strategy<Value = OpenSession> {
    (
        prop::sample::select(&["", "alice", "bob"][..]),
        prop::sample::select(&["", "r1", "r2"][..]),
        prop_oneof![1 => Just(0u64), 6 => 1u64..300],
        0u32..4,
        0u32..4,
    )
        .prop_map(|(who, req, ttl, max_sessions, max_holdings)| {
            OpenSession::new(ttl)
                .by(who, who)
                .request(req)
                .max_sessions(max_sessions)
                .max_holdings(max_holdings)
        })
}

/// 0.2's commands only.
pub fn command() -> impl Strategy<Value = Command> {
    let key = prop::sample::select(KEYS);
    prop_oneof![
        6 => grant().prop_map(Command::Grant),
        3 => (key.clone(), 0u64..16).prop_map(|(k, t)| Command::release(k, t)),
        2 => (key, 0u64..16).prop_map(|(k, t)| Command::expire(k, t)),
        1 => prop::collection::vec(rule(), 0..3).prop_map(Command::SetPolicy),
    ]
}

/// Every command of 0.3.
pub fn command_0_3() -> impl Strategy<Value = Command> {
    let key = prop::sample::select(KEYS);
    prop_oneof![
        6 => grant_0_3().prop_map(Command::Grant),
        3 => (key.clone(), 0u64..16).prop_map(|(k, t)| Command::release(k, t)),
        1 => (key.clone(), 0u64..16).prop_map(|(k, t)| Command::expire(k, t)),
        1 => prop::collection::vec(rule(), 0..3).prop_map(Command::SetPolicy),
        2 => open_session().prop_map(Command::OpenSession),
        1 => (0u64..5).prop_map(Command::CloseSession),
        1 => (0u64..5).prop_map(Command::ExpireSession),
        1 => (key, 0u64..16, value()).prop_map(|(k, t, v)| Command::proclaim(k, t, v)),
    ]
}

pub fn entries() -> impl Strategy<Value = Vec<Vec<Command>>> {
    prop::collection::vec(prop::collection::vec(command(), 1..4), 1..40)
}

pub fn entries_0_3() -> impl Strategy<Value = Vec<Vec<Command>>> {
    prop::collection::vec(prop::collection::vec(command_0_3(), 1..4), 1..40)
}
