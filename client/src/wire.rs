//! Frames of the framed protocol, shared by nodes and clients.
//!
//! A connection opens with [`PREFACE`] (`LKD` + version), then carries
//! length-delimited frames (4-byte big-endian length, at most [`MAX_FRAME`])
//! whose bodies are postcard. The first frame is a [`Hello`]; the node
//! answers [`HelloReply`]; then requests and responses travel in
//! [`Envelope`]s whose ids pair them, so one connection carries many
//! requests at once.

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio_util::codec::LengthDelimitedCodec;

/// The bytes a framed connection opens with.
pub const MAGIC: &[u8; 3] = b"LKD";
/// The protocol version this build speaks.
pub const VERSION: u8 = 1;
pub const PREFACE: [u8; 4] = [MAGIC[0], MAGIC[1], MAGIC[2], VERSION];

/// The largest frame accepted (snapshot chunks and module upgrades are the
/// big ones). A larger length prefix closes the connection.
pub const MAX_FRAME: usize = 64 << 20;

/// The first frame of a connection.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Hello {
    pub role: Role,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Role {
    /// A cluster member calling for Raft RPC. `fingerprint` is the full text
    /// of its engine fingerprint, so a refusal can say what differs.
    Peer { from: u64, fingerprint: String },
    /// A client of the lock service.
    Client,
}

/// The server's answer to a [`Hello`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum HelloReply {
    Welcome(Welcome),
    Refused(Refused),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Welcome {
    pub node_id: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Refused {
    pub reason: String,
}

/// A request or response with the id that pairs them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub id: u64,
    pub body: T,
}

pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

pub fn encode<T: Serialize>(value: &T) -> Result<Bytes, postcard::Error> {
    postcard::to_allocvec(value).map(Bytes::from)
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, postcard::Error> {
    postcard::from_bytes(bytes)
}
