//! Hostile and malformed modules: each is refused or stopped with a precise
//! error, never a panic, and the failure is the same every time.

use lockd_core::command::{Command, Granted, Outcome, Reason};
use lockd_core::engine::{EngineError, EngineSettings, GuestInstance, WasmEngine};
use lockd_tests::fixtures::{CHAOS_GUEST, EMPTY_COMPONENT, EMPTY_CORE_MODULE, IMPORT_GUEST};

/// Small limits so a hostile guest is stopped quickly.
pub(crate) fn settings() -> EngineSettings {
    EngineSettings {
        fuel_per_call: 200_000_000,
        fuel_per_state_call: 400_000_000,
        memory_limit_bytes: 64 << 20,
        ..EngineSettings::default()
    }
}

fn chaos() -> (WasmEngine, GuestInstance) {
    let engine = WasmEngine::new(settings(), None).unwrap();
    let module = engine
        .load(CHAOS_GUEST)
        .expect("the chaos guest is a valid lock module");
    let instance = engine.instantiate(&module).unwrap();
    (engine, instance)
}

#[test]
fn chaos_guest_behaves_normally_on_ordinary_input() {
    let (_e, mut g) = chaos();
    assert_eq!(
        g.apply(&[vec![Command::grant("a", 5), Command::grant("a", 5)]])
            .unwrap(),
        [[
            Outcome::Granted(Granted {
                token: 1,
                lease_ms: 5,
                repeat: false,
                count: 1
            }),
            Outcome::Rejected(Reason::Busy)
        ]]
    );
}

#[test]
fn infinite_loop_runs_out_of_fuel_and_poisons() {
    let (_e, mut g) = chaos();
    g.apply(&[vec![Command::grant("held", 100)]]).unwrap();
    let err = g
        .apply(&[vec![Command::grant("chaos:loop", 1)]])
        .unwrap_err();
    assert_eq!(
        err,
        EngineError::FuelExhausted {
            call: "apply",
            budget: 200_000_000
        }
    );
    assert_eq!(
        err.to_string(),
        "guest ran out of fuel in `apply` (budget 200000000 per call)"
    );
    // Poisoned: no later call runs on a state that may be half-changed.
    match g.holders("held") {
        Err(EngineError::Poisoned(first)) => assert!(first.contains("ran out of fuel"), "{first}"),
        other => panic!("expected Poisoned, got {other:?}"),
    }
    assert!(g.poisoned().is_some());
}

#[test]
fn memory_bomb_hits_the_limit() {
    let (_e, mut g) = chaos();
    let err = g
        .apply(&[vec![Command::grant("chaos:bomb", 1)]])
        .unwrap_err();
    assert_eq!(
        err,
        EngineError::MemoryLimit {
            call: "apply",
            limit: 64 << 20
        }
    );
    assert!(matches!(g.counters(), Err(EngineError::Poisoned(_))));
}

#[test]
fn a_trap_is_an_error_value() {
    let (_e, mut g) = chaos();
    match g.apply(&[vec![Command::grant("chaos:trap", 1)]]) {
        Err(EngineError::Trap {
            call: "apply",
            trap,
        }) => assert!(trap.contains("unreachable"), "{trap}"),
        other => panic!("expected a trap, got {other:?}"),
    }
    assert!(matches!(g.version(), Err(EngineError::Poisoned(_))));
}

#[test]
fn failures_in_restore_are_precise_and_a_refusal_keeps_the_instance() {
    let (_e, mut g) = chaos();
    g.apply(&[vec![Command::grant("kept", 1)]]).unwrap();
    let hash = g.state_hash().unwrap();
    // An error value from the guest is not a failure of the instance.
    assert_eq!(
        g.restore(b"not a snapshot"),
        Err(EngineError::RestoreRejected(
            "not a lock-sm snapshot (bad magic)".into()
        ))
    );
    assert_eq!(g.state_hash().unwrap(), hash);
    assert!(g.poisoned().is_none());
    for (input, want) in [
        (
            &b"chaos:loop"[..],
            // Restore moves the whole state: it gets the state budget.
            EngineError::FuelExhausted {
                call: "restore",
                budget: 400_000_000,
            },
        ),
        (
            b"chaos:bomb",
            EngineError::MemoryLimit {
                call: "restore",
                limit: 64 << 20,
            },
        ),
    ] {
        let (_e, mut g) = chaos();
        assert_eq!(g.restore(input), Err(want));
    }
    let (_e, mut g) = chaos();
    assert!(matches!(
        g.restore(b"chaos:trap"),
        Err(EngineError::Trap {
            call: "restore",
            ..
        })
    ));
}

#[test]
fn the_same_hostile_input_fails_identically_every_time() {
    let fails: Vec<_> = (0..3)
        .map(|_| {
            let (_e, mut g) = chaos();
            g.apply(&[vec![
                Command::grant("x", 1),
                Command::grant("chaos:loop", 1),
            ]])
            .unwrap_err()
        })
        .collect();
    assert!(fails.windows(2).all(|w| w[0] == w[1]), "{fails:?}");
}

#[test]
fn a_module_with_an_import_is_refused_at_load() {
    let engine = WasmEngine::new(settings(), None).unwrap();
    let err = engine.load(IMPORT_GUEST).err().expect("refused");
    assert_eq!(err, EngineError::HasImports(vec!["log".into()]));
    assert_eq!(
        err.to_string(),
        "module imports [\"log\"]; a lock module may import nothing"
    );
}

#[test]
fn malformed_modules_are_refused_with_precise_errors() {
    let engine = WasmEngine::new(settings(), None).unwrap();
    assert_eq!(
        engine.load(b"definitely not wasm").err(),
        Some(EngineError::NotWasm)
    );
    assert_eq!(engine.load(b"").err(), Some(EngineError::NotWasm));
    assert_eq!(
        engine.load(EMPTY_CORE_MODULE).err(),
        Some(EngineError::NotAComponent)
    );
    match engine.load(EMPTY_COMPONENT).err() {
        Some(EngineError::WrongWorld(why)) => {
            assert!(why.contains("apply") || why.contains("export"), "{why}")
        }
        other => panic!("expected WrongWorld, got {other:?}"),
    }
    // A real component cut short.
    let cut = &lockd_core::builtin::LOCK_SM[..lockd_core::builtin::LOCK_SM.len() / 2];
    assert!(matches!(
        engine.load(cut).err(),
        Some(EngineError::Invalid(_))
    ));
    // One flipped byte in the middle of the code.
    let mut flipped = lockd_core::builtin::LOCK_SM.to_vec();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0xff;
    assert!(engine.load(&flipped).is_err());
}

#[test]
fn the_builtin_module_loads_and_has_no_imports() {
    let engine = WasmEngine::new(EngineSettings::default(), None).unwrap();
    let module = engine.load(lockd_core::builtin::LOCK_SM).unwrap();
    let mut g = engine.instantiate(&module).unwrap();
    assert!(g.version().unwrap().starts_with("lock-sm/"));
    assert_eq!(
        g.apply(&[vec![Command::grant("k", 1)]]).unwrap(),
        [[Outcome::Granted(Granted {
            token: 1,
            lease_ms: 1,
            repeat: false,
            count: 1
        })]]
    );
    assert!(g.last_fuel_used() > 0);
}
