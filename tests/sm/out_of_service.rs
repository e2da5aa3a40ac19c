//! A module that keeps failing is taken out of service for the kinds of
//! command it fails on (`core/src/replica/failures.rs`): at the same index
//! on every replica however its entries are cut, without entering the
//! module again for them, kept by snapshots, and ended by a new module.

use lockd_core::command::{is_module_failed, Command, Outcome, Reason};
use lockd_core::entry::{Entry, LogId, Payload, Request, Response, SnapshotMeta};
use lockd_core::replica::failures::{JUDGED_EVERY, THRESHOLD, WINDOW};
use lockd_core::replica::Replica;
use lockd_core::upgrade::{UpgradeEntry, UpgradeOutcome};

use super::isolated_failures::{apply_cut, replica};

/// One entry of one group.
fn entry(index: u64, group: Vec<Command>) -> Entry {
    Entry {
        log_id: LogId::new(1, 0, index),
        payload: Payload::Normal(Request::commands(vec![group])),
    }
}

/// Entries `1..=last`: a grant of `k{i}` at each index, but a grant of
/// the trapping key at each of `traps`.
fn workload(last: u64, traps: &[u64]) -> Vec<Entry> {
    (1..=last)
        .map(|i| {
            let key = if traps.contains(&i) {
                "chaos:trap".to_string()
            } else {
                format!("k{i}")
            };
            entry(i, vec![Command::grant(key, 60_000)])
        })
        .collect()
}

fn first(resp: &Response) -> &Outcome {
    match resp {
        Response::Lock(groups) => &groups[0][0],
        other => panic!("not a lock response: {other:?}"),
    }
}

fn out_of_service(o: &Outcome) -> bool {
    matches!(o, Outcome::Rejected(Reason::Unsupported(w))
        if is_module_failed(w) && w.contains("out of service since index 64"))
}

/// Eight traps before index 64: from the entry after 64, grants are
/// refused without entering the module (no rebuild), a release still
/// applies, and so does a release beside a grant in one group (a handoff)
/// while that grant is refused. Cut into ranges three ways, the outcomes,
/// the state and the record are the same.
#[test]
fn a_module_that_keeps_failing_is_out_of_service_at_the_same_index_however_cut() {
    assert_eq!(THRESHOLD, 8);
    assert_eq!(JUDGED_EVERY, 64);
    let traps: Vec<u64> = (1..=8).map(|i| i * 7).collect();
    let mut entries = workload(70, &traps);
    // 71: release k1 (a kind it never failed on); 72: a grant beside a
    // release, one group.
    entries.push(entry(71, vec![Command::release("k1", 1)]));
    entries.push(entry(
        72,
        vec![Command::grant("m", 60_000), Command::release("k2", 2)],
    ));
    let n = entries.len();
    let cuts: [Vec<(usize, usize)>; 3] = [
        vec![(0, n)],
        (0..n).step_by(5).map(|a| (a, (a + 5).min(n))).collect(),
        (0..n).map(|a| (a, a + 1)).collect(),
    ];
    let mut seen: Option<(Vec<Response>, [u8; 32])> = None;
    for cut in &cuts {
        let mut r = replica::chaos();
        let out = apply_cut(&mut r, &entries, cut);
        for (i, resp) in out.iter().enumerate() {
            let index = i as u64 + 1;
            let o = first(resp);
            match index {
                _ if traps.contains(&index) => assert!(
                    matches!(o, Outcome::Rejected(Reason::Unsupported(w)) if is_module_failed(w) && w.contains("trapped")),
                    "{cut:?}: {index}: {o:?}"
                ),
                // Judged at 64 only: until then, and at 64, served.
                1..=64 => assert!(matches!(o, Outcome::Granted(_)), "{cut:?}: {index}: {o:?}"),
                65..=70 => assert!(out_of_service(o), "{cut:?}: {index}: {o:?}"),
                71 => assert!(matches!(o, Outcome::Released(_)), "{cut:?}: {index}: {o:?}"),
                _ => {
                    let Response::Lock(groups) = resp else {
                        panic!("{resp:?}")
                    };
                    assert!(out_of_service(&groups[0][0]), "{cut:?}: {groups:?}");
                    assert!(
                        matches!(groups[0][1], Outcome::Released(_)),
                        "{cut:?}: {groups:?}"
                    );
                }
            }
        }
        let v = r.view(false);
        let off = v.module_out_of_service.expect("out of service");
        assert_eq!((off.since, off.failures), (64, 8), "{cut:?}");
        assert_eq!(off.kinds, ["grant"], "{cut:?}");
        assert_eq!(off.module_hash, r.module_hash().to_string());
        // One rebuild after each trap (and one after each failed batch
        // when a range held more than the trap): none for a refusal.
        let rebuilds = v.instance_rebuilds;
        r.apply(workload(80, &[]).split_off(72)).unwrap();
        assert_eq!(r.view(false).instance_rebuilds, rebuilds, "{cut:?}");
        assert!(
            r.holders("k2").unwrap().is_empty(),
            "released beside the refused grant"
        );
        assert!(r.holders("m").unwrap().is_empty());
        let hash = r.state_hash().unwrap();
        match &seen {
            None => seen = Some((out, hash)),
            Some((o, h)) => {
                assert_eq!(&out, o, "{cut:?}: outcomes differ by cut");
                assert_eq!(&hash, h, "{cut:?}: state differs by cut");
            }
        }
    }
}

/// The negative controls: one failure fewer than the threshold, or the
/// threshold's failures spread wider than the window, leave the module in
/// service.
#[test]
fn fewer_failures_or_failures_further_apart_leave_the_module_in_service() {
    let seven: Vec<u64> = (1..=7).map(|i| i * 7).collect();
    let mut r = replica::chaos();
    let out = r.apply(workload(70, &seven)).unwrap();
    assert!(matches!(first(&out[69]), Outcome::Granted(_)));
    assert_eq!(r.view(false).module_out_of_service, None);

    // Eight, but the first lies outside the window judged at 1088.
    let spread: Vec<u64> = std::iter::once(10)
        .chain((1..=7).map(|i| 1000 + i * 10))
        .collect();
    const { assert!(1088 - 10 >= WINDOW, "the first is out of the window") };
    let mut r = replica::chaos();
    let out = r.apply(workload(1100, &spread)).unwrap();
    assert!(matches!(first(&out[1099]), Outcome::Granted(_)));
    assert_eq!(r.view(false).module_failures_total, 8);
    assert_eq!(r.view(false).module_out_of_service, None);
}

/// A restored replica refuses as the one it came from; a module swapped
/// in is in service, and so is the failing one swapped back in.
#[test]
fn out_of_service_survives_a_snapshot_and_a_new_module_ends_it() {
    let traps: Vec<u64> = (1..=8).map(|i| i * 7).collect();
    let mut r = replica::chaos();
    r.apply(workload(64, &traps)).unwrap();
    let off = r.view(false).module_out_of_service.expect("out of service");
    let blob = r.snapshot_blob(SnapshotMeta::default()).unwrap();
    let back = lockd_core::snapshot::SnapshotBlob::decode(&blob.encode().unwrap()).unwrap();
    let loader = {
        let engine = std::sync::Arc::new(
            lockd_core::engine::WasmEngine::new(super::hostile_modules::settings(), None).unwrap(),
        );
        lockd_core::precompile::Precompiler::new(engine)
    };
    let mut restored = Replica::from_snapshot(2, loader, &back, 1000).unwrap();
    assert_eq!(restored.view(false).module_out_of_service, Some(off));
    let next = vec![entry(65, vec![Command::grant("n", 60_000)])];
    assert!(out_of_service(first(
        &restored.apply(next.clone()).unwrap()[0]
    )));
    assert!(out_of_service(first(&r.apply(next).unwrap()[0])));
    assert_eq!(restored.state_hash().unwrap(), r.state_hash().unwrap());

    // Swap in the built-in module, then the failing one again: each is
    // in service.
    let chaos = r.module_hash();
    let swap = |index: u64, module: &[u8], replaces| Entry {
        log_id: LogId::new(1, 0, index),
        payload: Payload::Normal(Request::Upgrade(UpgradeEntry {
            module: module.to_vec(),
            replaces,
        })),
    };
    let up = swap(66, lockd_core::builtin::LOCK_SM, chaos);
    assert!(matches!(
        r.apply([up]).unwrap()[0],
        Response::Upgrade(UpgradeOutcome::Swapped { .. })
    ));
    assert_eq!(r.view(false).module_out_of_service, None);
    let granted = r.apply(vec![entry(67, vec![Command::grant("n", 60_000)])]);
    assert!(matches!(first(&granted.unwrap()[0]), Outcome::Granted(_)));
    let back_to_chaos = swap(68, lockd_tests::fixtures::CHAOS_GUEST, r.module_hash());
    assert!(matches!(
        r.apply([back_to_chaos]).unwrap()[0],
        Response::Upgrade(UpgradeOutcome::Swapped { .. })
    ));
    assert_eq!(r.module_hash(), chaos);
    // Past the next judged index (128): its eight failures from before
    // were not counted again.
    let after: Vec<Entry> = (69..=130)
        .map(|i| entry(i, vec![Command::grant(format!("q{i}"), 60_000)]))
        .collect();
    let out = r.apply(after).unwrap();
    assert!(
        out.iter().all(|o| matches!(first(o), Outcome::Granted(_))),
        "{out:?}"
    );
    assert_eq!(r.view(false).module_out_of_service, None);
}
