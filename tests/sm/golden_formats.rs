//! Every persisted format pinned by golden bytes (`lock_tests::golden`):
//! log entries of every kind (blank, membership and every request
//! variant, each world-0.2 command), the log's vote and purge mark, a log
//! segment and the atomic small files around them, snapshot files (format
//! 5 written; formats 1 to 4 read), and the cluster record. What nodes and
//! clients say to each other: `golden_wire`.
//!
//! For each sample the current code must encode it to exactly the golden
//! bytes, and decode the golden bytes and encode them again to the same
//! bytes. A format changes only through a new version (an appended
//! variant, a new snapshot magic): changing a field's type or position
//! fails here.

use std::collections::BTreeMap;

use lock_tests::golden::{commands, commands_0_3, core_meta, entry, golden, hex, log_id, pinned};
use lockd::raft::{Request, Vote};
use lockd_core::command::{legacy, Command};
use lockd_core::engine::ModuleHash;
use lockd_core::entry::SnapshotMeta;
use lockd_core::replica::capacity::Capacity;
use lockd_core::replica::failures::{FailureLog, Kinds, ModuleFailure, OutOfService};
use lockd_core::signature::TrustedKeys;
use lockd_core::signature::{KeyEntry, ModuleKey, ModuleSignature, SignedFor, SignedShadowStart};
use lockd_core::snapshot::SnapshotBlob;
use lockd_core::upgrade::{BoundUpgrade, SignedUpgrade};
use lockd_core::upgrade::{Genesis, ShadowEntry, UpgradeEntry};
use lockd_core::upgrade::{UpgradeRecord, UpgradeResult};
use lockd_core::way_back::{FellBack, OnModuleFailure, RollbackEntry, VersionedUpgrade, WayBack};
use openraft::EntryPayload;
use serde::Serialize;

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
    ]
}

#[test]
fn log_entries_of_every_kind_are_pinned() {
    pinned("entry_blank", &entry(1, EntryPayload::Blank));
    pinned(
        "entry_membership",
        &entry(
            2,
            EntryPayload::Membership(lock_tests::golden::membership()),
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
    use lockd::log::{read_atomic, write_atomic, Wal, WalOp, WalOptions};
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
    let now = std::fs::read(&segments[0]).expect("segment");
    let gold = golden("log_segment", &now);
    assert_eq!(hex(&now), hex(&gold), "the log segment format changed");
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

fn record() -> UpgradeRecord {
    UpgradeRecord {
        index: 30,
        replaces: "11".repeat(32),
        module_hash: "22".repeat(32),
        result: UpgradeResult::Swapped,
        version: Some("0.2.0".into()),
        reason: None,
        swap_us: 1234,
    }
}

/// Formats 1 to 3, as they were written (read now, never written).
#[derive(Serialize)]
struct V1 {
    meta: SnapshotMeta,
    module: Vec<u8>,
    guest_state: Vec<u8>,
}

#[derive(Serialize)]
struct V2 {
    v1: V1,
    module_since: u64,
    upgrades: Vec<UpgradeRecord>,
}

#[derive(Serialize)]
struct V3 {
    v2: V2,
    capacity: Capacity,
}

#[derive(Serialize)]
struct V4 {
    v3: V3,
    module_keys: TrustedKeys,
}

fn v3() -> V3 {
    V3 {
        v2: v2(),
        capacity: Capacity {
            max_held: 7,
            max_key_bytes: 70,
        },
    }
}

fn v1() -> V1 {
    V1 {
        meta: core_meta(),
        module: vec![0, 0x61, 0x73, 0x6d],
        guest_state: b"guest state".to_vec(),
    }
}

fn v2() -> V2 {
    V2 {
        v1: v1(),
        module_since: 30,
        upgrades: vec![record()],
    }
}

fn file(magic: &[u8], body: &impl Serialize) -> Vec<u8> {
    let mut out = magic.to_vec();
    out.extend(postcard::to_allocvec(body).expect("encode"));
    out
}

#[test]
fn snapshot_files_are_pinned_and_earlier_formats_still_read() {
    let mut blob = SnapshotBlob {
        meta: core_meta(),
        module: vec![0, 0x61, 0x73, 0x6d],
        guest_state: b"guest state".to_vec(),
        module_since: 30,
        upgrades: vec![record()],
        capacity: Capacity {
            max_held: 7,
            max_key_bytes: 70,
        },
        module_keys: Default::default(),
        first_module: Some(ModuleHash([0x44; 32])),
        failures: Default::default(),
        way_back: Default::default(),
    };
    // Formats 5 and 6 are read, no longer written: 5 holds everything but
    // the module failures, read as none; 6's failures have no kinds, and
    // no module is out of service.
    for (format, name) in [
        (5, "snapshot_v5_no_keys"),
        (5, "snapshot_v5_one_key"),
        (6, "snapshot_v6_no_keys"),
        (6, "snapshot_v6_one_key"),
    ] {
        let gold = golden(name, b"");
        let old = SnapshotBlob::decode(&gold)
            .unwrap_or_else(|e| panic!("format {format} no longer decodes: {e}"));
        assert_eq!(old.first_module, blob.first_module, "{name}");
        assert_eq!(
            old.module_keys.len(),
            usize::from(name.ends_with("one_key"))
        );
        if format == 5 {
            assert_eq!(old.failures, FailureLog::default(), "{name}");
            continue;
        }
        assert_eq!(old.failures.total, 3, "{name}");
        assert_eq!(old.failures.recent.len(), 1, "{name}");
        assert_eq!(old.failures.recent[0].index, 41, "{name}");
        assert!(old.failures.recent[0].kinds.is_empty(), "{name}");
        assert_eq!(old.failures.out_of_service, None, "{name}");
    }
    blob.failures.total = 3;
    blob.failures.recent.push_back(ModuleFailure {
        index: 41,
        module: ModuleHash([0x55; 32]),
        command: "grant \"k\"".into(),
        reason: "guest trapped in `apply`: unreachable".into(),
        kinds: Kinds::of(&[Command::grant("k", 1), Command::release("k", 1)]),
    });
    blob.failures.out_of_service = Some(OutOfService {
        module: ModuleHash([0x55; 32]),
        since: 64,
        failures: 8,
        kinds: Kinds::of(&[Command::grant("k", 1)]),
    });
    // Format 7 is read, no longer written: everything but the way back,
    // read as none.
    for name in ["snapshot_v7_no_keys", "snapshot_v7_one_key"] {
        let old = SnapshotBlob::decode(&golden(name, b"")).expect("format 7 decodes");
        assert_eq!(old.failures, blob.failures, "{name}");
        assert_eq!(old.way_back, WayBack::default(), "{name}");
        assert_eq!(old.first_module, blob.first_module, "{name}");
    }
    blob.way_back = WayBack {
        previous: Some(vec![0, 0x61, 0x73, 0x6d, 1]),
        on_failure: OnModuleFailure::Rollback,
        fell_back: Some(FellBack {
            index: 128,
            from: ModuleHash([0x55; 32]),
            to: ModuleHash([0x66; 32]),
            reason: Some("refused".into()),
        }),
    };
    for name in ["snapshot_v8_no_keys", "snapshot_v8_one_key"] {
        if name.ends_with("one_key") {
            blob.module_keys
                .apply(&KeyEntry::Trust(ModuleKey([0x33; 32])))
                .expect("trust");
        }
        let now = blob.encode().expect("encode");
        let gold = golden(name, &now);
        assert_eq!(hex(&now), hex(&gold), "{name}: snapshot format 8 changed");
        let back = SnapshotBlob::decode(&gold).expect("decodes");
        assert_eq!(back.encode().expect("encode"), gold, "{name}");
        assert_eq!(back.failures, blob.failures, "{name}");
        assert_eq!(back.way_back, blob.way_back, "{name}");
    }

    // Formats 1 to 4 are read, never written: their golden files decode,
    // with what they hold. (Nested structs encode as their fields in
    // order, as the flat ones of the time did.)
    let old = [
        ("snapshot_v1", file(b"LKDSNAP1", &v1()), 0, 0),
        ("snapshot_v2", file(b"LKDSNAP2", &v2()), 30, 1),
        ("snapshot_v3", file(b"LKDSNAP3", &v3()), 30, 1),
        (
            "snapshot_v4_no_keys",
            file(
                b"LKDSNAP4",
                &V4 {
                    v3: v3(),
                    module_keys: TrustedKeys::default(),
                },
            ),
            30,
            1,
        ),
    ];
    for (name, written, since, upgrades) in old {
        let gold = golden(name, &written);
        assert_eq!(hex(&written), hex(&gold), "{name}");
        let old =
            SnapshotBlob::decode(&gold).unwrap_or_else(|e| panic!("{name} no longer decodes: {e}"));
        assert_eq!(old.meta, core_meta(), "{name}");
        assert_eq!(old.guest_state, b"guest state", "{name}");
        assert_eq!(
            (old.module_since, old.upgrades.len()),
            (since, upgrades),
            "{name}"
        );
        assert!(old.module_keys.is_empty(), "{name}: no key");
        // Swapped since index 0: which module came first is not known;
        // else the active one came first.
        let first = (since == 0).then(|| ModuleHash::of(&v1().module));
        assert_eq!(old.first_module, first, "{name}");
    }
    let gold = golden("snapshot_v4_one_key", b"");
    let old = SnapshotBlob::decode(&gold).expect("format 4 with a key decodes");
    assert_eq!(old.module_keys.len(), 1, "the trusted key kept");
    // Nothing swapped in since index 0: the active module came first.
    let mut unswapped = v1();
    unswapped.module = b"the first".to_vec();
    let old = SnapshotBlob::decode(&file(b"LKDSNAP1", &unswapped)).expect("decodes");
    assert_eq!(old.first_module, Some(ModuleHash::of(b"the first")));
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
