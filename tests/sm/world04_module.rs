//! The 0.4 reference module as the node runs it (through `lockd-core`'s
//! engine): it imports nothing and describes itself as world 0.4; its
//! `pick` is the native election policy (`lock_logic::pick`) on random
//! candidate lists; its state is the 0.3 module's byte for byte, both
//! ways; and a pick that fails answers FIFO, is counted, and leaves the
//! next pick working.

use guest_sm_world03 as logic;
use lockd_core::builtin::{LOCK_SM_0_3, LOCK_SM_0_4};
use lockd_core::command::{Command, Grant, Holder, Mode};
use lockd_core::engine::{Candidate, EngineSettings, GuestInstance, Picker, WasmEngine, World};
use proptest::prelude::*;

fn engine(settings: EngineSettings) -> WasmEngine {
    WasmEngine::new(settings, None).expect("the node's engine")
}

fn instance(engine: &WasmEngine, bytes: &[u8]) -> GuestInstance {
    let module = engine.load(bytes).expect("a built-in module loads");
    engine.instantiate(&module).expect("and instantiates")
}

#[test]
fn the_0_4_module_imports_nothing_and_describes_itself() {
    let e = engine(EngineSettings::default());
    let module = e.load(LOCK_SM_0_4).expect("loads: no imports");
    assert_eq!(module.world(), World::V04);
    let mut sm = e.instantiate(&module).unwrap();
    assert_eq!(sm.world(), World::V04);
    let f = sm.features().unwrap();
    assert_eq!(f.world_id, "lockd:sm/lock-sm@0.4.0");
    assert!(f.sessions && f.reentrant && f.values);
    assert!(sm.version().unwrap().contains("world lockd:sm@0.4.0"));
    // The 0.3 module has no pick: FIFO, without a call.
    let mut old = instance(&e, LOCK_SM_0_3);
    assert_eq!(old.world(), World::V03);
    let two = [candidate("a", 0, false), candidate("b", 9, false)];
    assert_eq!(old.pick("k", None, &two).unwrap(), None);
    assert_eq!(sm.pick("k", None, &two).unwrap(), Some(1));
}

fn candidate(owner: &str, priority: u32, shared: bool) -> Candidate {
    Candidate {
        holder: Holder {
            principal: "p".into(),
            owner: owner.into(),
        },
        mode: if shared {
            Mode::Shared
        } else {
            Mode::Exclusive
        },
        priority,
    }
}

fn native(leaving: Option<&Holder>, list: &[Candidate]) -> Option<usize> {
    let list: Vec<logic::Candidate> = list
        .iter()
        .map(|c| logic::Candidate {
            holder: logic::Holder::new(c.holder.principal.clone(), c.holder.owner.clone()),
            mode: match c.mode {
                Mode::Exclusive => logic::Mode::Exclusive,
                Mode::Shared => logic::Mode::Shared,
            },
            priority: c.priority,
        })
        .collect();
    let leaving = leaving.map(|h| logic::Holder::new(h.principal.clone(), h.owner.clone()));
    logic::pick(leaving.as_ref(), &list).map(|i| i as usize)
}

fn candidates() -> impl Strategy<Value = Vec<Candidate>> {
    prop::collection::vec(
        (
            prop::sample::select(&["", "a", "b", "c"][..]),
            prop_oneof![3 => Just(0u32), 1 => 0u32..4, 1 => Just(u32::MAX)],
            any::<bool>(),
        )
            .prop_map(|(o, p, s)| candidate(o, p, s)),
        0..70,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_components_pick_is_the_native_policy(
        list in candidates(),
        leaving in prop::option::of(prop::sample::select(&["", "a", "c"][..])),
    ) {
        thread_local! {
            static SM: std::cell::RefCell<GuestInstance> = std::cell::RefCell::new(
                instance(&engine(EngineSettings::default()), LOCK_SM_0_4));
        }
        let leaving = leaving.map(|o| Holder { principal: "p".into(), owner: o.into() });
        let wasm = SM.with(|sm| sm.borrow_mut().pick("k", leaving.as_ref(), &list)).unwrap();
        prop_assert_eq!(wasm, native(leaving.as_ref(), &list));
    }
}

#[test]
fn the_state_moves_between_0_3_and_0_4_byte_for_byte() {
    let e = engine(EngineSettings::default());
    let mut v3 = instance(&e, LOCK_SM_0_3);
    let grant = |key: &str, owner: &str, value: &str| {
        Command::Grant(Grant {
            holder: Holder {
                principal: "p".into(),
                owner: owner.into(),
            },
            value: value.into(),
            reentrant: true,
            ..match Command::grant(key, 5_000) {
                Command::Grant(g) => g,
                _ => unreachable!("a grant"),
            }
        })
    };
    let entry = vec![
        grant("leader/a", "n1", "10.0.0.1"),
        grant("leader/a", "n1", ""),
        grant("jobs/x", "w", ""),
    ];
    v3.apply(std::slice::from_ref(&entry)).unwrap();
    let bytes = v3.snapshot().unwrap();
    let mut v4 = instance(&e, LOCK_SM_0_4);
    v4.restore(&bytes).unwrap();
    assert_eq!(v4.snapshot().unwrap(), bytes);
    assert_eq!(v4.state_hash().unwrap(), v3.state_hash().unwrap());
    // The same commands from there give the same answers and state.
    let next = vec![Command::release("leader/a", 1), grant("jobs/y", "w", "v")];
    assert_eq!(
        v4.apply(std::slice::from_ref(&next)).unwrap(),
        v3.apply(&[next]).unwrap()
    );
    let back = v4.snapshot().unwrap();
    let mut again = instance(&e, LOCK_SM_0_3);
    again.restore(&back).unwrap();
    assert_eq!(again.snapshot().unwrap(), v3.snapshot().unwrap());
}

/// The negative control of the isolation: with a fuel budget too small
/// for any call, the pick fails; the answer is FIFO, the failure is
/// counted, and the next pick (on a fresh instance) is asked again.
#[test]
fn a_failing_pick_answers_fifo_and_is_counted() {
    let starved = engine(EngineSettings {
        fuel_per_call: 1,
        ..EngineSettings::default()
    });
    let module = starved.load(LOCK_SM_0_4).unwrap();
    let mut picker = Picker::default();
    let list = [candidate("a", 0, false), candidate("b", 5, false)];
    assert_eq!(picker.pick(&starved, &module, "k", None, &list), None);
    assert_eq!(picker.pick(&starved, &module, "k", None, &list), None);
    assert_eq!(picker.failures, 2);
    // The same picker type with a budget that fits picks the priority.
    let e = engine(EngineSettings::default());
    let module = e.load(LOCK_SM_0_4).unwrap();
    let mut picker = Picker::default();
    assert_eq!(picker.pick(&e, &module, "k", None, &list), Some(1));
    assert_eq!(picker.failures, 0);
}

/// The reference pick of the most candidates a leader offers (64) takes
/// a small part of a pick's budget.
#[test]
fn the_reference_pick_fits_its_budget_many_times_over() {
    let e = engine(EngineSettings::default());
    let mut sm = instance(&e, LOCK_SM_0_4);
    let list: Vec<Candidate> = (0..64)
        .map(|i| candidate(&format!("candidate-{i}"), i % 5, i % 2 == 0))
        .collect();
    let leaving = Holder {
        principal: "p".into(),
        owner: "candidate-63".into(),
    };
    assert_eq!(sm.pick("k", Some(&leaving), &list).unwrap(), Some(4));
    let used = sm.last_fuel_used();
    assert!(
        used * 20 < lockd_core::engine::pick::PICK_FUEL,
        "{used} fuel for 64 candidates"
    );
}
