//! The formats nodes and clients speak to each other, pinned by golden
//! bytes like the ones on disk (`golden_formats`): the peer hello and its
//! answers, peer RPC envelopes (append, vote, install snapshot, error, the
//! quorum pre-check's question and answer), and
//! the native client protocol's requests, and the watch stream's
//! responses.

use lockd::raft::messages::ResignNotice;
use lockd::raft::messages::{PeerRequest, PeerResponse};
use lockd::raft::messages::{PreVoteAnswer, PreVoteAsk};
use lockd::raft::messages::{PrecheckAnswer, PrecheckAsk};
use lockd::raft::{Request, Vote};
use lockd_client::wire::{Envelope, Hello, HelloReply, Refused, Role, Welcome};
use lockd_proto::{
    Acquire3, Acquire4, AcquireRequest, ChangeBatch, ChangeKind, ClientRequest, ClientResponse,
    ErrorCode, HolderId, LockMode, WatchChange, WatchCut, WatchRequest, WireError,
};
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
    pinned(
        "peer_answer_not_member",
        &Envelope {
            id: 10,
            body: PeerResponse::NotMember(
                "node 1 refused the request: node 5 is not a member".into(),
            ),
        },
    );
    pinned(
        "peer_precheck",
        &Envelope {
            id: 11,
            body: PeerRequest::Precheck(PrecheckAsk {
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
            body: PeerRequest::SignedPrecheck(lockd::raft::messages::SignedPrecheckAsk {
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
            body: PeerResponse::Precheck(PrecheckAnswer {
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
    pinned(
        "peer_resign",
        &Envelope {
            id: 13,
            body: PeerRequest::Resign(ResignNotice {
                vote: Vote::new_committed(3, 2),
                successor: 1,
            }),
        },
    );
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
        (
            // A reader that leaves the limit to the server (0: not given).
            "client_acquire_with",
            ClientRequest::AcquireWith(AcquireRequest {
                key: b"cfg".to_vec(),
                lease_ms: 10_000,
                wait_ms: 0,
                mode: LockMode::Shared,
                limit: 0,
                owner: "reader-1".into(),
                request_id: "r-1".into(),
            }),
        ),
        (
            "client_watch",
            ClientRequest::Watch(WatchRequest {
                prefix: b"jobs/".to_vec(),
                from: 42,
            }),
        ),
        (
            // A campaign at priority 7 (world 0.4's election policy).
            "client_acquire_ranked",
            ClientRequest::AcquireRanked(Acquire4 {
                base: Acquire3 {
                    base: AcquireRequest {
                        key: b"leader/db".to_vec(),
                        lease_ms: 10_000,
                        wait_ms: 600_000,
                        mode: LockMode::Exclusive,
                        limit: 1,
                        owner: "node-a".into(),
                        request_id: "c-1".into(),
                    },
                    session: 0,
                    reentrant: false,
                    value: "10.0.0.1:5432".into(),
                },
                priority: 7,
            }),
        ),
    ] {
        pinned(name, &Envelope { id: 1, body: req });
    }
}

#[test]
fn the_watch_stream_is_pinned() {
    let granted = WatchChange {
        key: "jobs/nightly".into(),
        kind: ChangeKind::Granted {
            token: 17,
            lease_ms: 30_000,
            mode: LockMode::Exclusive,
            limit: 1,
            holder: HolderId {
                principal: "ci".into(),
                owner: "worker-3".into(),
            },
        },
    };
    for (name, resp) in [
        (
            "watch_changes",
            ClientResponse::Changes(ChangeBatch {
                index: 42,
                changes: vec![
                    granted,
                    WatchChange {
                        key: "jobs/a".into(),
                        kind: ChangeKind::Released { token: 9 },
                    },
                    WatchChange {
                        key: "jobs/b".into(),
                        kind: ChangeKind::Expired { token: 8 },
                    },
                ],
            }),
        ),
        ("watch_progress", ClientResponse::Progress { index: 43 }),
        (
            "watch_cut",
            ClientResponse::Cut(WatchCut {
                code: "watch_behind".into(),
                message: "behind".into(),
                resume_from: 44,
            }),
        ),
    ] {
        pinned(name, &Envelope { id: 7, body: resp });
    }
}

/// An error answer on the native protocol: the envelope, then the error's
/// code as a postcard string. A client that predates codes reads the
/// envelope and ignores the rest; this client reads both.
#[test]
fn an_error_answer_carries_its_code_after_the_envelope() {
    use lockd::api::native_watch::Outgoing;
    use lockd_proto::wire::decode_answer;
    let error = ClientResponse::Error(WireError::NotHeld("jobs/a is not held".into()));
    let out = Outgoing::answer(7, error.clone(), Some(ErrorCode::NotHeld));
    let now = out.encode().expect("encode");
    let gold = lockd_tests::golden::golden("answer_error_code", &now);
    assert_eq!(
        lockd_tests::golden::hex(&now),
        lockd_tests::golden::hex(&gold),
        "the encoding changed"
    );
    let plain = postcard::to_allocvec(&Envelope {
        id: 7,
        body: error.clone(),
    })
    .expect("encode");
    assert_eq!(
        &gold[..plain.len()],
        &plain[..],
        "the envelope comes first, as before"
    );
    let old: Envelope<ClientResponse> = postcard::from_bytes(&gold).expect("an older reader");
    assert_eq!(old.body, error);
    let read = |bytes: &[u8]| {
        decode_answer::<ClientResponse>(bytes)
            .ok()
            .map(|(env, code)| (env.id, (env.body, code)))
    };
    assert_eq!(
        read(&gold),
        Some((7, (error.clone(), Some(ErrorCode::NotHeld))))
    );
    // No code: the frame is the envelope alone; an unknown code reads as none.
    assert_eq!(read(&plain), Some((7, (error.clone(), None))));
    let mut unknown = plain.clone();
    unknown.extend(postcard::to_allocvec("a_code_from_the_future").expect("encode"));
    assert_eq!(read(&unknown), Some((7, (error, None))));
}
