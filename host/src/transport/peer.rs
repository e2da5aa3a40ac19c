//! The calling side of a framed connection to a peer (Raft RPC, and the
//! check a leader makes before it adds a learner).
//!
//! With TLS, the connection presents this node's certificate and checks
//! the other side's against the node id it dials (`node-ID.lockd`), not
//! just its address: addresses get reused, node ids do not.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use lockd_client::security::{self, ConnectError, Stream};
use lockd_client::tls::{node_name, Alpn, TlsClient};
use rustls::pki_types::ServerName;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use super::TransportError;
use lockd_client::wire::{self as frame, Envelope, HandshakeError, Role, Welcome};

/// One framed connection, used for one request at a time.
pub struct FramedConn {
    addr: String,
    framed: Framed<Stream, LengthDelimitedCodec>,
    next_id: u64,
    pub welcome: Welcome,
}

impl FramedConn {
    /// Connect to node `target` at `addr` (over TLS with `tls`, which must
    /// then hold this node's certificate), send the preface and the hello,
    /// and wait for the welcome.
    pub async fn connect(
        addr: &str,
        target: u64,
        role: Role,
        timeout: Duration,
        tls: Option<&TlsClient>,
    ) -> Result<FramedConn, TransportError> {
        let ms = timeout.as_millis() as u64;
        let fut = async {
            let name = ServerName::try_from(node_name(target)).ok();
            let stream = security::connect(addr, tls, Alpn::Peer, name)
                .await
                .map_err(|e| match e {
                    ConnectError::Tcp(source) => TransportError::Connect {
                        addr: addr.to_string(),
                        source,
                    },
                    other => TransportError::Refused {
                        addr: addr.to_string(),
                        reason: other.to_string(),
                    },
                })?;
            let (framed, welcome) = frame::handshake(stream, role).await.map_err(|e| match e {
                HandshakeError::Io(source) => TransportError::Io {
                    addr: addr.to_string(),
                    source,
                },
                HandshakeError::Encode(e) => TransportError::Encode(e),
                HandshakeError::NotLockd(detail) => TransportError::NotLockd {
                    addr: addr.to_string(),
                    detail,
                },
                HandshakeError::Refused(reason) => TransportError::Refused {
                    addr: addr.to_string(),
                    reason,
                },
            })?;
            Ok(FramedConn {
                addr: addr.to_string(),
                framed,
                next_id: 1,
                welcome,
            })
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| TransportError::Timeout {
                addr: addr.to_string(),
                what: "connect",
                ms,
            })?
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Send one request and wait for its response.
    pub async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &mut self,
        body: &Req,
        timeout: Duration,
    ) -> Result<Resp, TransportError> {
        let id = self.next_id;
        self.next_id += 1;
        let addr = self.addr.clone();
        let ms = timeout.as_millis() as u64;
        let bytes = frame::encode(&Envelope { id, body })
            .map_err(|e| TransportError::Encode(e.to_string()))?;
        let fut = async {
            self.framed
                .send(bytes)
                .await
                .map_err(|source| TransportError::Io {
                    addr: addr.clone(),
                    source,
                })?;
            loop {
                let frame = match self.framed.next().await {
                    Some(Ok(f)) => f,
                    Some(Err(source)) => {
                        return Err(TransportError::Io {
                            addr: addr.clone(),
                            source,
                        })
                    }
                    None => return Err(TransportError::Closed { addr: addr.clone() }),
                };
                let env: Envelope<Resp> =
                    frame::decode(&frame).map_err(|e| TransportError::Decode {
                        addr: addr.clone(),
                        detail: e.to_string(),
                    })?;
                // Another id is skipped. None is owed: the caller drops a
                // connection after any call that failed or was abandoned
                // (`raft::network::PeerClient::call`).
                if env.id == id {
                    return Ok(env.body);
                }
            }
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| TransportError::Timeout {
                addr: addr.clone(),
                what: "request",
                ms,
            })?
    }
}
