//! The native client protocol pinned by golden bytes like the formats on
//! disk (`golden_formats`): its requests, the watch stream's responses and
//! error answers. The peer protocol's are in `golden_peer`.

use lockd_client::wire::Envelope;
use lockd_proto::{
    Acquire3, Acquire4, AcquireRequest, ChangeBatch, ChangeKind, ClientRequest, ClientResponse,
    ErrorCode, HolderId, LockMode, WatchChange, WatchCut, WatchRequest, WireError,
};
use lockd_tests::golden::pinned;

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
