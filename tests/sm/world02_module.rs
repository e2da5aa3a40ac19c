//! The 0.2 reference module as a component: it imports nothing, describes
//! itself, takes over a running 0.1 module's state (both 0.1 snapshot
//! formats, as written by the 0.1 components themselves) and hands it back
//! on a downgrade, answers its state hash at a cost that does not grow with
//! the table, and refuses hostile snapshots without trapping.

use guest_sm_world02::{Command, Grant};
use lockd_core::command::{Command as V1, Granted as V1Granted, Outcome as V1Out};
use lockd_tests::fixtures::{LOCK_SM_WORLD01_V2, LOCK_SM_WORLD02};
use lockd_tests::machines::builtin;
use lockd_tests::world02::machine::ModuleMachine;
use lockd_tests::world02::wasm::{import_count, WasmV2};
use proptest::prelude::*;

#[test]
fn the_component_imports_nothing_and_describes_itself() {
    assert_eq!(import_count(LOCK_SM_WORLD02), 0);
    let mut m = WasmV2::new();
    assert_eq!(m.features(), guest_sm_world02::features());
    assert_eq!(m.features().world_id, "lockd:sm/lock-sm@0.2.0");
    assert_eq!(m.version(), guest_sm_world02::VERSION);
    assert!(m.version().contains("world lockd:sm@0.2.0"));
}

#[test]
fn a_running_0_1_module_upgrades_to_0_2_and_back() {
    let (engine, v1_module) = builtin();
    let mut v1 = engine.instantiate(v1_module).unwrap();
    v1.apply(&[vec![
        V1::grant("a", 100),
        V1::grant("b", 200),
        V1::release("a", 1),
        V1::grant("c", 300),
    ]])
    .unwrap();
    let mut v2 = WasmV2::new();
    v2.restore(&v1.snapshot().unwrap())
        .expect("0.2 migrates the 0.1 module's snapshot");
    let b = v2.holders("b");
    assert_eq!(
        (b[0].token, b[0].lease_ms, b[0].holder.clone()),
        (2, 200, None)
    );
    assert_eq!(v2.counters().next_token, 4);
    let out = v2.apply(&[vec![
        Command::Grant(Grant::exclusive("b", 1)),
        Command::Grant(Grant::exclusive("d", 1)),
        Command::release("c", 3),
    ]]);
    assert_eq!(
        out[0][1],
        guest_sm_world02::Outcome::Granted {
            token: 4,
            lease_ms: 1,
            repeat: false,
            count: 1
        },
        "{out:?}"
    );

    // And back: the 0.1 module restores the downgrade and continues.
    let mut back = engine.instantiate(v1_module).unwrap();
    back.restore(&v2.downgrade_snapshot().unwrap()).unwrap();
    let locks = back.list_keys("", None, 10).unwrap();
    let keys: Vec<(&str, u64)> = locks
        .iter()
        .map(|l| (l.key.as_str(), l.holders[0].token))
        .collect();
    assert_eq!(keys, [("b", 2), ("d", 4)]);
    assert_eq!(
        back.apply(&[vec![V1::grant("e", 1)]]).unwrap(),
        [[V1Out::Granted(V1Granted {
            token: 5,
            lease_ms: 1,
            repeat: false,
            count: 1
        })]]
    );
}

#[test]
fn a_running_format_2_module_upgrades_to_0_2_keeping_its_reserved_prefix() {
    let (engine, _) = builtin();
    let module = engine.load(LOCK_SM_WORLD01_V2).unwrap();
    let mut old = engine.instantiate(&module).unwrap();
    old.apply(&[vec![V1::grant("x", 5)]]).unwrap();
    let mut v2 = WasmV2::new();
    v2.restore(&old.snapshot().unwrap()).unwrap();
    assert_eq!(v2.policy()[0].prefix, "reserved/");
    let out = v2.apply(&[vec![Command::Grant(Grant::exclusive("reserved/a", 1))]]);
    assert!(
        matches!(
            &out[0][0],
            guest_sm_world02::Outcome::Rejected(guest_sm_world02::Reason::Policy(_))
        ),
        "{out:?}"
    );
}

/// The state hash is kept up to date as commands apply, so asking for it
/// costs the same fuel for ten holdings as for thousands, while a snapshot
/// (which must walk the table) costs more the larger the table: the
/// measurement can tell the two apart.
#[test]
fn the_state_hash_costs_the_same_for_any_table_size() {
    let cost = |holdings: usize| {
        let mut m = WasmV2::new();
        let entry: Vec<Command> = (0..holdings)
            .map(|i| {
                Command::Grant(
                    Grant::shared(format!("key/{}", i % 500), 10)
                        .limit(100)
                        .by("p", "o"),
                )
            })
            .collect();
        m.apply(&[entry]);
        m.state_hash();
        let hash = m.last_fuel_used();
        m.snapshot();
        (hash, m.last_fuel_used())
    };
    let (small_hash, small_snap) = cost(10);
    let (large_hash, large_snap) = cost(5000);
    assert!(
        large_hash <= small_hash + small_hash / 10,
        "state-hash: {small_hash} fuel for 10 holdings, {large_hash} for 5000"
    );
    assert!(
        large_snap > 50 * small_snap,
        "snapshot: {small_snap} fuel for 10 holdings, {large_snap} for 5000"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Arbitrary bytes as a snapshot: the module refuses them with an error
    /// value (a trap would fail the call) and keeps its state.
    #[test]
    fn hostile_snapshots_are_refused_without_a_trap(
        mut bytes in prop::collection::vec(any::<u8>(), 0..300),
        format in 0u8..5,
    ) {
        if format > 0 {
            bytes.splice(0..0, [b'L', b'K', b'S', b'M', format]);
        }
        let mut m = WasmV2::new();
        m.apply(&[vec![Command::Grant(Grant::shared("kept", 5).limit(2))]]);
        let before = m.state_hash();
        if m.restore(&bytes).is_err() {
            prop_assert_eq!(m.state_hash(), before);
        }
    }
}
