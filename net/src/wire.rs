//! Frames of the framed protocol on a tokio stream: the codec and the
//! client side of the opening handshake. The frame types themselves are
//! [`lockd_proto::wire`], re-exported here.

use bytes::Bytes;
use serde::Serialize;
use tokio_util::codec::LengthDelimitedCodec;

pub use lockd_proto::wire::*;

/// Length-delimited frames of at most [`MAX_FRAME`] bytes.
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

/// A frame's body ([`lockd_proto::wire::encode`]) as the codec's buffer
/// type; shadows the re-exported one.
pub fn encode<T: Serialize>(value: &T) -> Result<Bytes, postcard::Error> {
    lockd_proto::wire::encode(value).map(Bytes::from)
}

/// Why the opening handshake on a connected stream failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("hello does not encode: {0}")]
    Encode(String),
    /// The other side does not speak this protocol.
    #[error("{0}")]
    NotLockd(String),
    /// A lockd node that refused us (e.g. a different engine).
    #[error("{0}")]
    Refused(String),
}

/// The client side of the opening handshake, shared by clients and peers:
/// preface, `Hello { role }`, then the node's welcome (or refusal).
pub async fn handshake<S>(
    mut stream: S,
    role: Role,
) -> Result<(tokio_util::codec::Framed<S, LengthDelimitedCodec>, Welcome), HandshakeError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use futures::{SinkExt, StreamExt};
    use tokio::io::AsyncWriteExt;
    stream.write_all(&PREFACE).await?;
    let mut framed = tokio_util::codec::Framed::new(stream, codec());
    let hello = encode(&Hello { role }).map_err(|e| HandshakeError::Encode(e.to_string()))?;
    framed.send(hello).await?;
    let reply: HelloReply = match framed.next().await {
        Some(Ok(b)) => decode(&b).map_err(|e| {
            HandshakeError::NotLockd(format!("its answer to hello does not decode ({e})"))
        })?,
        Some(Err(e)) => {
            return Err(HandshakeError::NotLockd(format!(
                "bad framing in its answer ({e})"
            )))
        }
        None => {
            return Err(HandshakeError::NotLockd(
                "it closed the connection without answering hello".into(),
            ))
        }
    };
    match reply {
        HelloReply::Welcome(w) => Ok((framed, w)),
        HelloReply::Refused(r) => Err(HandshakeError::Refused(r.reason)),
    }
}
