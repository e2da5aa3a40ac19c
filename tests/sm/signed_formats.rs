//! Signed modules left the old formats alone: log entries of every earlier
//! variant encode byte for byte as before (the new variants come after
//! them), snapshots of formats `LKDSNAP1` to `LKDSNAP3` still decode and
//! restore (with no key trusted), `LKDSNAP4` is written, and a snapshot
//! whose key set breaks the rules of the key entries does not decode.

use std::sync::Arc;

use ed25519_dalek::SigningKey;
use lockd_core::command::Command;
use lockd_core::engine::{EngineSettings, ModuleHash, WasmEngine};
use lockd_core::entry::{Entry, LogId, Payload, Request, SnapshotMeta};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::capacity::Capacity;
use lockd_core::replica::capacity::DEFAULT_CAPACITY;
use lockd_core::replica::Replica;
use lockd_core::signature::{KeyEntry, ModuleKey, ModuleSignature, SignedFor, SignedShadowStart};
use lockd_core::snapshot::SnapshotBlob;
use lockd_core::upgrade::UpgradeRecord;
use lockd_core::upgrade::{BoundUpgrade, SignedUpgrade};
use lockd_core::upgrade::{ShadowEntry, UpgradeEntry};
use serde::Serialize;

fn loader() -> Arc<Precompiler> {
    let engine = Arc::new(WasmEngine::new(EngineSettings::default(), None).unwrap());
    Precompiler::new(engine)
}

#[test]
fn earlier_log_entries_encode_as_before_and_new_variants_come_after() {
    let enc = |r: &Request| postcard::to_allocvec(r).unwrap();
    let upgrade = UpgradeEntry {
        module: vec![0xaa, 0xbb],
        replaces: ModuleHash([9; 32]),
    };
    // Variant index, then the entry's fields: module (length, bytes),
    // replaces (32 bytes).
    let mut expected = vec![1, 2, 0xaa, 0xbb];
    expected.extend([9; 32]);
    assert_eq!(enc(&Request::Upgrade(upgrade.clone())), expected);
    assert_eq!(
        enc(&Request::Shadow(ShadowEntry::Start { module: vec![7] })),
        [2, 0, 1, 7]
    );
    assert_eq!(enc(&Request::Shadow(ShadowEntry::Stop)), [2, 1]);
    assert_eq!(enc(&Request::Lock(Vec::new()))[0], 0);
    assert_eq!(enc(&Request::Commands(Vec::new()))[0], 3);
    let cap = Capacity {
        max_held: 1,
        max_key_bytes: 2,
    };
    assert_eq!(enc(&Request::Capacity(cap)), [4, 1, 2]);

    let key = ModuleKey([5; 32]);
    let trust = enc(&Request::ModuleKeys(KeyEntry::Trust(key)));
    assert_eq!(&trust[..2], [5, 0]);
    assert_eq!(&trust[2..], [5; 32]);
    let upgrade_again = || upgrade.clone();
    let signed = enc(&Request::SignedUpgrade(SignedUpgrade {
        upgrade: upgrade_again(),
        signature: ModuleSignature([3; 64]),
    }));
    assert_eq!(signed[0], 6);
    assert_eq!(&signed[1..expected.len()], &expected[1..], "the same entry");
    assert_eq!(
        &signed[expected.len()..],
        [3; 64],
        "then 64 signature bytes"
    );
    // Bound signatures: appended variants 8 and 9. The bound upgrade is
    // the signed upgrade's bytes, then what the signature was made for.
    let bound = enc(&Request::BoundUpgrade(BoundUpgrade {
        upgrade: upgrade_again(),
        signature: ModuleSignature([3; 64]),
        signed_for: SignedFor::Shadow,
    }));
    assert_eq!(bound[0], 8);
    assert_eq!(&bound[1..signed.len()], &signed[1..]);
    assert_eq!(&bound[signed.len()..], [1], "signed for a shadow");
    let shadow = enc(&Request::BoundShadow(SignedShadowStart {
        module: vec![7],
        signature: ModuleSignature([4; 64]),
    }));
    assert_eq!(&shadow[..3], [9, 1, 7]);
    assert_eq!(&shadow[3..], [4; 64]);
    for r in [
        Request::ModuleKeys(KeyEntry::Untrust(key)),
        Request::SignedUpgrade(SignedUpgrade {
            upgrade: UpgradeEntry {
                module: vec![1],
                replaces: ModuleHash([0; 32]),
            },
            signature: ModuleSignature([1; 64]),
        }),
    ] {
        assert_eq!(postcard::from_bytes::<Request>(&enc(&r)).unwrap(), r);
    }
}

#[derive(Serialize)]
struct V3 {
    meta: SnapshotMeta,
    module: Vec<u8>,
    guest_state: Vec<u8>,
    module_since: u64,
    upgrades: Vec<UpgradeRecord>,
    capacity: Capacity,
}

#[derive(Serialize)]
struct V2 {
    meta: SnapshotMeta,
    module: Vec<u8>,
    guest_state: Vec<u8>,
    module_since: u64,
    upgrades: Vec<UpgradeRecord>,
}

#[derive(Serialize)]
struct V1 {
    meta: SnapshotMeta,
    module: Vec<u8>,
    guest_state: Vec<u8>,
}

fn file(magic: &[u8], body: &impl Serialize) -> Vec<u8> {
    let mut out = magic.to_vec();
    out.extend(postcard::to_allocvec(body).unwrap());
    out
}

#[test]
fn snapshots_of_earlier_formats_decode_and_restore_with_no_key_trusted() {
    let loader = loader();
    let module = loader.load(lockd_core::builtin::LOCK_SM).unwrap();
    let mut r = Replica::new(1, loader, module, 4).unwrap();
    let grant = Entry {
        log_id: LogId::new(1, 0, 1),
        payload: Payload::Normal(Request::commands(vec![vec![Command::grant("k", 10)]])),
    };
    r.apply([grant]).unwrap();
    let now = r
        .snapshot_blob(SnapshotMeta {
            last_log_id: r.last_applied(),
            ..SnapshotMeta::default()
        })
        .unwrap();
    let bytes = now.encode().unwrap();
    assert_eq!(&bytes[..8], b"LKDSNAP9");
    let hash = r.state_hash().unwrap();
    let cap = Capacity {
        max_held: 7,
        max_key_bytes: 70,
    };
    let files = [
        (
            file(
                b"LKDSNAP3",
                &V3 {
                    meta: now.meta.clone(),
                    module: now.module.clone(),
                    guest_state: now.guest_state.clone(),
                    module_since: 5,
                    upgrades: Vec::new(),
                    capacity: cap,
                },
            ),
            cap,
            5,
        ),
        (
            file(
                b"LKDSNAP2",
                &V2 {
                    meta: now.meta.clone(),
                    module: now.module.clone(),
                    guest_state: now.guest_state.clone(),
                    module_since: 5,
                    upgrades: Vec::new(),
                },
            ),
            DEFAULT_CAPACITY,
            5,
        ),
        (
            file(
                b"LKDSNAP1",
                &V1 {
                    meta: now.meta.clone(),
                    module: now.module.clone(),
                    guest_state: now.guest_state.clone(),
                },
            ),
            DEFAULT_CAPACITY,
            0,
        ),
    ];
    for (bytes, capacity, since) in files {
        let blob = SnapshotBlob::decode(&bytes).unwrap();
        assert!(blob.module_keys.is_empty(), "{:?}", &bytes[..8]);
        assert_eq!((blob.capacity, blob.module_since), (capacity, since));
        let mut restored = Replica::from_snapshot(2, self::loader(), &blob, 4).unwrap();
        assert_eq!(restored.state_hash().unwrap(), hash);
        assert!(restored.view(false).trusted_module_keys.is_empty());
    }
}

#[test]
fn a_snapshot_whose_keys_break_the_rules_does_not_decode() {
    let loader = loader();
    let module = loader.load(lockd_core::builtin::LOCK_SM).unwrap();
    let mut r = Replica::new(1, loader, module, 4).unwrap();
    let bytes = r
        .snapshot_blob(SnapshotMeta::default())
        .unwrap()
        .encode()
        .unwrap();
    // The key set comes before the last four fields, the first module
    // (`Some` and 32 bytes), the module failures (none, none recent,
    // none out of service: three zeros), the way back (no previous
    // module, `refuse`, no fall back: three zeros) and the last pre-check
    // (none: one zero): its length (0) is the byte before those.
    let (body, first) = bytes.split_at(bytes.len() - 40);
    assert_eq!((body.last(), first[0]), (Some(&0), 1));
    assert_eq!(first[33..], [0; 7]);
    let with_keys = |keys: &[[u8; 32]]| {
        let mut b = body[..body.len() - 1].to_vec();
        b.push(keys.len() as u8);
        for k in keys {
            b.extend(k);
        }
        b.extend(first);
        SnapshotBlob::decode(&b).map(|blob| blob.module_keys.len())
    };
    let valid: Vec<[u8; 32]> = (0..17u8)
        .map(|s| SigningKey::from_bytes(&[s; 32]).verifying_key().to_bytes())
        .collect();
    assert_eq!(with_keys(&valid[..16]), Ok(16));
    let too_many = with_keys(&valid).unwrap_err();
    assert!(
        too_many.contains("17 module keys, more than the 16"),
        "{too_many}"
    );
    let mut off_curve = [0u8; 32];
    off_curve[0] = 2;
    let bad = with_keys(&[valid[0], off_curve]).unwrap_err();
    assert!(bad.contains("not a point of the curve"), "{bad}");
}
