//! Unit tests of the parent module.
use std::time::Duration;

use super::*;

#[test]
fn query_parameters_are_joined_only_when_present() {
    assert_eq!(with_query("/v1/admin/shadow", &[]), "/v1/admin/shadow");
    assert_eq!(
        with_query(
            "/v1/admin/upgrade",
            &["replaces=ab".into(), "precheck=false".into()]
        ),
        "/v1/admin/upgrade?replaces=ab&precheck=false"
    );
}

#[tokio::test]
async fn a_node_that_does_not_answer_is_a_timeout() {
    // The kernel completes the connection (backlog); nobody answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let http = Http::with_timeout(Duration::from_millis(100));
    let r = http.get_json::<AuditReport>(&addr, "/v1/audit").await;
    assert!(matches!(r, Err(AdminError::Timeout)), "{r:?}");
    assert_eq!(
        r.map(|_| ()).map_err(|e| e.to_string()),
        Err("timed out".into())
    );
    drop(listener);
}

#[tokio::test]
async fn a_write_that_gets_no_answer_ends_at_its_bound() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let http = Http::new();
    let request = Request::builder()
        .method(Method::POST)
        .uri(http.url(&addr, "/v1/admin/upgrade"))
        .body(Full::new(Bytes::from_static(b"\0asm")))
        .expect("request");
    let r = http.send_within(request, Duration::from_millis(100)).await;
    assert!(matches!(r, Err(AdminError::Timeout)), "{r:?}");
    drop(listener);
}

fn members(ids: &[u64]) -> Vec<Member> {
    ids.iter()
        .map(|id| Member {
            id: *id,
            addr: format!("n{id}:7000"),
            voter: true,
        })
        .collect()
}

#[test]
fn the_leader_is_the_newest_term_s_and_a_deposed_one_is_not_believed() {
    let all = members(&[1, 2, 3, 4, 5]);
    let without_2 = members(&[1, 3, 4, 5]);
    // Node 5 still leads term 1 with the old membership (it missed the
    // removal of 2); node 3 has seen term 2, whose leader is node 1.
    let views = [
        (1, Some(5), all.as_slice()),
        (2, Some(1), without_2.as_slice()),
    ];
    assert_eq!(newest_leader(views), Some("n1:7000".into()));
    // In either order.
    let views = [
        (2, Some(1), without_2.as_slice()),
        (1, Some(5), all.as_slice()),
    ];
    assert_eq!(newest_leader(views), Some("n1:7000".into()));
    // The newest term has no leader yet: the older one is not taken.
    let views = [(1, Some(5), all.as_slice()), (3, None, all.as_slice())];
    assert_eq!(newest_leader(views), None);
    // A removed node names a leader it has no address for: another view
    // of the same term that has one is taken.
    let only_2 = members(&[2]);
    let views = [
        (2, Some(1), only_2.as_slice()),
        (2, Some(1), without_2.as_slice()),
    ];
    assert_eq!(newest_leader(views), Some("n1:7000".into()));
    assert_eq!(newest_leader([]), None);
    // Two leaders of one term (openraft orders them by node id): the
    // higher id, in either order.
    for views in [
        [(4, Some(2), all.as_slice()), (4, Some(3), all.as_slice())],
        [(4, Some(3), all.as_slice()), (4, Some(2), all.as_slice())],
    ] {
        assert_eq!(newest_leader(views), Some("n3:7000".into()));
    }
}
