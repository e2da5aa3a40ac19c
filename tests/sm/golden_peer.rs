//! The peer protocol pinned by golden bytes like the formats on disk
//! (`golden_formats`): the peer hello and its answers, and every peer
//! message (append, vote, install snapshot, errors, the quorum
//! pre-check's question and answer, the pre-vote, the hand-over notice,
//! keep-alives), as the node reads them and as consensus alone sends them.

use lockd::modules::peer_messages::{PeerRequest, PeerResponse, Prechecks};
use lockd::modules::peer_messages::{PrecheckAnswer, PrecheckAsk, SignedPrecheckAsk};
use lockd::raft::messages::{self, RaftOnly, ResignNotice, ServiceMessages};
use lockd::raft::messages::{PreVoteAnswer, PreVoteAsk};
use lockd::raft::{Request, Vote};
use lockd_client::wire::{Envelope, Hello, HelloReply, Refused, Role, Welcome};
use lockd_tests::golden::{commands, entry, log_id, meta, pinned};
use openraft::EntryPayload;

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
            EntryPayload::Normal(Request::commands(commands())),
        )],
    };
    pinned(
        "peer_append_entries",
        &Envelope {
            id: 7,
            body: PeerRequest::AppendEntries(append),
        },
    );
    pinned("peer_vote", &vote::<Prechecks>());
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
    pinned("peer_answer_not_member", &not_member::<Prechecks>());
    pinned(
        "peer_precheck",
        &Envelope {
            id: 11,
            body: PeerRequest::ServiceFirst(PrecheckAsk {
                vote: Vote::new_committed(3, 2),
                module: vec![0, 0x61, 0x73, 0x6d],
                rollback: true,
            }),
        },
    );
    pinned(
        "peer_signed_precheck",
        &Envelope {
            id: 11,
            body: PeerRequest::Service(SignedPrecheckAsk {
                ask: PrecheckAsk {
                    vote: Vote::new_committed(3, 2),
                    module: vec![0, 0x61, 0x73, 0x6d],
                    rollback: false,
                },
                signature: Some(lockd_core::signature::ModuleSignature([9; 64])),
                signed_for: lockd_core::signature::SignedFor::Shadow,
            }),
        },
    );
    pinned(
        "peer_answer_precheck",
        &Envelope {
            id: 11,
            body: PeerResponse::Service(PrecheckAnswer {
                accepted: false,
                reason: Some("too big".into()),
                compile_us: 450_000,
                migrate_us: 3_000,
            }),
        },
    );
    pinned(
        "peer_prevote",
        &Envelope {
            id: 12,
            body: PeerRequest::PreVote(PreVoteAsk {
                vote: Vote::new(4, 2),
                last_log_id: Some(log_id(3, 41)),
            }),
        },
    );
    pinned(
        "peer_answer_prevote",
        &Envelope {
            id: 12,
            body: PeerResponse::PreVote(PreVoteAnswer::LeaderHeard { wait_ms: 57 }),
        },
    );
    pinned(
        "peer_answer_prevote_not_voter",
        &Envelope {
            id: 12,
            body: PeerResponse::PreVote(PreVoteAnswer::NotVoter),
        },
    );
    pinned("peer_resign", &resign::<Prechecks>());
    pinned(
        "peer_answer_resigned",
        &Envelope {
            id: 13,
            body: PeerResponse::Resigned,
        },
    );
    pinned(
        "peer_keep_alive",
        &Envelope {
            id: 1,
            body: PeerRequest::KeepAlive { every_ms: 100 },
        },
    );
    pinned(
        "peer_answer_keep_alive",
        &Envelope {
            id: 1,
            body: PeerResponse::KeepAlive { every_ms: 100 },
        },
    );
    // A keep-alive (id 0: a request still arriving).
    pinned(
        "peer_answer_working",
        &Envelope {
            id: 0,
            body: PeerResponse::Working,
        },
    );
}

/// Consensus sends its own messages without the service's types
/// (`RaftOnly`): the same bytes as the node's full protocol, and a
/// service message in its place is refused as undecodable, not misread.
#[test]
fn consensus_alone_speaks_the_same_bytes() {
    type RaftResponse = lockd::raft::messages::PeerResponse;
    pinned("peer_vote", &vote::<RaftOnly>());
    pinned("peer_answer_not_member", &not_member::<RaftOnly>());
    pinned("peer_resign", &resign::<RaftOnly>());
    let verdict = postcard::to_allocvec(&Envelope {
        id: 11,
        body: PeerResponse::Service(PrecheckAnswer::refused("too big".into())),
    })
    .expect("encode");
    assert!(postcard::from_bytes::<Envelope<RaftResponse>>(&verdict).is_err());
}

/// The samples both views of the protocol pin, over `S`'s service
/// messages (the bytes do not depend on them).
fn vote<S: ServiceMessages>() -> Envelope<messages::PeerRequest<S>> {
    Envelope {
        id: 8,
        body: messages::PeerRequest::Vote(openraft::raft::VoteRequest::new(
            Vote::new(4, 2),
            Some(log_id(3, 10)),
        )),
    }
}

fn not_member<S: ServiceMessages>() -> Envelope<messages::PeerResponse<S>> {
    Envelope {
        id: 10,
        body: messages::PeerResponse::NotMember(
            "node 1 refused the request: node 5 is not a member".into(),
        ),
    }
}

fn resign<S: ServiceMessages>() -> Envelope<messages::PeerRequest<S>> {
    Envelope {
        id: 13,
        body: messages::PeerRequest::Resign(ResignNotice {
            vote: Vote::new_committed(3, 2),
            successor: 1,
        }),
    }
}
