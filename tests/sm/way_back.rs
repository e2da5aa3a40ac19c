//! Versions and the way back (`core/src/way_back.rs`): a versioned upgrade
//! must go up unless marked as a rollback; a rollback returns to the
//! recorded previous module with every holding and token; a module that
//! goes out of service with `on_failure` `rollback` is left for the
//! previous one at the same index on every replica however its entries
//! are cut; the way back survives a snapshot. Entries written before
//! versions are decided as they were.

use std::sync::Arc;

use lockd_core::builtin::LOCK_SM;
use lockd_core::command::{Command, Mode, Outcome};
use lockd_core::engine::{ModuleHash, WasmEngine};
use lockd_core::entry::{Entry, LogId, Payload, Request, Response, SnapshotMeta};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::Replica;
use lockd_core::signature::SignedFor;
use lockd_core::snapshot::SnapshotBlob;
use lockd_core::upgrade::{UpgradeEntry, UpgradeOutcome};
use lockd_core::way_back::{OnModuleFailure, RollbackEntry, VersionedUpgrade};
use lockd_tests::fixtures::{CHAOS_GUEST, LOCK_SM_WORLD01_V2, LOCK_SM_WORLD02};

use super::hostile_modules::settings;
use super::isolated_failures::apply_cut;

fn loader() -> Arc<Precompiler> {
    Precompiler::new(Arc::new(WasmEngine::new(settings(), None).unwrap()))
}

/// A replica on `module`, nothing applied.
pub(crate) fn replica_on(module: &[u8]) -> Replica {
    let loader = loader();
    let module = loader.load(module).unwrap();
    Replica::new(1, loader, module, 1000).unwrap()
}

pub(crate) fn at(index: u64, request: Request) -> Entry {
    Entry {
        log_id: LogId::new(1, 0, index),
        payload: Payload::Normal(request),
    }
}

pub(crate) fn versioned(
    module: &[u8],
    replaces: ModuleHash,
    rollback: bool,
    on_failure: OnModuleFailure,
) -> Request {
    Request::VersionedUpgrade(VersionedUpgrade {
        upgrade: UpgradeEntry {
            module: module.to_vec(),
            replaces,
        },
        signature: None,
        signed_for: SignedFor::Upgrade,
        rollback,
        on_failure,
    })
}

pub(crate) fn up(module: &[u8], replaces: ModuleHash) -> Request {
    versioned(module, replaces, false, OnModuleFailure::Refuse)
}

fn rollback(replaces: ModuleHash, to: ModuleHash) -> Request {
    Request::Rollback(RollbackEntry { replaces, to })
}

pub(crate) fn grants(keys: &[&str]) -> Request {
    Request::commands(vec![keys
        .iter()
        .map(|k| Command::grant(*k, 60_000))
        .collect()])
}

/// The one response of applying `request` at `index`.
pub(crate) fn one(r: &mut Replica, index: u64, request: Request) -> Response {
    r.apply([at(index, request)]).unwrap().remove(0)
}

pub(crate) fn swapped(resp: &Response) -> bool {
    matches!(resp, Response::Upgrade(UpgradeOutcome::Swapped { .. }))
}

pub(crate) fn refused(resp: &Response) -> String {
    match resp {
        Response::Upgrade(UpgradeOutcome::Rejected { reason, .. }) => reason.clone(),
        other => panic!("not refused: {other:?}"),
    }
}

/// Every holding, as (key, token).
fn holdings(r: &mut Replica) -> Vec<(String, u64)> {
    r.list_keys("", None, 1000)
        .unwrap()
        .into_iter()
        .flat_map(|k| k.holders.into_iter().map(move |h| (k.key.clone(), h.token)))
        .collect()
}

#[test]
fn a_versioned_upgrade_goes_up_and_a_rollback_returns_with_every_holding() {
    let (v01, v02) = (ModuleHash::of(LOCK_SM), ModuleHash::of(LOCK_SM_WORLD02));
    let mut r = replica_on(LOCK_SM);
    one(&mut r, 1, grants(&["a", "b"]));
    assert!(swapped(&one(&mut r, 2, up(LOCK_SM_WORLD02, v01))));
    assert_eq!(r.previous_module().map(|p| p.0), Some(v01));
    one(&mut r, 3, grants(&["c"]));
    let held = holdings(&mut r);
    assert_eq!(held.len(), 3);

    // Down (0.3.0 → 0.2.0) or equal: refused unless marked, nothing changes.
    let down = refused(&one(&mut r, 4, up(LOCK_SM_WORLD01_V2, v02)));
    assert!(
        down.contains("0.2.0 is not above the active module's 0.3.0"),
        "{down}"
    );
    let same = refused(&one(&mut r, 5, up(LOCK_SM_WORLD02, v02)));
    assert!(same.contains("not above"), "{same}");
    assert_eq!(r.module_hash(), v02);
    // Stale rollbacks: another module left, another returned to.
    let stale = refused(&one(&mut r, 6, rollback(v01, v01)));
    assert!(stale.starts_with("stale upgrade"), "{stale}");
    let other = refused(&one(
        &mut r,
        7,
        rollback(v02, ModuleHash::of(LOCK_SM_WORLD01_V2)),
    ));
    assert!(other.starts_with("stale rollback"), "{other}");

    // Back to 0.1: every holding with its token; tokens go on above.
    assert!(swapped(&one(&mut r, 8, rollback(v02, v01))));
    assert_eq!(r.module_hash(), v01);
    assert_eq!(holdings(&mut r), held);
    let Response::Lock(g) = one(&mut r, 9, grants(&["d"])) else {
        panic!()
    };
    let Outcome::Granted(d) = &g[0][0] else {
        panic!("{g:?}")
    };
    assert!(held.iter().all(|(_, t)| *t < d.token));
    // One step: no way back from a rollback.
    assert_eq!(r.previous_module(), None);
    let none = refused(&one(&mut r, 10, rollback(v01, v02)));
    assert!(none.contains("no previous module"), "{none}");
    // Marked as a rollback, an older module with bytes comes in (and 0.1
    // → 0.2.0 is up anyway).
    assert!(swapped(&one(&mut r, 11, up(LOCK_SM_WORLD02, v01))));
    let marked = versioned(LOCK_SM_WORLD01_V2, v02, true, OnModuleFailure::Refuse);
    assert!(swapped(&one(&mut r, 12, marked)));
    assert_eq!(r.previous_module().map(|p| p.0), Some(v02));
}

/// The negative controls: an entry written before versions is decided as
/// it was (no version rule, no way back); a rollback that cannot keep the
/// state (a shared holding, which 0.1 cannot hold) is refused, the module
/// stays.
#[test]
fn entries_before_versions_keep_their_rule_and_a_rollback_that_loses_state_is_refused() {
    let (v01, v02) = (ModuleHash::of(LOCK_SM), ModuleHash::of(LOCK_SM_WORLD02));
    let mut r = replica_on(LOCK_SM_WORLD02);
    let legacy = |module: &[u8], replaces| {
        Request::Upgrade(UpgradeEntry {
            module: module.to_vec(),
            replaces,
        })
    };
    assert!(swapped(&one(&mut r, 1, legacy(LOCK_SM, v02))));
    assert_eq!(r.previous_module(), None, "no way back from an old entry");

    assert!(swapped(&one(&mut r, 2, up(LOCK_SM_WORLD02, v01))));
    let mut shared = Command::grant("s", 60_000);
    if let Command::Grant(g) = &mut shared {
        g.mode = Mode::Shared;
        g.limit = 2;
    }
    one(&mut r, 3, Request::commands(vec![vec![shared]]));
    let why = refused(&one(&mut r, 4, rollback(v02, v01)));
    assert!(why.contains("cannot represent"), "{why}");
    assert_eq!(r.module_hash(), v02);
    assert_eq!(r.previous_module().map(|p| p.0), Some(v01), "still there");
}

/// Entries 1..=last after an upgrade to the chaos module at index 1: a
/// grant of `k{i}`, but of the trapping key at each of `traps`.
fn chaos_run(on_failure: OnModuleFailure, last: u64, traps: &[u64]) -> Vec<Entry> {
    let to_chaos = versioned(CHAOS_GUEST, ModuleHash::of(LOCK_SM), false, on_failure);
    std::iter::once(at(1, to_chaos))
        .chain((2..=last).map(|i| {
            let key = if traps.contains(&i) {
                "chaos:trap".to_string()
            } else {
                format!("k{i}")
            };
            at(i, grants(&[key.as_str()]))
        }))
        .collect()
}

#[test]
fn a_module_out_of_service_falls_back_to_the_previous_one_at_the_same_index_however_cut() {
    let traps: Vec<u64> = (1..=8).map(|i| i * 7).collect();
    let entries = chaos_run(OnModuleFailure::Rollback, 70, &traps);
    let n = entries.len();
    let cuts: [Vec<(usize, usize)>; 3] = [
        vec![(0, n)],
        (0..n).step_by(5).map(|a| (a, (a + 5).min(n))).collect(),
        (0..n).map(|a| (a, a + 1)).collect(),
    ];
    let mut seen: Option<(Vec<Response>, [u8; 32])> = None;
    for cut in &cuts {
        let mut r = replica_on(LOCK_SM);
        let out = apply_cut(&mut r, &entries, cut);
        assert!(swapped(&out[0]), "{cut:?}");
        assert_eq!(
            r.module_hash(),
            ModuleHash::of(LOCK_SM),
            "{cut:?}: fell back"
        );
        let v = r.view(false);
        assert_eq!(v.module_out_of_service, None, "{cut:?}");
        let fell = v.module_way_back.fell_back.expect("fell back");
        assert_eq!((fell.index, fell.swapped), (64, true), "{cut:?}");
        assert_eq!(fell.from, ModuleHash::of(CHAOS_GUEST).to_string());
        assert_eq!(v.module_way_back.previous_module_hash, None, "{cut:?}");
        // After 64 the previous module serves, the magic key included.
        let Response::Lock(g) = &out[69] else {
            panic!()
        };
        assert!(matches!(g[0][0], Outcome::Granted(_)), "{cut:?}: {g:?}");
        let Response::Lock(g) = one(&mut r, 71, grants(&["chaos:trap"])) else {
            panic!()
        };
        assert!(matches!(g[0][0], Outcome::Granted(_)), "{g:?}");
        let hash = r.state_hash().unwrap();
        match &seen {
            None => seen = Some((out, hash)),
            Some((o, h)) => {
                assert_eq!(&out, o, "{cut:?}: outcomes differ by cut");
                assert_eq!(&hash, h, "{cut:?}: state differs by cut");
            }
        }
    }

    // The negative control: with `refuse` chosen, the same run leaves the
    // failing module in place, out of service.
    let mut r = replica_on(LOCK_SM);
    r.apply(chaos_run(OnModuleFailure::Refuse, 70, &traps))
        .unwrap();
    assert_eq!(r.module_hash(), ModuleHash::of(CHAOS_GUEST));
    let v = r.view(false);
    assert_eq!(v.module_out_of_service.map(|o| o.since), Some(64));
    assert_eq!(v.module_way_back.fell_back, None);
}

#[test]
fn the_way_back_survives_a_snapshot() {
    let v01 = ModuleHash::of(LOCK_SM);
    let mut r = replica_on(LOCK_SM);
    one(&mut r, 1, grants(&["a"]));
    let to_v2 = versioned(LOCK_SM_WORLD02, v01, false, OnModuleFailure::Rollback);
    assert!(swapped(&one(&mut r, 2, to_v2)));
    let blob = r.snapshot_blob(SnapshotMeta::default()).unwrap();
    let back = SnapshotBlob::decode(&blob.encode().unwrap()).unwrap();
    let mut restored = Replica::from_snapshot(2, loader(), &back, 1000).unwrap();
    assert_eq!(
        restored.view(false).module_way_back,
        r.view(false).module_way_back
    );
    let back_to = rollback(ModuleHash::of(LOCK_SM_WORLD02), v01);
    assert!(swapped(&one(&mut restored, 3, back_to.clone())));
    assert!(swapped(&one(&mut r, 3, back_to)));
    assert_eq!(restored.state_hash().unwrap(), r.state_hash().unwrap());
    assert_eq!(restored.module_hash(), v01);
}
