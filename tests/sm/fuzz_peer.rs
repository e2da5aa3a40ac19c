//! Fuzzing of what peers send, past the first byte: valid peer requests
//! (entries of every kind, votes, snapshot chunks) and snapshot files,
//! encoded and then mutated, must decode to something or fail cleanly,
//! and whatever decodes must pass through the peer gate and the snapshot
//! decoder without a panic. Random bytes alone rarely get past a decoder's
//! first tag; mutations of valid encodings reach the deeper fields.

use lockd::raft::messages::PeerRequest;
use lockd::raft::peer_check::PeerGate;
use lockd::raft::{Entry, Request, SnapshotMeta, Vote};
use lockd_client::wire::{self, Envelope};
use lockd_core::command::Command;
use lockd_core::engine::ModuleHash;
use lockd_core::replica::capacity::Capacity;
use lockd_core::snapshot::SnapshotBlob;
use lockd_core::upgrade::UpgradeEntry;
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use openraft::{CommittedLeaderId, EntryPayload, LogId};
use proptest::prelude::*;

fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

/// One valid peer request of each kind, chosen by `kind`, with `key` and
/// `n` in its fields.
fn request(kind: u8, key: &str, n: u64) -> PeerRequest {
    let entries = vec![
        Entry {
            log_id: log_id(2, n),
            payload: EntryPayload::Normal(Request::commands(vec![vec![
                Command::grant(key, n),
                Command::release(key, n),
            ]])),
        },
        Entry {
            log_id: log_id(2, n + 1),
            payload: EntryPayload::Normal(Request::Upgrade(UpgradeEntry {
                module: key.as_bytes().to_vec(),
                replaces: ModuleHash::of(key.as_bytes()),
            })),
        },
        Entry {
            log_id: log_id(2, n + 2),
            payload: EntryPayload::Normal(Request::Capacity(Capacity {
                max_held: n,
                max_key_bytes: n,
            })),
        },
        Entry {
            log_id: log_id(2, n + 3),
            payload: EntryPayload::Blank,
        },
    ];
    match kind % 3 {
        0 => PeerRequest::AppendEntries(AppendEntriesRequest {
            vote: Vote::new_committed(2, 1),
            prev_log_id: Some(log_id(1, n)),
            entries,
            leader_commit: Some(log_id(1, n)),
        }),
        1 => PeerRequest::Vote(VoteRequest::new(Vote::new(n % 1000, 1), Some(log_id(1, n)))),
        _ => PeerRequest::InstallSnapshot(InstallSnapshotRequest {
            vote: Vote::new_committed(2, 1),
            meta: SnapshotMeta {
                last_log_id: Some(log_id(2, n)),
                last_membership: Default::default(),
                snapshot_id: key.to_string(),
            },
            offset: n % 4096,
            data: key.as_bytes().to_vec(),
            done: n.is_multiple_of(2),
        }),
    }
}

fn mutate(bytes: &mut [u8], flips: &[(usize, u8)]) {
    let n = bytes.len();
    for (at, x) in flips {
        bytes[at % n] ^= x;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_peer_requests_decode_or_fail_cleanly_and_the_gate_takes_them(
        kind in any::<u8>(),
        key in ".{0,24}",
        n in 1u64..1_000_000,
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8),
    ) {
        let env = Envelope { id: 3, body: request(kind, &key, n) };
        let mut bytes = wire::encode(&env).unwrap().to_vec();
        mutate(&mut bytes, &flips);
        if let Ok(env) = wire::decode::<Envelope<PeerRequest>>(&bytes) {
            let gate = PeerGate::new(1 << 20);
            let _ = gate.check(1, &env.body, |id| Some(id < 4));
            if let PeerRequest::AppendEntries(r) = &env.body {
                let _ = lockd::raft::network::entries_that_fit(&r.entries);
                for e in &r.entries {
                    if let EntryPayload::Normal(req) = &e.payload {
                        let _ = req.wire_bytes();
                        let _ = req.to_string();
                    }
                }
            }
        }
    }

    #[test]
    fn mutated_snapshot_files_decode_or_fail_cleanly(
        key in ".{0,24}",
        n in 1u64..1_000_000,
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8),
    ) {
        let blob = SnapshotBlob {
            meta: lockd_core::entry::SnapshotMeta {
                last_log_id: Some(lockd_core::entry::LogId::new(2, 1, n)),
                last_membership: Default::default(),
                snapshot_id: key.clone(),
            },
            module: key.as_bytes().to_vec(),
            guest_state: key.as_bytes().to_vec(),
            module_since: n,
            upgrades: Vec::new(),
            capacity: Capacity { max_held: n, max_key_bytes: n },
            module_keys: Default::default(),
            first_module: None,
            failures: Default::default(),
            way_back: Default::default(),
            precheck: None,
        };
        let mut bytes = blob.encode().unwrap();
        mutate(&mut bytes, &flips);
        let _ = SnapshotBlob::decode(&bytes);
    }
}
