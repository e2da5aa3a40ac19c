//! The module a cluster started with is replicated state
//! (docs/lock-modules.md, "The first module"): the built-in one until a
//! `Genesis` entry records another; a later upgrade, a second `Genesis`
//! (refused) and a snapshot round trip leave it as it is.

use std::sync::Arc;

use lockd_core::engine::{EngineSettings, ModuleHash, WasmEngine};
use lockd_core::entry::{Entry, LogId, Payload, Request, Response};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::Replica;
use lockd_core::snapshot::SnapshotBlob;
use lockd_core::upgrade::{Genesis, UpgradeEntry, UpgradeOutcome};
use lockd_tests::fixtures::LOCK_SM_WORLD02;

fn replica(loader: &Arc<Precompiler>) -> Replica {
    let module = loader.load(lockd_core::builtin::LOCK_SM).unwrap();
    Replica::new(1, loader.clone(), module, 4).unwrap()
}

fn apply(r: &mut Replica, index: u64, request: Request) -> UpgradeOutcome {
    let entry = Entry {
        log_id: LogId::new(1, 0, index),
        payload: Payload::Normal(request),
    };
    match r.apply([entry]).unwrap().remove(0) {
        Response::Upgrade(o) => o,
        other => panic!("answered {other:?}"),
    }
}

fn first(r: &mut Replica) -> Option<String> {
    r.view(false).first_module_hash
}

#[test]
fn the_first_module_is_replicated_and_survives_upgrades_and_snapshots() {
    let engine = Arc::new(WasmEngine::new(EngineSettings::default(), None).unwrap());
    let loader = Precompiler::new(engine);
    let builtin = ModuleHash::of(lockd_core::builtin::LOCK_SM).to_string();
    let recorded = ModuleHash::of(LOCK_SM_WORLD02).to_string();

    // A cluster that records nothing started with the built-in module.
    let mut plain = replica(&loader);
    assert_eq!(first(&mut plain), Some(builtin.clone()));

    let mut r = replica(&loader);
    let genesis = |module: &[u8]| {
        Request::Genesis(Genesis {
            module: module.to_vec(),
        })
    };
    let o = apply(&mut r, 1, genesis(LOCK_SM_WORLD02));
    assert!(matches!(o, UpgradeOutcome::Swapped { .. }), "{o:?}");
    assert_eq!(first(&mut r), Some(recorded.clone()));

    // A second Genesis is refused and changes nothing.
    let o = apply(&mut r, 2, genesis(lockd_core::builtin::LOCK_SM));
    assert!(matches!(o, UpgradeOutcome::Rejected { .. }), "{o:?}");
    assert_eq!(first(&mut r), Some(recorded.clone()));

    // An upgrade (back to the 0.1 module, the table being empty) changes
    // the active module, not the first.
    let replaces = r.module_hash();
    let back = Request::Upgrade(UpgradeEntry {
        module: lockd_core::builtin::LOCK_SM.to_vec(),
        replaces,
    });
    let o = apply(&mut r, 3, back);
    assert!(matches!(o, UpgradeOutcome::Swapped { .. }), "{o:?}");
    assert_eq!(r.module_hash().to_string(), builtin);
    assert_eq!(first(&mut r), Some(recorded.clone()));

    // Through a snapshot file, as a restart or a peer's install reads it.
    let meta = r.snapshot_meta("s".into());
    let bytes = r.snapshot_blob(meta).unwrap().encode().unwrap();
    let blob = SnapshotBlob::decode(&bytes).unwrap();
    let mut restored = Replica::from_snapshot(2, loader.clone(), &blob, 4).unwrap();
    assert_eq!(first(&mut restored), Some(recorded.clone()));
    let mut installed = replica(&loader);
    let hash = restored.state_hash().unwrap();
    installed.install(restored, hash);
    assert_eq!(first(&mut installed), Some(recorded));
}
