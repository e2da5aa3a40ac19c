//! A failing command fails that command, not the cluster: however the
//! committed entries are cut into ranges, a command the module fails on is
//! refused alone, a group that fails is refused whole while the others
//! apply, and a replica restored from a snapshot isolates the same way.
//! The chaos-guest replica and the cutting helper here are shared with the
//! other replica tests.

use lockd_core::command::Command;
use lockd_core::engine::WasmEngine;

use super::hostile_modules::settings;
/// A replica on the chaos guest, and log entries for it (term 1): a grant
/// of each key, or a blank entry for `None`.
pub(crate) mod replica {
    use std::sync::Arc;

    use lockd_core::command::Command;
    use lockd_core::engine::WasmEngine;
    use lockd_core::entry::{Entry, LogId, Payload, Request};
    use lockd_core::precompile::Precompiler;
    use lockd_core::replica::Replica;
    use lockd_tests::fixtures::CHAOS_GUEST;

    pub fn chaos() -> Replica {
        let engine = Arc::new(WasmEngine::new(super::settings(), None).unwrap());
        let loader = Precompiler::new(engine);
        let module = loader.load(CHAOS_GUEST).unwrap();
        Replica::new(1, loader, module, 1000).unwrap()
    }

    pub fn entries(from: u64, keys: &[Option<&str>]) -> Vec<Entry> {
        (from..)
            .zip(keys)
            .map(|(index, key)| Entry {
                log_id: LogId::new(1, 0, index),
                payload: match key {
                    Some(k) => {
                        Payload::Normal(Request::commands(vec![vec![Command::grant(*k, 5)]]))
                    }
                    None => Payload::Blank,
                },
            })
            .collect()
    }
}

/// The outcomes of `r` for `entries` cut into committed ranges at `cut`
/// (positions in `entries`), one list per entry.
pub(crate) fn apply_cut(
    r: &mut lockd_core::replica::Replica,
    entries: &[lockd_core::entry::Entry],
    cut: &[(usize, usize)],
) -> Vec<lockd_core::entry::Response> {
    cut.iter()
        .flat_map(|&(from, to)| {
            r.apply(entries[from..to].to_vec())
                .unwrap_or_else(|e| panic!("{cut:?}: the replica stopped: {e}"))
        })
        .collect()
}

#[test]
fn a_failing_command_is_refused_alone_however_the_entries_are_cut() {
    use lockd_core::command::{is_module_failed, Outcome, Reason};
    use lockd_core::entry::Response;
    // Entries 2..=8: blank, grant `b`, the trap, grant `c`, the runaway
    // loop, the memory bomb, grant `d`. Each cut: committed ranges, as
    // (from, to) positions in those entries.
    let keys = [
        None,
        Some("b"),
        Some("chaos:trap"),
        Some("c"),
        Some("chaos:loop"),
        Some("chaos:bomb"),
        Some("d"),
    ];
    let cuts: [&[(usize, usize)]; 3] = [
        &[(0, 7)],
        &[(0, 1), (1, 3), (3, 5), (5, 7)],
        &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7)],
    ];
    let mut seen: Option<(Vec<Response>, [u8; 32], lockd_core::replica::ReplicaView)> = None;
    for cut in cuts {
        let mut r = replica::chaos();
        r.apply(replica::entries(1, &[Some("a")])).unwrap();
        let rest = replica::entries(2, &keys);
        let out = apply_cut(&mut r, &rest, cut);
        // The three hostile grants are refused by the host, naming why;
        // every other entry is applied as if they had not been there.
        for (i, (key, resp)) in keys.iter().zip(&out).enumerate() {
            let Response::Lock(groups) = resp else {
                panic!("{cut:?}: entry {i}: {resp:?}")
            };
            let o = &groups[0][0];
            match key {
                Some(k) if k.starts_with("chaos:") => assert!(
                    matches!(o, Outcome::Rejected(Reason::Unsupported(w)) if is_module_failed(w)),
                    "{cut:?}: {k}: {o:?}"
                ),
                Some(k) => assert!(matches!(o, Outcome::Granted(_)), "{cut:?}: {k}: {o:?}"),
                None => assert_eq!(o, &Outcome::Noop),
            }
        }
        let v = r.view(false);
        assert_eq!(v.applied_index, 8, "{cut:?}");
        assert_eq!(v.poisoned, None, "{cut:?}");
        assert_eq!(v.poisoned_at, None, "{cut:?}");
        assert_eq!(v.module_failures_total, 3, "{cut:?}");
        let why: Vec<(u64, &str)> = v
            .module_failures
            .iter()
            .map(|f| (f.index, f.reason.as_str()))
            .collect();
        assert_eq!(why.len(), 3);
        assert_eq!(why[0].0, 4);
        assert!(why[0].1.contains("trapped in `apply`"), "{why:?}");
        assert_eq!(why[1].0, 6);
        assert!(why[1].1.contains("ran out of fuel"), "{why:?}");
        assert_eq!(why[2].0, 7);
        assert!(why[2].1.contains("memory limit"), "{why:?}");
        assert!(v.module_failures[0].command.contains("chaos:trap"));
        // And it goes on.
        let next = r.apply(replica::entries(9, &[Some("e")])).unwrap();
        assert!(matches!(&next[0], Response::Lock(g) if matches!(g[0][0], Outcome::Granted(_))));
        let hash = r.state_hash().unwrap();
        match &seen {
            None => seen = Some((out, hash, v)),
            Some((o, h, first)) => {
                assert_eq!(&out, o, "{cut:?}: outcomes differ by cut");
                assert_eq!(&hash, h, "{cut:?}: state differs by cut");
                assert_eq!(v.module_failures, first.module_failures, "{cut:?}");
            }
        }
    }
    // The state is the one without the hostile grants at all.
    let mut clean = replica::chaos();
    clean
        .apply(replica::entries(
            1,
            &[
                Some("a"),
                None,
                Some("b"),
                None,
                Some("c"),
                None,
                None,
                Some("d"),
                Some("e"),
            ],
        ))
        .unwrap();
    let (_, hash, _) = seen.expect("cuts ran");
    assert_eq!(clean.state_hash().unwrap(), hash);
}

#[test]
fn a_group_that_fails_is_refused_whole_and_the_other_groups_apply() {
    use lockd_core::command::{is_module_failed, Outcome, Reason};
    use lockd_core::entry::{Entry, LogId, Payload, Request, Response};
    let mut r = replica::chaos();
    // One entry, three groups: the middle one holds the trap beside a
    // grant of its own; the module decides a group together, so both of
    // its commands are refused, and nothing of it is held.
    let groups = vec![
        vec![Command::grant("a", 5)],
        vec![Command::grant("b", 5), Command::grant("chaos:trap", 5)],
        vec![Command::grant("c", 5)],
    ];
    let out = r
        .apply([Entry {
            log_id: LogId::new(1, 0, 1),
            payload: Payload::Normal(Request::commands(groups)),
        }])
        .unwrap();
    let Response::Lock(answers) = &out[0] else {
        panic!("{out:?}")
    };
    let failed =
        |o: &Outcome| matches!(o, Outcome::Rejected(Reason::Unsupported(w)) if is_module_failed(w));
    assert!(matches!(answers[0][0], Outcome::Granted(_)), "{answers:?}");
    assert!(answers[1].iter().all(failed), "{answers:?}");
    assert!(matches!(answers[2][0], Outcome::Granted(_)), "{answers:?}");
    assert!(r.holders("b").unwrap().is_empty());
    let v = r.view(false);
    assert_eq!(v.module_failures_total, 1);
    let f = &v.module_failures[0];
    assert_eq!(f.index, 1);
    assert!(
        f.command.contains("\"b\"") && f.command.contains("chaos:trap"),
        "{f:?}"
    );
    assert_eq!(f.reason, "the module trapped in `apply`");
}

#[test]
fn failures_survive_a_snapshot_and_a_restored_replica_isolates_too() {
    use lockd_core::entry::SnapshotMeta;
    use lockd_core::replica::Replica;
    let mut r = replica::chaos();
    r.apply(replica::entries(
        1,
        &[Some("a"), Some("chaos:trap"), Some("b")],
    ))
    .unwrap();
    let blob = r.snapshot_blob(SnapshotMeta::default()).unwrap();
    let bytes = blob.encode().unwrap();
    let back = lockd_core::snapshot::SnapshotBlob::decode(&bytes).unwrap();
    let loader = {
        let engine = std::sync::Arc::new(WasmEngine::new(settings(), None).unwrap());
        lockd_core::precompile::Precompiler::new(engine)
    };
    let mut restored = Replica::from_snapshot(2, loader, &back, 1000).unwrap();
    let v = restored.view(false);
    assert_eq!(v.module_failures_total, 1);
    assert_eq!(v.module_failures[0].index, 2);
    // Its checkpoint is the snapshot: a failure rebuilds from there.
    restored
        .apply(replica::entries(4, &[Some("chaos:trap"), Some("c")]))
        .unwrap();
    r.apply(replica::entries(4, &[Some("chaos:trap"), Some("c")]))
        .unwrap();
    assert_eq!(restored.state_hash().unwrap(), r.state_hash().unwrap());
    assert_eq!(
        restored.view(false).module_failures,
        r.view(false).module_failures
    );
    assert_eq!(r.view(false).module_failures_total, 2);
}
