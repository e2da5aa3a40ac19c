//! DNS rebinding (docs/security.md, "Cross-site requests and the
//! console"): a page whose name was made to resolve to the node calls it
//! as its own origin, and only the `Host` it sends gives it away.
//!
//! * Without authentication: the rebound page's acquire (with the
//!   browser's `Origin` and `Sec-Fetch-Site: same-origin`, which the
//!   cross-site check lets through) is refused 421 `unknown_host` and the
//!   key stays free; its reads are refused too. The same request sent as
//!   `127.0.0.1:PORT` or `localhost:PORT` is served, and so is the rebound
//!   one on a node started with `--allowed-hosts r.example`.
//! * With authentication: a browser's acquire under a foreign name is
//!   refused even with a valid credential, while a plain client's is
//!   served whatever name it sends.

use std::time::Duration;

use lockd_client::security;
use lockd_client::tls::{Alpn, TlsClient};
use lockd_tests::cluster::Cluster;
use lockd_tests::secure::Who;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const WITHIN: Duration = Duration::from_secs(20);

/// What a rebound page's `fetch` sends besides `Host`.
fn browser(host: &str) -> Vec<(&'static str, String)> {
    vec![
        ("origin", format!("http://{host}")),
        ("sec-fetch-site", "same-origin".into()),
        ("sec-fetch-mode", "cors".into()),
    ]
}

/// An answer: its status and its JSON body (`Null` when it has none).
#[derive(Debug)]
struct Answer {
    status: u16,
    body: Value,
}

impl Answer {
    fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }
}

/// `method path` with `Host: host`, `headers` and a JSON `body` (empty:
/// none), exactly as written, to `addr`: over TLS with `tls`, else in the
/// clear.
fn send(
    addr: &str,
    tls: Option<&TlsClient>,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, String)],
    body: &str,
) -> Answer {
    let mut req = format!("{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() {
        req.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let text = rt.block_on(async {
        let stream = security::connect(addr, tls, Alpn::Http, None)
            .await
            .expect("connect");
        exchange(stream, &req).await
    });
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: not an HTTP answer: {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    Answer { status, body }
}

async fn exchange(mut stream: impl AsyncRead + AsyncWrite + Unpin, req: &str) -> String {
    stream.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn port(addr: &str) -> &str {
    addr.rsplit_once(':').map(|(_, p)| p).expect("HOST:PORT")
}

const ACQUIRE: &str = r#"{"lease_ms":10000}"#;

#[test]
fn a_rebound_page_is_refused_on_a_node_without_authentication() {
    let c = Cluster::start(1, &[]);
    c.wait_leader(WITHIN);
    let addr = c.addr(1).to_string();
    let rebound = format!("r.example:{}", port(&addr));
    let acquire = |host: &str, key: &str| {
        let path = format!("/v1/locks/{key}/acquire");
        send(&addr, None, "POST", &path, host, &browser(host), ACQUIRE)
    };

    let a = acquire(&rebound, "x");
    assert_eq!((a.status, a.code()), (421, "unknown_host"), "{a:?}");
    let error = a.body["error"].as_str().unwrap_or("");
    assert!(
        error.contains(&format!("{rebound:?}")) && error.contains("--allowed-hosts r.example"),
        "{error}"
    );
    let held = c.lock(1, "x").expect("read");
    assert_eq!(held.body["held"], Value::Bool(false), "{held:?}");
    // Reads, by the page or not: the lock state is no other site's.
    for path in ["/v1/locks/x", "/v1/locks", "/v1/status"] {
        let r = send(&addr, None, "GET", path, &rebound, &[], "");
        assert_eq!((r.status, r.code()), (421, "unknown_host"), "{path}: {r:?}");
        let r = send(&addr, None, "GET", path, &rebound, &browser(&rebound), "");
        assert_eq!(r.status, 421, "{path}: {r:?}");
    }

    // The node's own names: served, as the request stands.
    for host in [
        addr.clone(),
        format!("localhost:{}", port(&addr)),
        format!("LOCALHOST.:{}", port(&addr)),
    ] {
        let a = acquire(&host, "x");
        assert_eq!(a.status, 200, "{host}: {a:?}");
        let token = a.body["token"].as_u64().expect("token");
        let r = c.release(1, "x", token).expect("release");
        assert!(r.ok(), "{r:?}");
    }

    // A name the operator allows.
    let allowed = Cluster::start(1, &["--allowed-hosts", "lockd.test, r.example"]);
    allowed.wait_leader(WITHIN);
    let addr = allowed.addr(1).to_string();
    let rebound = format!("R.Example:{}", port(&addr));
    let path = "/v1/locks/x/acquire";
    let a = send(
        &addr,
        None,
        "POST",
        path,
        &rebound,
        &browser(&rebound),
        ACQUIRE,
    );
    assert_eq!(a.status, 200, "{a:?}");
    let r = send(&addr, None, "GET", "/v1/locks/x", "r.example", &[], "");
    assert_eq!(r.body["held"], Value::Bool(true), "{r:?}");
    let other = format!("q.example:{}", port(&addr));
    let a = send(&addr, None, "POST", path, &other, &browser(&other), ACQUIRE);
    assert_eq!((a.status, a.code()), (421, "unknown_host"), "{a:?}");
}

#[test]
fn a_browsers_write_under_a_foreign_name_is_refused_with_authentication() {
    let c = Cluster::start_secure(1, &[]);
    c.wait_leader(WITHIN);
    let addr = c.addr(1).to_string();
    let creds = c.secure().credentials(Who::Token("worker"));
    let tls = creds.tls.as_ref().expect("tls");
    let auth = (
        "authorization",
        format!("Bearer {}", creds.token.as_ref().expect("token").expose()),
    );
    let rebound = format!("r.example:{}", port(&addr));
    let path = "/v1/locks/jobs/h/acquire";
    let held = || {
        let r = c
            .as_who(Who::Cert("admin"))
            .request(&addr, "GET", "/v1/locks/jobs/h", None)
            .expect("read");
        r.body["held"].as_bool()
    };

    // A browser's, with a credential that would be enough.
    let mut headers = browser(&rebound);
    headers.push(auth.clone());
    let a = send(&addr, Some(tls), "POST", path, &rebound, &headers, ACQUIRE);
    assert_eq!((a.status, a.code()), (421, "unknown_host"), "{a:?}");
    assert_eq!(held(), Some(false));
    // Its reads are authorised as any other.
    let r = send(
        &addr,
        Some(tls),
        "GET",
        "/v1/locks/jobs/h",
        &rebound,
        &headers,
        "",
    );
    assert_eq!(r.status, 200, "{r:?}");

    // The same browser under the node's own name is served.
    let mut own = browser(&addr);
    own.push(auth.clone());
    let a = send(&addr, Some(tls), "POST", path, &addr, &own, ACQUIRE);
    assert_eq!(a.status, 200, "{a:?}");
    let token = a.body["token"].as_u64().expect("token");
    let release = format!(r#"{{"token":{token}}}"#);
    let r = send(
        &addr,
        Some(tls),
        "POST",
        "/v1/locks/jobs/h/release",
        &addr,
        &own,
        &release,
    );
    assert_eq!(r.status, 200, "{r:?}");

    // A plain client's request names any host: its credential counts.
    let a = send(&addr, Some(tls), "POST", path, &rebound, &[auth], ACQUIRE);
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(held(), Some(true));
}
