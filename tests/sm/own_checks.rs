//! A module's own invariants (`check-invariants`, core/src/engine/checks.rs):
//! run on the new module after the host's own checks at every migration. A
//! refusal, or a trap in the check, refuses the swap at the leader's dry
//! run and, pushed into the log, at apply on every replica alike, naming
//! the module's reason and changing nothing; the same module swaps in once
//! its rule holds. The negative control: the 0.4 reference module, which
//! has no check of its own, swaps in over the very state the fixture
//! refuses, so the refusal is the module's and not the host's.

use lockd_core::command::{Command, Outcome};
use lockd_core::engine::{ModuleHash, WasmEngine};
use lockd_core::entry::{Request, Response};
use lockd_core::replica::Replica;
use lockd_core::upgrade::{migrate, MigrateError};
use lockd_tests::fixtures::{CHECKED_GUEST, LOCK_SM_WORLD02, LOCK_SM_WORLD04};

use super::hostile_modules::settings;
use super::way_back::{at, grants, one, refused, replica_on, swapped, up};

/// The leader's dry run of an upgrade to `module`: the one migration path.
fn dry_run(r: &mut Replica, module: &[u8]) -> Result<(), MigrateError> {
    let engine = WasmEngine::new(settings(), None).unwrap();
    let module = engine.load(module).unwrap();
    let (state, before) = r.capture(module.world())?;
    migrate(&engine, &module, &state, &before).map(|_| ())
}

#[test]
fn a_modules_own_check_refuses_the_swap_at_the_dry_run_and_at_apply_alike() {
    let v04 = ModuleHash::of(LOCK_SM_WORLD04);
    let mut r = replica_on(LOCK_SM_WORLD04);
    let Response::Lock(g) = one(&mut r, 1, grants(&["a", "checked:refuse/x"])) else {
        panic!("not a lock response")
    };
    let Outcome::Granted(x) = &g[0][1] else {
        panic!("{g:?}")
    };

    let dry = dry_run(&mut r, CHECKED_GUEST);
    let Err(MigrateError::OwnCheck(why)) = &dry else {
        panic!("the dry run let it in: {dry:?}")
    };
    assert_eq!(
        why,
        "checked:refuse/x is held: this module holds no key under checked:refuse/"
    );

    // Pushed into the log anyway: every replica refuses it the same way,
    // however its entries are cut, and nothing changes.
    let hash = r.state_hash().unwrap();
    let at_apply = refused(&one(&mut r, 2, up(CHECKED_GUEST, v04)));
    assert_eq!(
        at_apply,
        format!("the new module's own check-invariants refused the migrated state: {why}")
    );
    assert_eq!(r.module_hash(), v04);
    assert_eq!(r.state_hash().unwrap(), hash);
    let mut other = replica_on(LOCK_SM_WORLD04);
    let both = other
        .apply([
            at(1, grants(&["a", "checked:refuse/x"])),
            at(2, up(CHECKED_GUEST, v04)),
        ])
        .unwrap();
    assert_eq!(refused(&both[1]), at_apply);
    assert_eq!(other.state_hash().unwrap(), hash);

    // Once the rule holds, the same module swaps in with every holding,
    // and its check runs at every later migration too.
    one(
        &mut r,
        3,
        Request::commands(vec![vec![Command::release("checked:refuse/x", x.token)]]),
    );
    assert!(dry_run(&mut r, CHECKED_GUEST).is_ok());
    assert!(swapped(&one(&mut r, 4, up(CHECKED_GUEST, v04))));
    assert_eq!(r.module_hash(), ModuleHash::of(CHECKED_GUEST));
    let held = r.list_keys("", None, 10).unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].key, "a");
}

#[test]
fn a_check_that_traps_refuses_the_swap_and_a_module_without_one_is_not_asked() {
    let v02 = ModuleHash::of(LOCK_SM_WORLD02);
    let mut r = replica_on(LOCK_SM_WORLD02);
    one(&mut r, 1, grants(&["checked:trap", "checked:refuse/y"]));

    let dry = dry_run(&mut r, CHECKED_GUEST);
    assert!(
        matches!(&dry, Err(MigrateError::OwnCheckFailed(e)) if e.to_string().contains("check-invariants")),
        "{dry:?}"
    );
    let why = refused(&one(&mut r, 2, up(CHECKED_GUEST, v02)));
    assert!(
        why.starts_with("the new module's own check-invariants failed:") && why.contains("trap"),
        "{why}"
    );
    assert_eq!(r.module_hash(), v02);

    // The negative control: the 0.4 reference module has no check of its
    // own, and the host's checks find nothing wrong with this state.
    assert!(dry_run(&mut r, LOCK_SM_WORLD04).is_ok());
    assert!(swapped(&one(&mut r, 3, up(LOCK_SM_WORLD04, v02))));
    assert_eq!(r.list_keys("", None, 10).unwrap().len(), 2);
}
