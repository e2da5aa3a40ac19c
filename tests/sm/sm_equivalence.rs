//! Property: the native and the wasm build of the state machine are the same
//! function. Random command streams, cut into random batches, give identical
//! outcomes and identical state hashes after every batch; a snapshot taken at
//! a random point and restored into a fresh instance (of either build) keeps
//! the hash and continues token assignment exactly.

use guest_sm::Command;
use lockd_tests::machines::{LockMachine, NativeMachine, WasmMachine};
use proptest::prelude::*;

const KEYS: &[&str] = &["a", "b", "c", "d", "e", "lock/with/slashes", "ключ", ""];

fn entry() -> impl Strategy<Value = Option<Command>> {
    let key = prop::sample::select(KEYS).prop_map(str::to_string);
    prop_oneof![
        4 => (key.clone(), 0u64..100_000).prop_map(|(key, lease_ms)| Some(Command::Grant { key, lease_ms })),
        3 => key.clone().prop_map(|key| Some(Command::Release { key })),
        // Small tokens so that expiries hit the holder as often as they miss.
        3 => (key, 0u64..12).prop_map(|(key, token)| Some(Command::Expire { key, token })),
        1 => Just(None),
    ]
}

fn stream() -> impl Strategy<Value = (Vec<Vec<Option<Command>>>, usize)> {
    prop::collection::vec(prop::collection::vec(entry(), 1..40), 1..30).prop_flat_map(|batches| {
        let n = batches.len();
        (Just(batches), 0..n)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn native_and_wasm_agree((batches, restart_at) in stream()) {
        let mut native: Box<dyn LockMachine> = Box::new(NativeMachine::default());
        let mut wasm: Box<dyn LockMachine> = Box::new(WasmMachine::new());
        // Restarted from a snapshot at `restart_at`: one from the native
        // snapshot into wasm, one from the wasm snapshot into native.
        let mut cross_wasm: Option<Box<dyn LockMachine>> = None;
        let mut cross_native: Option<Box<dyn LockMachine>> = None;
        for (i, batch) in batches.iter().enumerate() {
            if i == restart_at {
                let (n_snap, w_snap) = (native.snapshot(), wasm.snapshot());
                prop_assert_eq!(&n_snap, &w_snap, "snapshot bytes differ before batch {}", i);
                let mut w = WasmMachine::new();
                w.restore(&n_snap).map_err(TestCaseError::fail)?;
                let mut n = NativeMachine::default();
                n.restore(&w_snap).map_err(TestCaseError::fail)?;
                cross_wasm = Some(Box::new(w));
                cross_native = Some(Box::new(n));
            }
            let expected = native.apply(batch);
            prop_assert_eq!(&wasm.apply(batch), &expected, "outcomes differ in batch {}", i);
            let hash = native.state_hash();
            prop_assert_eq!(wasm.state_hash(), hash, "state hash differs after batch {}", i);
            for m in [&mut cross_wasm, &mut cross_native].into_iter().flatten() {
                prop_assert_eq!(&m.apply(batch), &expected, "restored {} differs in batch {}", m.name(), i);
                prop_assert_eq!(m.state_hash(), hash, "restored {} hash differs after batch {}", m.name(), i);
            }
        }
        prop_assert_eq!(native.stats(), wasm.stats());
        prop_assert_eq!(native.locks(None, u32::MAX), wasm.locks(None, u32::MAX));
    }

    /// Tokens strictly increase over every grant, whatever the stream.
    #[test]
    fn tokens_strictly_increase(batches in prop::collection::vec(prop::collection::vec(entry(), 1..40), 1..20)) {
        let mut wasm = WasmMachine::new();
        let mut last = 0;
        for batch in &batches {
            for o in wasm.apply(batch) {
                if let guest_sm::Outcome::Granted { token } = o {
                    prop_assert!(token > last, "token {} after {}", token, last);
                    last = token;
                }
            }
        }
    }
}
