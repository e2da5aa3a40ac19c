//! [`Http`]: plain HTTP/1 requests to one node, over TLS when the
//! credentials say so, with a timeout and the bearer token where it may go;
//! [`AdminError`], why a request over the HTTP/JSON API failed (the
//! client's admin calls add the cluster-level cases: no leader, a refusal).

use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_rustls::HttpsConnector;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;

use crate::security::Credentials;
use crate::socket::Connector;
use crate::tls::Alpn;

/// How long [`Http::get_json`] waits for a whole answer by default: these
/// are quick reads, and a node that takes longer is as good as unreachable.
pub const GET_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an admin write (an upgrade, a membership change, a policy)
/// waits for its answer: long enough for a module's precheck and commit on
/// a busy cluster, and bounded, so that a connection cut while the answer
/// was on its way (a partition sends no reset) ends instead of waiting for
/// ever. The simulation found that wait.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// Why an admin request or a read failed. The texts are what `lockctl`
/// prints, so they name the request and keep the node's own message.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// No endpoint answered a status request.
    #[error("no endpoint answered")]
    NoAnswer,
    /// The bearer token may not be sent there (in the clear, not to a
    /// loopback address).
    #[error("{0}")]
    TokenKept(String),
    /// Endpoints answered, but none of them knows a leader.
    #[error("no endpoint knows a leader")]
    NoLeader,
    /// The address or path does not make a valid request.
    #[error(transparent)]
    Request(#[from] hyper::http::Error),
    /// No answer from the node (refused, reset, …).
    #[error(transparent)]
    Send(#[from] hyper_util::client::legacy::Error),
    /// No answer from the leader to an admin request.
    #[error("POST {path} to the leader at {addr}")]
    Post {
        path: String,
        addr: String,
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// The answer broke off.
    #[error(transparent)]
    Body(#[from] hyper::Error),
    /// A read answered with something other than 200.
    #[error("{status}: {body}")]
    Status { status: StatusCode, body: String },
    /// The leader refused an admin request; its own message.
    #[error("{message}")]
    Refused { status: StatusCode, message: String },
    /// The answer was not the JSON expected.
    #[error(transparent)]
    Decode(#[from] serde_json::Error),
    /// No whole answer within the [`Http`] timeout.
    #[error("timed out")]
    Timeout,
    /// An admin write had no answer within [`WRITE_TIMEOUT`]: it may or
    /// may not have taken effect.
    #[error("no answer to {path} from {addr} within {ms} ms: it may or may not have taken effect")]
    WriteTimeout { path: String, addr: String, ms: u64 },
}

/// An HTTP/1 client for single nodes, over TLS when its credentials say
/// so. Cheap to clone; clones share idle connections.
#[derive(Clone)]
pub struct Http {
    client: hyper_util::client::legacy::Client<HttpsConnector<Connector>, Full<Bytes>>,
    timeout: Duration,
    credentials: Credentials,
}

impl Default for Http {
    fn default() -> Self {
        Http::with_timeout(GET_TIMEOUT)
    }
}

/// The connector for `credentials`: HTTPS with their trust store and
/// client certificate, or plain HTTP without TLS settings.
pub fn connector(credentials: &Credentials) -> HttpsConnector<Connector> {
    let mut config = match &credentials.tls {
        Some(tls) => (*tls.config(Alpn::Http)).clone(),
        // Never used: without TLS settings every URL is http://.
        None => crate::tls::untrusting_config(),
    };
    // The connector sets ALPN (http/1.1) itself, and refuses a config
    // that already has it.
    config.alpn_protocols.clear();
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .wrap_connector(Connector)
}

impl Http {
    pub fn new() -> Http {
        Http::default()
    }

    /// `timeout` bounds each [`Http::get_json`], from connect to last byte.
    pub fn with_timeout(timeout: Duration) -> Http {
        Http::secured(timeout, Credentials::default())
    }

    /// Like [`Http::with_timeout`], presenting `credentials`.
    pub fn secured(timeout: Duration, credentials: Credentials) -> Http {
        Http {
            // No idle connections are kept: admin requests are rare, and
            // hyper's pool keeps them in a hash map, so dropping a client
            // closed them in an order that changed from process to process
            // (a simulated run did not replay: seed 1799).
            client: hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(0)
                .build(connector(&credentials)),
            timeout,
            credentials,
        }
    }

    /// Like [`Http::secured`], but keeping one idle connection per node,
    /// for a caller that sends request after request to the same nodes
    /// (`lockctl bench --http`: one per simulated client, as an HTTP
    /// client library keeps its connection alive).
    pub fn kept_alive(timeout: Duration, credentials: Credentials) -> Http {
        Http {
            client: hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(1)
                .build(connector(&credentials)),
            timeout,
            credentials,
        }
    }

    /// POST `body` as JSON to `path` on `addr`, within the timeout; the
    /// answer's status and bytes, whatever the status.
    pub async fn post_json(
        &self,
        addr: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<(StatusCode, Bytes), AdminError> {
        let request = Request::builder()
            .method(Method::POST)
            .uri(self.url(addr, path))
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))?;
        self.send_within(request, self.timeout).await
    }

    /// `scheme://addr{path}` for these credentials.
    pub fn url(&self, addr: &str, path: &str) -> String {
        format!("{}://{addr}{path}", self.credentials.scheme())
    }

    /// GET `path` from the node at `addr` and decode its JSON answer; any
    /// status but 200 is an error carrying the body.
    pub async fn get_json<T: DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
    ) -> Result<T, AdminError> {
        Ok(serde_json::from_slice(&self.get(addr, path).await?)?)
    }

    /// GET `path` from the node at `addr` as text (the metrics); any
    /// status but 200 is an error carrying the body.
    pub async fn get_text(&self, addr: &str, path: &str) -> Result<String, AdminError> {
        let bytes = self.get(addr, path).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    async fn get(&self, addr: &str, path: &str) -> Result<Bytes, AdminError> {
        let request = Request::builder()
            .method(Method::GET)
            .uri(self.url(addr, path))
            .body(Full::new(Bytes::new()))?;
        let fetch = async {
            let (status, bytes) = self.send(request).await?;
            if status != StatusCode::OK {
                return Err(AdminError::Status {
                    status,
                    body: String::from_utf8_lossy(&bytes).into_owned(),
                });
            }
            Ok(bytes)
        };
        tokio::time::timeout(self.timeout, fetch)
            .await
            .map_err(|_| AdminError::Timeout)?
    }

    /// Send `request` (with the bearer token, if any) with no timeout and
    /// hand back the answer as it arrives, for a long answer whose headers
    /// the caller reads (a snapshot).
    pub async fn request(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, AdminError> {
        Ok(self.client.request(self.authorised(request)?).await?)
    }

    /// [`Http::send`], ended with [`AdminError::Timeout`] after `limit`.
    pub async fn send_within(
        &self,
        request: Request<Full<Bytes>>,
        limit: Duration,
    ) -> Result<(StatusCode, Bytes), AdminError> {
        tokio::time::timeout(limit, self.send(request))
            .await
            .map_err(|_| AdminError::Timeout)?
    }

    /// Send `request` (with the bearer token, if any) and read the whole
    /// answer.
    ///
    /// Boxed here, so that hyper's client is compiled once, in this crate,
    /// not again in every crate that awaits an admin call (an `async fn`'s
    /// body is compiled where it is polled).
    #[inline(never)]
    pub fn send(
        &self,
        request: Request<Full<Bytes>>,
    ) -> BoxFuture<'_, Result<(StatusCode, Bytes), AdminError>> {
        Box::pin(self.send_inner(request))
    }

    async fn send_inner(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<(StatusCode, Bytes), AdminError> {
        let response = self.client.request(self.authorised(request)?).await?;
        let status = response.status();
        let bytes = response.into_body().collect().await?.to_bytes();
        Ok((status, bytes))
    }
}

impl Http {
    /// `request` with the bearer token, if any (and if it may go there:
    /// [`Credentials::token_for`]).
    pub fn authorised(
        &self,
        mut request: Request<Full<Bytes>>,
    ) -> Result<Request<Full<Bytes>>, AdminError> {
        let authority = request
            .uri()
            .authority()
            .map(|a| a.as_str().to_string())
            .unwrap_or_default();
        let token = self
            .credentials
            .token_for(&authority)
            .map_err(AdminError::TokenKept)?;
        if let Some(token) = token {
            let value = format!("Bearer {}", token.expose());
            if let Ok(v) = hyper::header::HeaderValue::from_str(&value) {
                request
                    .headers_mut()
                    .insert(hyper::header::AUTHORIZATION, v);
            }
        }
        Ok(request)
    }
}
