//! Property: the native and the wasm build of the 0.2 module are the same
//! function. Random entries of every command (grants of both modes and
//! several limits, holders and request ids, releases, expiries, policy),
//! cut into random batches, give identical outcomes and state hashes after
//! every batch; snapshots taken at a random point and restored across the
//! builds continue identically.

use guest_sm_world02::{Command, Grant, PrefixPolicy};
use lockd_tests::world02::machine::{ModuleMachine, NativeV2};
use lockd_tests::world02::wasm::WasmV2;
use proptest::prelude::*;

const KEYS: &[&str] = &["a", "b", "p/a", "p/b", "ключ", ""];

fn grant() -> impl Strategy<Value = Command> {
    (
        prop::sample::select(KEYS),
        any::<bool>(),
        1u32..4,
        prop::sample::select(&["", "alice", "bob"][..]),
        prop::sample::select(&["", "r1", "r2"][..]),
        0u64..1000,
    )
        .prop_map(|(key, shared, limit, who, req, lease)| {
            let g = if shared {
                Grant::shared(key, lease)
            } else {
                Grant::exclusive(key, lease)
            };
            Command::Grant(g.limit(limit).by(who, "s").request(req))
        })
}

/// Policy rules on the keys above (shared with the 0.3 module's test).
pub(crate) fn rule() -> impl Strategy<Value = PrefixPolicy> {
    (
        prop::sample::select(&["", "p/", "a"][..]),
        prop::bool::weighted(0.2),
        prop::option::of(1u64..500),
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

fn command() -> impl Strategy<Value = Command> {
    let key = prop::sample::select(KEYS);
    prop_oneof![
        6 => grant(),
        3 => (key.clone(), 0u64..16).prop_map(|(k, t)| Command::release(k, t)),
        2 => (key, 0u64..16).prop_map(|(k, t)| Command::expire(k, t)),
        1 => prop::collection::vec(rule(), 0..3).prop_map(Command::SetPolicy),
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
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn native_and_wasm_0_2_agree((batches, restart_at) in stream()) {
        let mut native: Box<dyn ModuleMachine> = Box::new(NativeV2::default());
        let mut wasm: Box<dyn ModuleMachine> = Box::new(WasmV2::new());
        let mut crossed: Vec<Box<dyn ModuleMachine>> = Vec::new();
        for (i, batch) in batches.iter().enumerate() {
            if i == restart_at {
                let (n_snap, w_snap) = (native.snapshot(), wasm.snapshot());
                prop_assert_eq!(&n_snap, &w_snap, "snapshot bytes differ before batch {}", i);
                let mut w = WasmV2::new();
                w.restore(&n_snap).map_err(TestCaseError::fail)?;
                let mut n = NativeV2::default();
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
        prop_assert_eq!(native.downgrade_snapshot(), wasm.downgrade_snapshot());
    }
}
