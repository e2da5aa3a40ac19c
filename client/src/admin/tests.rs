//! Unit tests of the parent module.
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
