//! The node's HTTP client for passing requests on to the leader: one
//! pooled HTTP/1 client, bodies streamed both ways. (Reading a peer's JSON,
//! as the audit checker does, uses the client crate's `admin::Http`, the
//! same one `lockctl` uses.)

use std::sync::OnceLock;

use axum::body::Body;
use axum::http::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

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
