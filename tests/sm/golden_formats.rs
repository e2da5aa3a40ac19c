//! Every persisted format pinned by golden bytes (`lockd_tests::golden`):
//! log entries of every kind (blank, membership and every request
//! variant, each world-0.2 command), the log's vote and purge mark, a log
//! segment and the atomic small files around them, and the cluster
//! record. Snapshot files: `golden_snapshots`. What nodes and clients say
//! to each other: `golden_peer` and `golden_wire`.
//!
//! For each sample the current code must encode it to exactly the golden
//! bytes, and decode the golden bytes and encode them again to the same
//! bytes. A format changes only through a new version (an appended
//! variant, a new snapshot magic): changing a field's type or position
//! fails here.

use std::collections::BTreeMap;

use lockd::raft::{Request, Vote};
use lockd_core::command::legacy;
use lockd_core::engine::ModuleHash;
use lockd_core::precheck::{NodeVerdict, PrecheckRecord};
use lockd_core::replica::capacity::Capacity;
use lockd_core::signature::{KeyEntry, ModuleKey, ModuleSignature, SignedFor, SignedShadowStart};
use lockd_core::upgrade::{BoundUpgrade, SignedUpgrade};
use lockd_core::upgrade::{Genesis, ShadowEntry, UpgradeEntry};
use lockd_core::way_back::{OnModuleFailure, RollbackEntry, VersionedUpgrade};
use lockd_tests::golden::{commands, commands_0_3, entry, golden, hex, log_id, pinned};
use openraft::EntryPayload;

fn upgrade() -> UpgradeEntry {
    UpgradeEntry {
        module: vec![0, 0x61, 0x73, 0x6d],
        replaces: ModuleHash([0x11; 32]),
    }
}

fn requests() -> Vec<(&'static str, Request)> {
    let signature = ModuleSignature([0x5a; 64]);
    vec![
        (
            "lock_0_1",
            Request::Lock(vec![
                legacy::Command::Grant(legacy::Grant {
                    key: "k".into(),
                    lease_ms: 10,
                }),
                legacy::Command::Release("k".into()),
                legacy::Command::Expire(legacy::Expire {
                    key: "k".into(),
                    token: 3,
                }),
            ]),
        ),
        ("upgrade", Request::Upgrade(upgrade())),
        (
            "shadow_start",
            Request::Shadow(ShadowEntry::Start {
                module: vec![1, 2, 3],
            }),
        ),
        ("shadow_stop", Request::Shadow(ShadowEntry::Stop)),
        ("commands", Request::commands(commands())),
        (
            "capacity",
            Request::Capacity(Capacity {
                max_held: 100_000,
                max_key_bytes: 8 << 20,
            }),
        ),
        (
            "module_key_trust",
            Request::ModuleKeys(KeyEntry::Trust(ModuleKey([0x22; 32]))),
        ),
        (
            "module_key_untrust",
            Request::ModuleKeys(KeyEntry::Untrust(ModuleKey([0x22; 32]))),
        ),
        (
            "signed_upgrade",
            Request::SignedUpgrade(SignedUpgrade {
                upgrade: upgrade(),
                signature,
            }),
        ),
        (
            "signed_shadow",
            Request::SignedShadow(SignedShadowStart {
                module: vec![9],
                signature,
            }),
        ),
        (
            "bound_upgrade",
            Request::BoundUpgrade(BoundUpgrade {
                upgrade: upgrade(),
                signature,
                signed_for: SignedFor::Shadow,
            }),
        ),
        (
            "bound_shadow",
            Request::BoundShadow(SignedShadowStart {
                module: vec![9],
                signature,
            }),
        ),
        (
            "genesis",
            Request::Genesis(Genesis {
                module: vec![0, 0x61, 0x73, 0x6d],
            }),
        ),
        // Appended: a sample's index is its position.
        ("commands_0_3", Request::commands(commands_0_3())),
        (
            "versioned_upgrade",
            Request::VersionedUpgrade(VersionedUpgrade {
                upgrade: upgrade(),
                signature: Some(signature),
                signed_for: SignedFor::Upgrade,
                rollback: true,
                on_failure: OnModuleFailure::Rollback,
            }),
        ),
        (
            "versioned_upgrade_unsigned",
            Request::VersionedUpgrade(VersionedUpgrade {
                upgrade: upgrade(),
                signature: None,
                signed_for: SignedFor::Shadow,
                rollback: false,
                on_failure: OnModuleFailure::Refuse,
            }),
        ),
        (
            "rollback",
            Request::Rollback(RollbackEntry {
                replaces: ModuleHash([0x11; 32]),
                to: ModuleHash([0x22; 32]),
            }),
        ),
        ("precheck", Request::Precheck(precheck_record())),
    ]
}

/// A pre-check record: one voter accepted, one did not answer, one refused.
pub(crate) fn precheck_record() -> PrecheckRecord {
    PrecheckRecord {
        module: ModuleHash([0x77; 32]),
        quorum: true,
        enacted: true,
        verdicts: vec![
            NodeVerdict {
                node: 1,
                accepted: true,
                answered: true,
                reason: None,
            },
            NodeVerdict {
                node: 2,
                accepted: false,
                answered: false,
                reason: Some("unreachable".into()),
            },
            NodeVerdict {
                node: 3,
                accepted: false,
                answered: true,
                reason: Some("too big".into()),
            },
        ],
    }
}

#[test]
fn log_entries_of_every_kind_are_pinned() {
    pinned("entry_blank", &entry(1, EntryPayload::Blank));
    pinned(
        "entry_membership",
        &entry(
            2,
            EntryPayload::Membership(lockd_tests::golden::membership()),
        ),
    );
    for (i, (name, request)) in requests().into_iter().enumerate() {
        pinned(
            &format!("entry_{name}"),
            &entry(10 + i as u64, EntryPayload::Normal(request)),
        );
    }
    // What the log keeps beside its entries.
    pinned("log_vote", &Vote::new(5, 2));
    pinned("log_vote_committed", &Vote::new_committed(5, 2));
    pinned("log_purged", &log_id(3, 42));
}

#[test]
fn a_leader_writes_world_0_2_entries_until_a_command_needs_0_3() {
    // So an older binary reads every entry until a 0.3 feature is used.
    assert!(matches!(
        Request::commands(commands()),
        Request::Commands(_)
    ));
    assert!(matches!(
        Request::commands(commands_0_3()),
        Request::Commands03(_)
    ));
    // And the 0.2 entry reads back as the same commands.
    assert_eq!(
        Request::commands(commands()).into_commands(),
        Some(commands())
    );
}

#[test]
fn the_log_segment_and_the_atomic_files_are_pinned() {
    use lockd_log::{read_atomic, write_atomic, Wal, WalOp, WalOptions};
    let dir = tempfile::tempdir().expect("dir");
    let (mut wal, _) = Wal::open(dir.path(), WalOptions::default()).expect("open");
    let entry = postcard::to_allocvec(&entry(1, EntryPayload::Blank)).expect("encode");
    wal.write_batch(&[
        WalOp::Append {
            index: 1,
            payload: &entry,
        },
        WalOp::Append {
            index: 2,
            payload: b"two",
        },
    ])
    .expect("write");
    wal.write_batch(&[WalOp::Truncate { since: 2 }])
        .expect("truncate");
    let segments = wal.segment_paths();
    assert_eq!(segments.len(), 1);
    let file = std::fs::read(&segments[0]).expect("segment");
    // The 24-byte segment header and the records; after them, the zeros
    // the log lays ahead of its next records (padding, cut at recovery).
    let end = 24 + wal.stats().bytes as usize;
    let (now, padding) = file.split_at(end.min(file.len()));
    assert!(
        !padding.is_empty() && padding.iter().all(|b| *b == 0),
        "the records are followed by zeros only"
    );
    let gold = golden("log_segment", now);
    assert_eq!(hex(now), hex(&gold), "the log segment format changed");
    drop(wal);
    // The golden segment, in a log of its own, opens to what was written.
    let other = tempfile::tempdir().expect("dir");
    let name = segments[0].file_name().expect("name");
    std::fs::write(other.path().join(name), &gold).expect("copy");
    let (_, found) = Wal::open(other.path(), WalOptions::default()).expect("opens");
    assert_eq!(found.entries.into_iter().collect::<Vec<_>>(), [(1, entry)]);
    assert_eq!(found.torn_tail, None);

    // The vote, the purge mark and snapshots are small files replaced
    // atomically, with a checksum.
    let file = dir.path().join("vote");
    let vote = postcard::to_allocvec(&Vote::new_committed(5, 2)).expect("encode");
    write_atomic(&file, &vote).expect("write");
    let now = std::fs::read(&file).expect("read");
    let gold = golden("atomic_file_vote", &now);
    assert_eq!(hex(&now), hex(&gold), "the atomic file format changed");
    std::fs::write(&file, &gold).expect("write gold");
    assert_eq!(read_atomic(&file).expect("reads"), Some(vote));
}

#[test]
fn the_cluster_record_is_pinned() {
    let members: BTreeMap<u64, String> = (1..=3).map(|i| (i, format!("10.0.0.{i}:7400"))).collect();
    let id = lockd::cluster_id::ClusterId::at_bootstrap(&members);
    let dir = tempfile::tempdir().expect("dir");
    id.write(dir.path()).expect("write");
    let mut written = None;
    for e in std::fs::read_dir(dir.path()).expect("read dir").flatten() {
        written = Some(std::fs::read(e.path()).expect("read"));
    }
    let now = written.expect("one file written");
    let gold = golden("cluster_record", &now);
    assert_eq!(hex(&now), hex(&gold), "the cluster record changed");
    let read = lockd::cluster_id::ClusterId::read(dir.path())
        .expect("read")
        .expect("an id");
    assert_eq!(read.as_str(), id.as_str());
}
