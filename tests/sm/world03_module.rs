//! The 0.3 reference module as a component: it imports nothing and
//! describes itself; its native and wasm builds are the same function on
//! random streams of every 0.3 command (sessions, grants in them,
//! reentrant grants, values, proclaim), snapshots included; a 0.2 module's
//! state moves to it and back while nothing of 0.3 is in use, and not once
//! something is; hostile snapshots are refused without a trap.

use guest_sm_world02::{Command, Grant, OpenSession, Outcome, PrefixPolicy};
use lockd_tests::world02::machine::{ModuleMachine, NativeV3};
use lockd_tests::world02::wasm::WasmV2;
use lockd_tests::world02::wasm03::{import_count, WasmV3};
use proptest::prelude::*;

// The 0.2 equivalence test's policy rules: 0.3 adds none.
use crate::world02_equivalence::rule;

#[test]
fn the_0_3_component_imports_nothing_and_describes_itself() {
    assert_eq!(import_count(), 0);
    let mut m = WasmV3::new();
    assert_eq!(m.features(), guest_sm_world03::features());
    assert_eq!(m.features().world_id, "lockd:sm/lock-sm@0.3.0");
    assert!(m.features().sessions && m.features().values);
    assert_eq!(m.version(), guest_sm_world03::VERSION);
    assert!(m.version().contains("world lockd:sm@0.3.0"));
}

const KEYS: &[&str] = &["a", "b", "p/a", "ключ", ""];
const WHO: &[&str] = &["", "alice", "bob"];

fn grant() -> impl Strategy<Value = Command> {
    (
        (prop::sample::select(KEYS), any::<bool>(), 1u32..4),
        (
            prop::sample::select(WHO),
            prop::sample::select(&["", "r1", "r2"][..]),
        ),
        (0u64..1000, prop_oneof![3 => Just(0u64), 2 => 1u64..5]),
        (
            prop::bool::weighted(0.4),
            prop::sample::select(&["", "v", "w"][..]),
        ),
    )
        .prop_map(
            |((key, shared, limit), (who, req), (lease, session), (re, value))| {
                let g = if shared {
                    Grant::shared(key, lease)
                } else {
                    Grant::exclusive(key, lease)
                };
                let g = g.limit(limit).by(who, "s").request(req).session(session);
                let g = if re { g.reentrant() } else { g };
                Command::Grant(g.value(value))
            },
        )
}

fn open() -> impl Strategy<Value = Command> {
    (
        prop::sample::select(WHO),
        prop::sample::select(&["", "r1"][..]),
        0u64..500,
        0u32..3,
        0u32..3,
    )
        .prop_map(|(who, req, ttl, max_sessions, max_holdings)| {
            Command::OpenSession(
                OpenSession::new(ttl)
                    .by(who, "s")
                    .request(req)
                    .max_sessions(max_sessions)
                    .max_holdings(max_holdings),
            )
        })
}

fn command() -> impl Strategy<Value = Command> {
    let key = prop::sample::select(KEYS);
    prop_oneof![
        6 => grant(),
        3 => (key.clone(), 0u64..16).prop_map(|(k, t)| Command::release(k, t)),
        1 => (key.clone(), 0u64..16).prop_map(|(k, t)| Command::expire(k, t)),
        1 => prop::collection::vec(rule(), 0..3).prop_map(Command::SetPolicy),
        2 => open(),
        1 => (0u64..5).prop_map(Command::CloseSession),
        1 => (0u64..5).prop_map(Command::ExpireSession),
        1 => (key, 0u64..16, prop::sample::select(&["", "x"][..]))
            .prop_map(|(k, t, v)| Command::proclaim(k, t, v)),
    ]
}

type Batches = Vec<Vec<Vec<Command>>>;

fn stream() -> impl Strategy<Value = (Batches, usize)> {
    let entry = prop::collection::vec(command(), 1..4);
    prop::collection::vec(prop::collection::vec(entry, 1..8), 1..20).prop_flat_map(|b| {
        let n = b.len();
        (Just(b), 0..n)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn native_and_wasm_0_3_agree((batches, restart_at) in stream()) {
        let mut native = NativeV3::default();
        let mut wasm = WasmV3::new();
        let mut crossed: Vec<Box<dyn ModuleMachine>> = Vec::new();
        for (i, batch) in batches.iter().enumerate() {
            if i == restart_at {
                let (n_snap, w_snap) = (native.snapshot(), wasm.snapshot());
                prop_assert_eq!(&n_snap, &w_snap, "snapshot bytes differ before batch {}", i);
                let mut w = WasmV3::new();
                w.restore(&n_snap).map_err(TestCaseError::fail)?;
                let mut n = NativeV3::default();
                n.restore(&w_snap).map_err(TestCaseError::fail)?;
                crossed = vec![Box::new(w), Box::new(n)];
            }
            let expected = native.apply(batch);
            prop_assert_eq!(&wasm.apply(batch), &expected, "outcomes differ in batch {}", i);
            let hash = native.state_hash();
            prop_assert_eq!(wasm.state_hash(), hash, "state hash differs after batch {}", i);
            for m in &mut crossed {
                prop_assert_eq!(&m.apply(batch), &expected, "restored {} differs in batch {}", m.name(), i);
                prop_assert_eq!(m.state_hash(), hash, "restored {} hash differs after batch {}", m.name(), i);
            }
        }
        prop_assert_eq!(native.counters(), wasm.counters());
        prop_assert_eq!(native.policy(), wasm.policy());
        prop_assert_eq!(native.list_keys("", None, u32::MAX), wasm.list_keys("", None, u32::MAX));
        prop_assert_eq!(native.list_sessions(None, u32::MAX), wasm.list_sessions(None, u32::MAX));
        prop_assert_eq!(native.list_sessions(Some(1), 1), wasm.list_sessions(Some(1), 1));
        prop_assert_eq!(native.session(2), wasm.session(2));
        prop_assert_eq!(native.downgrade_snapshot(), wasm.downgrade_snapshot());
        prop_assert_eq!(native.snapshot(), wasm.snapshot());
    }

    /// Arbitrary bytes as a snapshot of any format: an error value (a trap
    /// would fail the call), and the state kept.
    #[test]
    fn hostile_snapshots_are_refused_without_a_trap(
        mut bytes in prop::collection::vec(any::<u8>(), 0..300),
        format in 0u8..6,
    ) {
        if format > 0 {
            bytes.splice(0..0, [b'L', b'K', b'S', b'M', format]);
        }
        let mut m = WasmV3::new();
        m.apply(&[vec![
            Command::OpenSession(OpenSession::new(5).by("p", "o")),
            Command::Grant(Grant::shared("kept", 5).limit(2).by("p", "o").session(1)),
        ]]);
        let before = m.state_hash();
        if m.restore(&bytes).is_err() {
            prop_assert_eq!(m.state_hash(), before);
        }
    }
}

/// 0.2 → 0.3 audits clean (same bytes, same hash) and 0.3 → 0.2 works
/// while nothing of 0.3 is in use; once a session was opened, the 0.3
/// state is format 4, which the 0.2 module refuses by name.
#[test]
fn a_0_2_state_moves_to_0_3_and_back_while_nothing_new_is_used() {
    let mut v2 = WasmV2::new();
    v2.apply(&[vec![
        Command::Grant(Grant::shared("r", 10).limit(2).by("p", "o").request("x")),
        Command::Grant(Grant::exclusive("m", 20)),
        Command::SetPolicy(vec![PrefixPolicy::new("q/")]),
    ]]);
    let bytes = v2.snapshot();
    let mut v3 = WasmV3::new();
    v3.restore(&bytes).expect("0.3 reads 0.2's format");
    assert_eq!(v3.state_hash(), v2.state_hash());
    assert_eq!(v3.snapshot(), bytes);
    let out = v3.apply(&[vec![Command::Grant(
        Grant::shared("r", 10).limit(2).by("p", "o").request("x"),
    )]]);
    assert!(
        matches!(
            out[0][0],
            Outcome::Granted {
                token: 1,
                repeat: true,
                ..
            }
        ),
        "{out:?}"
    );

    let mut back = WasmV2::new();
    back.restore(&v3.snapshot()).expect("nothing of 0.3 in use");
    assert_eq!(back.state_hash(), v3.state_hash());

    v3.apply(&[vec![
        Command::OpenSession(OpenSession::new(100).by("p", "o")),
        Command::CloseSession(1),
    ]]);
    let format_4 = v3.snapshot();
    assert_eq!(format_4[4], 4);
    let before = back.state_hash();
    assert_eq!(
        back.restore(&format_4),
        Err("unknown snapshot format 4 (this module reads formats 1, 2 and 3)".into())
    );
    assert_eq!(back.state_hash(), before);
    let mut again = WasmV3::new();
    again.restore(&format_4).unwrap();
    assert_eq!(again.counters().next_session, 2);
}
