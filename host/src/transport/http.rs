//! The node's HTTP client for talking to peers: one pooled HTTP/1 client,
//! used to pass a request on to the leader and to read a peer's JSON (the
//! audit checker).

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// How long a peer query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

fn client() -> &'static Client<HttpConnector, Body> {
    static CLIENT: OnceLock<Client<HttpConnector, Body>> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Client::builder(TokioExecutor::new()).build(connector)
    })
}

/// Send `request` (an absolute `http://` URI) and return the answer with its
/// body still streaming. Dropping the future drops the request: a caller
/// that leaves takes the forwarded request with it.
pub async fn send(request: Request<Body>) -> Result<Response<Body>, String> {
    let response = client().request(request).await.map_err(|e| e.to_string())?;
    Ok(response.map(Body::new))
}

/// GET `path` from the node at `addr` and decode its JSON answer, with a
/// short timeout.
pub async fn get_json<T: serde::de::DeserializeOwned>(addr: &str, path: &str) -> Result<T, String> {
    let request = Request::builder()
        .method(Method::GET)
        .uri(format!("http://{addr}{path}"))
        .body(Body::empty())
        .map_err(|e| e.to_string())?;
    let fetch = async {
        let response = send(request).await?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        if status != StatusCode::OK {
            return Err(format!("{status}: {}", String::from_utf8_lossy(&bytes)));
        }
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    };
    tokio::time::timeout(QUERY_TIMEOUT, fetch)
        .await
        .map_err(|_| "timed out".to_string())?
}
