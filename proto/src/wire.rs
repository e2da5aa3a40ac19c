//! Frames of the framed protocol, shared by nodes and clients.
//!
//! A connection opens with [`PREFACE`] (`LKD` + version), then carries
//! length-delimited frames (4-byte big-endian length, at most [`MAX_FRAME`])
//! whose bodies are postcard. The first frame is a [`Hello`]; the node
//! answers [`HelloReply`]; then requests and responses travel in
//! [`Envelope`]s whose ids pair them, so one connection carries many
//! requests at once.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

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

/// `Debug` never shows a token (see the impl below).
#[derive(Clone, Serialize, Deserialize)]
pub enum Role {
    /// A cluster member calling for Raft RPC. `fingerprint` is the full text
    /// of its engine fingerprint, so a refusal can say what differs.
    Peer { from: u64, fingerprint: String },
    /// A client of the lock service.
    Client,
    /// A client of the lock service that authenticates with a bearer
    /// token (variants are appended: older nodes decode every earlier one).
    ClientToken { token: String },
    /// A cluster member that knows its cluster's id (32 hex digits),
    /// calling node `to`; a member that knows no id yet sends
    /// [`Role::Peer`].
    PeerInCluster {
        from: u64,
        to: u64,
        fingerprint: String,
        cluster: String,
    },
}

impl std::fmt::Debug for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Role::Peer { from, fingerprint } => f
                .debug_struct("Peer")
                .field("from", from)
                .field("fingerprint", fingerprint)
                .finish(),
            Role::Client => f.write_str("Client"),
            Role::ClientToken { .. } => f.write_str("ClientToken { token: … }"),
            Role::PeerInCluster {
                from,
                to,
                fingerprint,
                cluster,
            } => f
                .debug_struct("PeerInCluster")
                .field("from", from)
                .field("to", to)
                .field("fingerprint", fingerprint)
                .field("cluster", cluster)
                .finish(),
        }
    }
}

/// What a peer's hello says, whichever variant carried it.
#[derive(Clone, Copy, Debug)]
pub struct PeerHello<'a> {
    pub from: u64,
    /// The node called, when the hello names it.
    pub to: Option<u64>,
    pub fingerprint: &'a str,
    pub cluster: Option<&'a str>,
}

impl Role {
    /// The peer's hello, if this is one.
    pub fn peer(&self) -> Option<PeerHello<'_>> {
        match self {
            Role::Peer { from, fingerprint } => Some(PeerHello {
                from: *from,
                to: None,
                fingerprint,
                cluster: None,
            }),
            Role::PeerInCluster {
                from,
                to,
                fingerprint,
                cluster,
            } => Some(PeerHello {
                from: *from,
                to: Some(*to),
                fingerprint,
                cluster: Some(cluster),
            }),
            Role::Client | Role::ClientToken { .. } => None,
        }
    }
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

/// A frame's body: postcard, the one encoding of every frame.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, postcard::Error> {
    postcard::to_allocvec(value)
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, postcard::Error> {
    postcard::from_bytes(bytes)
}

/// A response frame: the envelope, then, for an error answer, its
/// [`crate::ErrorCode`] as a postcard string (docs/api.md, "Error
/// codes"). A reader that predates codes reads the envelope and ignores
/// the rest of the frame.
pub fn encode_answer<T: Serialize>(
    env: &Envelope<T>,
    code: Option<crate::ErrorCode>,
) -> Result<Vec<u8>, postcard::Error> {
    let mut bytes = encode(env)?;
    if let Some(code) = code {
        bytes.extend(encode(&code.as_str())?);
    }
    Ok(bytes)
}

/// A response frame ([`encode_answer`]): the envelope and the code, if
/// the node sent one this build knows.
pub fn decode_answer<T: DeserializeOwned>(
    bytes: &[u8],
) -> Result<(Envelope<T>, Option<crate::ErrorCode>), postcard::Error> {
    let (env, rest): (Envelope<T>, &[u8]) = postcard::take_from_bytes(bytes)?;
    let code = match rest {
        [] => None,
        _ => decode::<String>(rest)
            .ok()
            .and_then(|c| crate::ErrorCode::parse(&c)),
    };
    Ok((env, code))
}
