//! A module a node cannot run (`core/src/replica/cannot_run.rs`) and the
//! quorum pre-check's record (`core/src/precheck.rs`): a replica whose own
//! bound is below a module stops just before the swap to it (its peers
//! swap; it must not reject what they made), says why, and applies
//! nothing more; the same log on a replica with room swaps. A module the
//! record says a quorum accepted that does not load here stops the node
//! too, while the same bytes with no record admitting them are rejected
//! alike everywhere, as before (the negative control). The record is kept
//! within its bounds and survives a snapshot.

use std::sync::Arc;

use lockd_core::builtin::LOCK_SM;
use lockd_core::engine::{EngineError, ModuleHash, WasmEngine};
use lockd_core::entry::{Entry, Request, SnapshotMeta};
use lockd_core::precheck::{NodeVerdict, PrecheckRecord, MAX_VERDICTS};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::Replica;
use lockd_core::snapshot::SnapshotBlob;
use lockd_tests::fixtures::{EMPTY_COMPONENT, LOCK_SM_WORLD02};

use super::hostile_modules::settings;
use super::way_back::{at, grants, refused, swapped, up};

/// A replica on the built-in (0.1) module whose node runs modules of at
/// most `max` bytes.
fn replica(max: Option<usize>) -> Replica {
    let engine = Arc::new(WasmEngine::new(settings(), None).unwrap());
    let loader = Precompiler::limited(engine, max);
    let module = loader.load(LOCK_SM).unwrap();
    Replica::new(3, loader, module, 1000).unwrap()
}

/// A record of `module` where nodes 1 and 2 accepted and node 3 refused,
/// enacted with `quorum`.
fn record(module: &[u8]) -> Request {
    let verdict = |node, accepted| NodeVerdict {
        node,
        accepted,
        answered: true,
        reason: (!accepted).then(|| "too big".to_string()),
    };
    Request::Precheck(PrecheckRecord {
        module: ModuleHash::of(module),
        quorum: true,
        enacted: true,
        verdicts: vec![verdict(1, true), verdict(2, true), verdict(3, false)],
    })
}

/// A grant, the record, the swap to `module`, another grant.
fn log(module: &[u8]) -> Vec<Entry> {
    let v01 = ModuleHash::of(LOCK_SM);
    vec![
        at(1, grants(&["a"])),
        at(2, record(module)),
        at(3, up(module, v01)),
        at(4, grants(&["b"])),
    ]
}

#[test]
fn a_node_whose_bound_is_below_the_module_stops_before_the_swap_its_peers_make() {
    let v02 = ModuleHash::of(LOCK_SM_WORLD02);
    let mut roomy = replica(None);
    let answers = roomy.apply(log(LOCK_SM_WORLD02)).unwrap();
    assert!(swapped(&answers[2]), "{:?}", answers[2]);
    assert_eq!(roomy.module_hash(), v02);

    let mut small = replica(Some(LOCK_SM_WORLD02.len() - 1));
    let err = small.apply(log(LOCK_SM_WORLD02)).unwrap_err();
    let EngineError::CannotRun(why) = &err else {
        panic!("{err:?}")
    };
    assert!(why.contains("--max-module-bytes"), "{why}");
    let view = small.view(false);
    let cannot = view.module_cannot_run.expect("recorded");
    assert_eq!((cannot.index, cannot.module_hash), (3, v02.to_string()));
    // Applied up to the entry before the swap, on the module before it.
    assert_eq!(small.last_applied().map(|l| l.index), Some(2));
    assert_eq!(small.module_hash(), ModuleHash::of(LOCK_SM));
    let later = small.apply([at(5, grants(&["c"]))]).unwrap_err();
    assert!(matches!(later, EngineError::CannotRun(_)), "{later:?}");

    // Restarted with a bound that fits: the same log swaps.
    let mut restarted = replica(Some(LOCK_SM_WORLD02.len()));
    let answers = restarted.apply(log(LOCK_SM_WORLD02)).unwrap();
    assert!(swapped(&answers[2]));
    assert_eq!(restarted.state_hash().unwrap(), roomy.state_hash().unwrap());
}

#[test]
fn a_module_a_quorum_loaded_that_does_not_load_here_stops_the_node_not_the_swap() {
    // Bytes no node can load stand for a module this node's engine cannot
    // compile while its peers can: the record says a quorum loaded them.
    let mut r = replica(None);
    let err = r.apply(log(EMPTY_COMPONENT)).unwrap_err();
    let EngineError::CannotRun(why) = &err else {
        panic!("{err:?}")
    };
    assert!(why.contains("though a quorum of voters loaded it"), "{why}");
    assert_eq!(r.last_applied().map(|l| l.index), Some(2));

    // The negative control: no record admits them (pushed with
    // `precheck=false`), so the failure is everyone's: rejected, and the
    // replica goes on.
    let v01 = ModuleHash::of(LOCK_SM);
    let mut control = replica(None);
    let answers = control
        .apply([
            at(1, grants(&["a"])),
            at(2, up(EMPTY_COMPONENT, v01)),
            at(3, grants(&["b"])),
        ])
        .unwrap();
    assert!(!refused(&answers[1]).is_empty());
    assert_eq!(control.last_applied().map(|l| l.index), Some(3));
    assert!(control.view(false).module_cannot_run.is_none());
    // Nor does a record of another module, or one not enacted.
    let mut other = replica(None);
    let not_enacted = match record(EMPTY_COMPONENT) {
        Request::Precheck(p) => Request::Precheck(PrecheckRecord {
            enacted: false,
            ..p
        }),
        _ => unreachable!(),
    };
    let answers = other
        .apply([
            at(1, record(LOCK_SM_WORLD02)),
            at(2, up(EMPTY_COMPONENT, v01)),
            at(3, not_enacted),
            at(4, up(EMPTY_COMPONENT, v01)),
        ])
        .unwrap();
    assert!(!refused(&answers[1]).is_empty());
    assert!(!refused(&answers[3]).is_empty());
}

#[test]
fn the_record_is_kept_within_its_bounds_and_survives_a_snapshot() {
    let mut r = replica(None);
    let hostile = PrecheckRecord {
        module: ModuleHash([9; 32]),
        quorum: false,
        enacted: true,
        verdicts: (0..500)
            .map(|node| NodeVerdict {
                node,
                accepted: false,
                answered: true,
                reason: Some("x".repeat(100_000)),
            })
            .collect(),
    };
    r.apply([at(1, Request::Precheck(hostile))]).unwrap();
    let kept = r.view(false).module_precheck.expect("kept");
    assert_eq!(kept.index, 1);
    assert_eq!(kept.verdicts.len(), MAX_VERDICTS);
    assert!(kept
        .verdicts
        .iter()
        .all(|v| v.reason.as_ref().is_some_and(|r| r.len() <= 1100)));

    let blob = r
        .snapshot_blob(SnapshotMeta {
            last_log_id: r.last_applied(),
            ..SnapshotMeta::default()
        })
        .unwrap();
    let back = SnapshotBlob::decode(&blob.encode().unwrap()).unwrap();
    let engine = Arc::new(WasmEngine::new(settings(), None).unwrap());
    let mut restored = Replica::from_snapshot(2, Precompiler::new(engine), &back, 1000).unwrap();
    assert_eq!(restored.view(false).module_precheck, Some(kept));
}
