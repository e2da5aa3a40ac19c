//! The node's HTTP client for passing requests on to the leader: one
//! pooled HTTP/1 client, bodies streamed both ways, over TLS with this
//! node's certificate when the cluster speaks TLS (the leader believes a
//! forwarded principal only from a member node's certificate). Reading a
//! peer's JSON, as the audit checker does, uses the client crate's
//! `admin::Http`, the same one `lockctl` uses, with the same credentials.

use axum::body::Body;
use axum::http::{Request, Response};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lockd_net::Credentials;

/// Sends requests to other nodes.
#[derive(Clone)]
pub struct Forwarder {
    client: Client<HttpsConnector<lockd_net::socket::Connector>, Body>,
    credentials: Credentials,
}

impl Forwarder {
    /// A client presenting `credentials` (this node's certificate, or none).
    pub fn new(credentials: Credentials) -> Forwarder {
        let connector = lockd_net::http::connector(&credentials);
        Forwarder {
            client: Client::builder(TokioExecutor::new()).build(connector),
            credentials,
        }
    }

    /// `scheme://addr{path}` for the cluster's transport.
    pub fn url(&self, addr: &str, path: &str) -> String {
        format!("{}://{addr}{path}", self.credentials.scheme())
    }

    /// Send `request` (an absolute URI from [`Forwarder::url`]) and return
    /// the answer with its body still streaming. Dropping the future drops
    /// the request: a caller that leaves takes the forwarded request with
    /// it.
    pub async fn send(&self, request: Request<Body>) -> Result<Response<Body>, String> {
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| with_causes(&e))?;
        Ok(response.map(Body::new))
    }
}

/// An error and its causes, `: `-joined (hyper's own text says only
/// "client error (Connect)").
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}
