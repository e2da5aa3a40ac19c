//! Request bodies, read once: [`JsonBody`] (strict JSON, at most
//! [`MAX_BODY`] bytes), [`RawBody`] (the same bytes, parsed by the handler)
//! and [`ModuleBody`] (component bytes, at most the node's
//! `--max-module-bytes`). Either refuses with a precise [`ApiError`] before a
//! handler runs, so bad input never gets near the log.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use http_body_util::BodyExt;
use lockd_proto::ErrorCode;

use super::error::ApiError;
use super::services::Services;
use crate::transport::limits::CLIENT_STALL;

/// The largest JSON request body accepted.
pub(crate) const MAX_BODY: usize = 64 << 10;

/// The ceiling of `--max-module-bytes` (and what a follower forwards to
/// the leader, whose own bound then applies).
pub(crate) const MAX_MODULE: usize = 32 << 20;

/// The default bound on a module's size. Both reference modules are well
/// under 1 MiB; an 8 MiB upgrade entry commits in well under a second, a
/// 30 MiB one starved heartbeats until the leader lost its lease.
pub const DEFAULT_MAX_MODULE: usize = 4 << 20;

/// The body's bytes, at most `limit` of them (`what` names it in the
/// error), each part within [`CLIENT_STALL`] of the one before: a body may
/// come slowly, but a sender that stops is refused (408), not waited for.
pub async fn read(body: Body, limit: usize, what: &str) -> Result<Bytes, ApiError> {
    let limited = http_body_util::Limited::new(body, limit);
    let mut body = std::pin::pin!(limited);
    let mut bytes = Vec::new();
    loop {
        let frame = match tokio::time::timeout(CLIENT_STALL, body.frame()).await {
            Err(_) => {
                return Err(ApiError::new(
                    ErrorCode::RequestTimeout,
                    format!(
                        "{what}: nothing of it arrived for {} s",
                        CLIENT_STALL.as_secs()
                    ),
                ))
            }
            Ok(None) => return Ok(Bytes::from(bytes)),
            Ok(Some(frame)) => frame,
        };
        let frame = frame.map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                ApiError::new(
                    ErrorCode::BodyTooLarge,
                    format!("{what} is over {limit} bytes"),
                )
            } else {
                ApiError::bad_request(format!("cannot read request body: {e}"))
            }
        })?;
        if let Ok(data) = frame.into_data() {
            bytes.extend_from_slice(&data);
        }
    }
}

/// A JSON body, parsed strictly (unknown fields are refused by the types).
pub(crate) struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, ApiError> {
        let bytes = read(req.into_body(), MAX_BODY, "request body").await?;
        parse(&bytes).map(JsonBody)
    }
}

/// A JSON body's bytes, read within [`MAX_BODY`], for a handler that picks
/// the type from the path; parse them with [`parse`].
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, ApiError> {
        read(req.into_body(), MAX_BODY, "request body")
            .await
            .map(RawBody)
    }
}

/// Parse a JSON body strictly, with errors that say what is wrong.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
}

/// A component's bytes; never empty, at most the node's
/// `--max-module-bytes`.
pub struct ModuleBody(pub Bytes);

impl FromRequest<Arc<Services>> for ModuleBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, node: &Arc<Services>) -> Result<Self, ApiError> {
        const WHAT: &str = "module (see --max-module-bytes)";
        let limit = node.max_module_bytes();
        // Refuse by the announced length before reading a byte of it.
        let announced = req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if announced.is_some_and(|n| n > limit as u64) {
            return Err(ApiError::new(
                ErrorCode::BodyTooLarge,
                format!("{WHAT} is over {limit} bytes"),
            ));
        }
        let bytes = read(req.into_body(), limit, WHAT).await?;
        if bytes.is_empty() {
            return Err(ApiError::bad_request(
                "the request body must be the component's bytes (it is empty)",
            ));
        }
        Ok(ModuleBody(bytes))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::http::StatusCode;

    use futures::StreamExt;

    use super::*;

    /// A body that sends `first`, then nothing, never ending.
    fn stalled(first: &'static [u8]) -> Body {
        let parts = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(first))])
            .chain(futures::stream::pending());
        Body::from_stream(parts)
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_coming_is_refused_at_the_stall_bound() {
        let started = tokio::time::Instant::now();
        let e = read(stalled(b"{\"lease_ms\":"), MAX_BODY, "request body")
            .await
            .expect_err("a body that never ends");
        assert_eq!(e.status, StatusCode::REQUEST_TIMEOUT, "{e:?}");
        assert_eq!(e.code, ErrorCode::RequestTimeout, "{e:?}");
        assert_eq!(started.elapsed(), CLIENT_STALL);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_body_that_keeps_coming_is_read_whole() {
        // A part every 20 s: each within the bound, the whole far past it.
        let parts = futures::stream::iter(0..4).then(|i| async move {
            if i > 0 {
                tokio::time::sleep(Duration::from_secs(20)).await;
            }
            Ok::<_, std::io::Error>(Bytes::from(vec![b'a'; 10]))
        });
        let bytes = read(Body::from_stream(parts), MAX_BODY, "request body")
            .await
            .expect("read whole");
        assert_eq!(bytes.len(), 40);
        // And the size bound still holds.
        let big = Body::from(vec![0u8; MAX_BODY + 1]);
        let e = read(big, MAX_BODY, "request body")
            .await
            .expect_err("too big");
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE, "{e:?}");
    }
}
