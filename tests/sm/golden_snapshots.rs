//! Snapshot files pinned by golden bytes (`lockd_tests::golden`): format 9
//! written, formats 1 to 8 still read, each with what it held (what a
//! format did not have reads as none). As `golden_formats`: the current
//! code must encode a sample to exactly the golden bytes and decode them
//! back to the same; a format changes only through a new magic.

use lockd_core::command::Command;
use lockd_core::engine::ModuleHash;
use lockd_core::entry::SnapshotMeta;
use lockd_core::precheck::PrecheckSeen;
use lockd_core::replica::capacity::Capacity;
use lockd_core::replica::failures::{FailureLog, Kinds, ModuleFailure, OutOfService};
use lockd_core::signature::TrustedKeys;
use lockd_core::signature::{KeyEntry, ModuleKey};
use lockd_core::snapshot::SnapshotBlob;
use lockd_core::upgrade::{UpgradeRecord, UpgradeResult};
use lockd_core::way_back::{FellBack, OnModuleFailure, WayBack};
use lockd_tests::golden::{core_meta, golden, hex};
use serde::Serialize;

use super::golden_formats::precheck_record;

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
        precheck: None,
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
    // Format 8 is read, no longer written: everything but the last
    // pre-check, read as none.
    for name in ["snapshot_v8_no_keys", "snapshot_v8_one_key"] {
        let old = SnapshotBlob::decode(&golden(name, b"")).expect("format 8 decodes");
        assert_eq!(old.failures, blob.failures, "{name}");
        assert_eq!(old.way_back, blob.way_back, "{name}");
        assert_eq!(old.precheck, None, "{name}");
        assert_eq!(
            old.module_keys.len(),
            usize::from(name.ends_with("one_key"))
        );
    }
    blob.precheck = Some(PrecheckSeen {
        index: 127,
        record: precheck_record(),
    });
    for name in ["snapshot_v9_no_keys", "snapshot_v9_one_key"] {
        if name.ends_with("one_key") {
            blob.module_keys
                .apply(&KeyEntry::Trust(ModuleKey([0x33; 32])))
                .expect("trust");
        }
        let now = blob.encode().expect("encode");
        let gold = golden(name, &now);
        assert_eq!(hex(&now), hex(&gold), "{name}: snapshot format 9 changed");
        let back = SnapshotBlob::decode(&gold).expect("decodes");
        assert_eq!(back.encode().expect("encode"), gold, "{name}");
        assert_eq!(back.failures, blob.failures, "{name}");
        assert_eq!(back.way_back, blob.way_back, "{name}");
        assert_eq!(back.precheck, blob.precheck, "{name}");
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
