//! The cluster's capacity bound on the node's apply path ([`Replica`]):
//! grants past either bound are refused with the capacity reason while the
//! other commands of their group still apply; the answers and the state
//! are the same however the committed entries are cut into `apply` calls;
//! the bounds and their use survive a snapshot; and an upgrade to the 0.2
//! module counts the migrated holdings again.

use std::sync::Arc;

use lockd_core::command::{is_capacity, Command, Outcome, Reason};
use lockd_core::engine::{EngineSettings, WasmEngine};
use lockd_core::entry::{Entry, LogId, Payload, Request, Response, SnapshotMeta};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::capacity::Capacity;
use lockd_core::replica::capacity::DEFAULT_CAPACITY;
use lockd_core::replica::Replica;
use lockd_core::snapshot::SnapshotBlob;
use lockd_core::upgrade::{UpgradeEntry, UpgradeOutcome};
use lockd_tests::fixtures::LOCK_SM_WORLD02;

fn loader() -> Arc<Precompiler> {
    let engine = Arc::new(WasmEngine::new(EngineSettings::default(), None).unwrap());
    Precompiler::new(engine)
}

fn replica(module: &[u8]) -> Replica {
    let loader = loader();
    let module = loader.load(module).unwrap();
    Replica::new(1, loader, module, 4).unwrap()
}

fn entries(requests: Vec<Request>) -> Vec<Entry> {
    requests
        .into_iter()
        .enumerate()
        .map(|(i, r)| Entry {
            log_id: LogId::new(1, 0, i as u64 + 1),
            payload: Payload::Normal(r),
        })
        .collect()
}

/// Three holdings or 12 key bytes at most; then a flood: entries of
/// grants, a group that releases and grants together, more grants.
fn workload() -> Vec<Request> {
    let mut r = vec![Request::Capacity(Capacity {
        max_held: 3,
        max_key_bytes: 12,
    })];
    for i in 0..4 {
        r.push(Request::commands(vec![vec![Command::grant(
            format!("k{i}"),
            1000,
        )]]));
    }
    // Full (3 held): the release applies, its grant is refused.
    r.push(Request::commands(vec![vec![
        Command::release("k0", 1),
        Command::grant("k9", 1000),
    ]]));
    // Room for one again, but not for a 20-byte key.
    r.push(Request::commands(vec![
        vec![Command::grant("a-key-of-20-bytes-xx", 1000)],
        vec![Command::grant("k5", 1000)],
        vec![Command::grant("k6", 1000)],
    ]));
    r
}

fn lock_outcomes(responses: &[Response]) -> Vec<Vec<Vec<Outcome>>> {
    responses
        .iter()
        .filter_map(|r| match r {
            Response::Lock(o) => Some(o.clone()),
            _ => None,
        })
        .collect()
}

fn capacity_refused(o: &Outcome) -> bool {
    matches!(o, Outcome::Rejected(Reason::Quota(why)) if is_capacity(why))
}

#[test]
fn grants_past_a_bound_are_refused_and_everything_else_applies() {
    for module in [lockd_core::builtin::LOCK_SM, LOCK_SM_WORLD02] {
        let mut r = replica(module);
        let out = lock_outcomes(&r.apply(entries(workload())).unwrap());
        let first: Vec<&Outcome> = out[..4].iter().map(|e| &e[0][0]).collect();
        assert!(first[..3].iter().all(|o| matches!(o, Outcome::Granted(_))));
        assert!(capacity_refused(first[3]), "{:?}", first[3]);
        assert!(matches!(out[4][0][0], Outcome::Released(_)), "{:?}", out[4]);
        assert!(capacity_refused(&out[4][0][1]), "{:?}", out[4]);
        let last = &out[5];
        assert!(capacity_refused(&last[0][0]), "20 key bytes: {:?}", last[0]);
        assert!(matches!(last[1][0], Outcome::Granted(_)), "{:?}", last[1]);
        assert!(capacity_refused(&last[2][0]), "{:?}", last[2]);
        let c = r.capacity();
        assert_eq!((c.held, c.key_bytes), (3, 6));
        assert_eq!(r.counters().unwrap().holders, 3);
    }
}

#[test]
fn the_answers_do_not_depend_on_how_entries_are_cut_into_calls() {
    let all_at_once = {
        let mut r = replica(lockd_core::builtin::LOCK_SM);
        let out = lock_outcomes(&r.apply(entries(workload())).unwrap());
        (out, r.state_hash().unwrap())
    };
    let one_by_one = {
        let mut r = replica(lockd_core::builtin::LOCK_SM);
        let mut out = Vec::new();
        for e in entries(workload()) {
            out.extend(lock_outcomes(&r.apply([e]).unwrap()));
        }
        (out, r.state_hash().unwrap())
    };
    assert_eq!(all_at_once, one_by_one);
}

#[test]
fn bounds_and_use_survive_a_snapshot_and_an_upgrade() {
    let mut r = replica(lockd_core::builtin::LOCK_SM);
    assert_eq!(r.capacity().limits, DEFAULT_CAPACITY.into());
    r.apply(entries(workload())).unwrap();
    let blob = r.snapshot_blob(SnapshotMeta::default()).unwrap();
    let bytes = blob.encode().unwrap();
    let back = SnapshotBlob::decode(&bytes).unwrap();
    let restored = Replica::from_snapshot(1, loader(), &back, 4).unwrap();
    assert_eq!(restored.capacity(), r.capacity());

    let replaces = r.module_hash();
    let up = Entry {
        log_id: LogId::new(1, 0, 100),
        payload: Payload::Normal(Request::Upgrade(UpgradeEntry {
            module: LOCK_SM_WORLD02.to_vec(),
            replaces,
        })),
    };
    match r.apply([up]).unwrap().remove(0) {
        Response::Upgrade(UpgradeOutcome::Swapped { .. }) => {}
        other => panic!("{other:?}"),
    }
    let c = r.capacity();
    assert_eq!((c.held, c.key_bytes), (3, 6));
}
