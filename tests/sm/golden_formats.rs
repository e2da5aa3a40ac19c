//! Every persisted or node-to-node format pinned by golden bytes
//! (`tests/golden/*.hex`, made from the code as it stood when each format
//! was pinned): log entries of every kind (blank, membership and every
//! request variant, each world-0.2 command), the log's vote and purge
//! mark, a log segment and the atomic small files around them, snapshot
//! files (format 4 written; formats 1 to 3 read), the cluster record, the peer hello and its answers, peer RPC envelopes,
//! and the native client protocol's requests.
//!
//! For each sample the current code must encode it to exactly the golden
//! bytes, and decode the golden bytes and encode them again to the same
//! bytes. A format changes only through a new version (an appended
//! variant, a new snapshot magic): changing a field's type or position
//! fails here. `LOCKD_BLESS=1` writes a golden file that does not exist
//! yet, and never rewrites one that does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use lockd::command::{legacy, Command, Grant, Mode, PrefixPolicy};
use lockd::engine::ModuleHash;
use lockd::raft::network::{PeerRequest, PeerResponse};
use lockd::raft::snapshot::SnapshotBlob;
use lockd::raft::{Entry, LogId, Node, Request, SnapshotMeta, StoredMembership, Vote};
use lockd::upgrade::signature::{
    BoundUpgrade, KeyEntry, ModuleKey, ModuleSignature, SignedFor, SignedShadowStart, SignedUpgrade,
};
use lockd::upgrade::{Genesis, ShadowEntry, UpgradeEntry};
use lockd_client::proto::{Capacity, ClientRequest, UpgradeRecord, UpgradeResult};
use lockd_client::wire::{Envelope, Hello, HelloReply, Refused, Role, Welcome};
use openraft::{CommittedLeaderId, EntryPayload, Membership};
use serde::de::DeserializeOwned;
use serde::Serialize;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(32).enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for b in chunk {
            out.push_str(&format!("{b:02x}"));
        }
    }
    out.push('\n');
    out
}

fn unhex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// The golden bytes of `name`; with `LOCKD_BLESS=1`, `now` is written
/// first when no golden file exists.
fn golden(name: &str, now: &[u8]) -> Vec<u8> {
    let path = golden_dir().join(format!("{name}.hex"));
    if !path.exists() && std::env::var_os("LOCKD_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).expect("golden dir");
        std::fs::write(&path, hex(now)).expect("write golden");
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (a new format: LOCKD_BLESS=1 writes it)",
            path.display()
        )
    });
    unhex(&text)
}

/// `value` encodes to the golden bytes, which decode and encode again to
/// themselves.
fn pinned<T: Serialize + DeserializeOwned>(name: &str, value: &T) {
    let now = postcard::to_allocvec(value).expect("encode");
    let gold = golden(name, &now);
    assert_eq!(hex(&now), hex(&gold), "{name}: the encoding changed");
    let back: T = postcard::from_bytes(&gold)
        .unwrap_or_else(|e| panic!("{name}: the golden bytes no longer decode: {e}"));
    assert_eq!(
        postcard::to_allocvec(&back).expect("encode"),
        gold,
        "{name}: decoded and encoded again, the bytes differ"
    );
}

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, 2), index)
}

fn entry(index: u64, payload: EntryPayload<lockd::raft::TypeConfig>) -> Entry {
    Entry {
        log_id: log_id(3, index),
        payload,
    }
}

fn membership() -> Membership<u64, Node> {
    let voters: BTreeSet<u64> = [1, 2, 3].into();
    let nodes: BTreeMap<u64, Node> = (1..=4)
        .map(|i| {
            (
                i,
                Node {
                    addr: format!("10.0.0.{i}:7400"),
                },
            )
        })
        .collect();
    Membership::new(vec![voters], nodes)
}

fn upgrade() -> UpgradeEntry {
    UpgradeEntry {
        module: vec![0, 0x61, 0x73, 0x6d],
        replaces: ModuleHash([0x11; 32]),
    }
}

fn commands() -> Vec<Vec<Command>> {
    let shared = Command::Grant(Grant {
        mode: Mode::Shared,
        limit: 8,
        ..match Command::grant("cfg/a", 10_000) {
            Command::Grant(g) => g,
            _ => unreachable!("a grant"),
        }
    });
    vec![
        vec![Command::grant("jobs/nightly", 30_000), shared],
        vec![
            Command::release("jobs/nightly", 7),
            Command::expire("cfg/a", 8),
        ],
        vec![Command::SetPolicy(vec![PrefixPolicy {
            prefix: "reserved/".into(),
            reserved: true,
            max_lease_ms: Some(60_000),
            max_holders: Some(4),
            max_held: None,
        }])],
    ]
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
        ("commands", Request::Commands(commands())),
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
    ]
}

#[test]
fn log_entries_of_every_kind_are_pinned() {
    pinned("entry_blank", &entry(1, EntryPayload::Blank));
    pinned(
        "entry_membership",
        &entry(2, EntryPayload::Membership(membership())),
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

fn meta() -> SnapshotMeta {
    SnapshotMeta {
        last_log_id: Some(log_id(3, 40)),
        last_membership: StoredMembership::new(Some(log_id(3, 2)), membership()),
        snapshot_id: "3-40-1".into(),
    }
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

fn v1() -> V1 {
    V1 {
        meta: meta(),
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
        meta: meta(),
        module: vec![0, 0x61, 0x73, 0x6d],
        guest_state: b"guest state".to_vec(),
        module_since: 30,
        upgrades: vec![record()],
        capacity: Capacity {
            max_held: 7,
            max_key_bytes: 70,
        },
        module_keys: Default::default(),
    };
    for name in ["snapshot_v4_no_keys", "snapshot_v4_one_key"] {
        if name.ends_with("one_key") {
            blob.module_keys
                .apply(&KeyEntry::Trust(ModuleKey([0x33; 32])))
                .expect("trust");
        }
        let now = blob.encode().expect("encode");
        let gold = golden(name, &now);
        assert_eq!(hex(&now), hex(&gold), "{name}: snapshot format 4 changed");
        let back = SnapshotBlob::decode(&gold).expect("decodes");
        assert_eq!(back.encode().expect("encode"), gold, "{name}");
    }

    // Formats 1 to 3 are read, never written: their golden files decode,
    // with what they hold. (Nested structs encode as their fields in
    // order, as the flat ones of the time did.)
    let old = [
        ("snapshot_v1", file(b"LKDSNAP1", &v1()), 0, 0),
        ("snapshot_v2", file(b"LKDSNAP2", &v2()), 30, 1),
        (
            "snapshot_v3",
            file(
                b"LKDSNAP3",
                &V3 {
                    v2: v2(),
                    capacity: Capacity {
                        max_held: 7,
                        max_key_bytes: 70,
                    },
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
        assert_eq!(old.meta, meta(), "{name}");
        assert_eq!(old.guest_state, b"guest state", "{name}");
        assert_eq!(
            (old.module_since, old.upgrades.len()),
            (since, upgrades),
            "{name}"
        );
        assert!(old.module_keys.is_empty(), "{name}: no key");
    }
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

#[test]
fn the_peer_hello_and_peer_messages_are_pinned() {
    let fingerprint = "wasmtime 48; nan-canonical; fuel 5000000000".to_string();
    for (name, role) in [
        (
            "hello_peer",
            Role::Peer {
                from: 2,
                fingerprint: fingerprint.clone(),
            },
        ),
        ("hello_client", Role::Client),
        (
            "hello_client_token",
            Role::ClientToken {
                token: "lkd_secret".into(),
            },
        ),
        (
            "hello_peer_in_cluster",
            Role::PeerInCluster {
                from: 2,
                to: 1,
                fingerprint,
                cluster: "0123456789abcdef0123456789abcdef".into(),
            },
        ),
    ] {
        pinned(name, &Hello { role });
    }
    pinned(
        "hello_welcome",
        &HelloReply::Welcome(Welcome { node_id: 1 }),
    );
    pinned(
        "hello_refused",
        &HelloReply::Refused(Refused {
            reason: "it belongs to another cluster".into(),
        }),
    );
    let append = openraft::raft::AppendEntriesRequest::<lockd::raft::TypeConfig> {
        vote: Vote::new_committed(3, 2),
        prev_log_id: Some(log_id(3, 9)),
        leader_commit: Some(log_id(3, 9)),
        entries: vec![entry(
            10,
            EntryPayload::Normal(Request::Commands(commands())),
        )],
    };
    pinned(
        "peer_append_entries",
        &Envelope {
            id: 7,
            body: PeerRequest::AppendEntries(append),
        },
    );
    pinned(
        "peer_vote",
        &Envelope {
            id: 8,
            body: PeerRequest::Vote(openraft::raft::VoteRequest::new(
                Vote::new(4, 2),
                Some(log_id(3, 10)),
            )),
        },
    );
    pinned(
        "peer_install_snapshot",
        &Envelope {
            id: 9,
            body: PeerRequest::InstallSnapshot(openraft::raft::InstallSnapshotRequest {
                vote: Vote::new_committed(3, 2),
                meta: meta(),
                offset: 0,
                data: b"LKDSNAP4...".to_vec(),
                done: false,
            }),
        },
    );
    pinned(
        "peer_answer_error",
        &Envelope {
            id: 9,
            body: PeerResponse::Error("node 1 refused the request".into()),
        },
    );
}

#[test]
fn native_client_requests_are_pinned() {
    for (name, req) in [
        (
            "client_acquire",
            ClientRequest::Acquire {
                key: b"jobs/nightly".to_vec(),
                lease_ms: 10_000,
                wait_ms: 5_000,
            },
        ),
        (
            "client_release",
            ClientRequest::Release {
                key: b"jobs/nightly".to_vec(),
                token: 3,
            },
        ),
        (
            "client_keepalive",
            ClientRequest::Keepalive {
                key: b"jobs/nightly".to_vec(),
                token: 3,
            },
        ),
        (
            "client_get",
            ClientRequest::Get {
                key: b"jobs/nightly".to_vec(),
            },
        ),
        ("client_status", ClientRequest::Status),
    ] {
        pinned(name, &Envelope { id: 1, body: req });
    }
}
