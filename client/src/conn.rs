//! One framed connection to a node, carrying many requests at once.

use std::collections::HashMap;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::Framed;

use crate::proto::{ClientRequest, ClientResponse};
use crate::security::{self, Credentials, Stream};
use crate::tls::Alpn;
use crate::wire::{self, Envelope, HandshakeError, Role};

/// Why talking to a node failed (as opposed to the node saying no).
#[derive(Clone, Debug, thiserror::Error)]
pub enum ConnError {
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("{addr} is not a lockd node: {reason}")]
    NotLockd { addr: String, reason: String },
    #[error("{addr} refused the connection: {reason}")]
    Refused { addr: String, reason: String },
    /// The connection was already closed: the request was never sent.
    #[error("connection to {addr} was closed")]
    NotSent { addr: String },
    /// The connection broke after the request was sent.
    #[error("connection to {addr} lost")]
    Lost { addr: String },
    #[error("request to {addr} timed out after {ms} ms")]
    Timeout { addr: String, ms: u64 },
}

/// A request and where its answer goes: the node's response, or
/// [`ConnError::NotSent`] when the connection ended before it was written.
type Call = (
    ClientRequest,
    oneshot::Sender<Result<ClientResponse, ConnError>>,
);

/// A live connection; dropping it closes the socket (and with it, every
/// acquire still waiting on this connection is abandoned on the node).
#[derive(Clone)]
pub struct Conn {
    pub addr: String,
    pub node_id: u64,
    tx: mpsc::UnboundedSender<Call>,
}

impl Conn {
    /// Connect to the node at `addr` with `credentials` (TLS when they
    /// carry TLS settings; the token, if any, goes in the hello).
    ///
    /// Boxed here: the TLS connect, the handshake and the connection's task
    /// are compiled once, in this crate, not in every crate that awaits it.
    #[inline(never)]
    pub fn open<'a>(
        addr: &'a str,
        timeout: Duration,
        credentials: &'a Credentials,
    ) -> BoxFuture<'a, Result<Conn, ConnError>> {
        Box::pin(Conn::open_inner(addr, timeout, credentials))
    }

    async fn open_inner(
        addr: &str,
        timeout: Duration,
        credentials: &Credentials,
    ) -> Result<Conn, ConnError> {
        let fut = async {
            let connect = |reason: String| ConnError::Connect {
                addr: addr.to_string(),
                reason,
            };
            let token = credentials.token_for(addr).map_err(connect)?;
            let stream = security::connect(addr, credentials.tls.as_ref(), Alpn::Native, None)
                .await
                .map_err(|e| connect(e.to_string()))?;
            let role = match token {
                Some(t) => Role::ClientToken {
                    token: t.expose().to_string(),
                },
                None => Role::Client,
            };
            let (framed, welcome) = wire::handshake(stream, role).await.map_err(|e| match e {
                HandshakeError::Io(e) => connect(e.to_string()),
                HandshakeError::Encode(e) => connect(e),
                HandshakeError::NotLockd(reason) => ConnError::NotLockd {
                    addr: addr.to_string(),
                    reason,
                },
                HandshakeError::Refused(reason) => ConnError::Refused {
                    addr: addr.to_string(),
                    reason,
                },
            })?;
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run(framed, rx));
            Ok(Conn {
                addr: addr.to_string(),
                node_id: welcome.node_id,
                tx,
            })
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| ConnError::Timeout {
                addr: addr.to_string(),
                ms: timeout.as_millis() as u64,
            })?
    }

    /// Send one request; wait for its response at most `timeout`.
    pub async fn call(
        &self,
        req: ClientRequest,
        timeout: Duration,
    ) -> Result<ClientResponse, ConnError> {
        let (reply, rx) = oneshot::channel();
        // A closed queue means the connection task is gone: never sent.
        self.tx.send((req, reply)).map_err(|_| ConnError::NotSent {
            addr: self.addr.clone(),
        })?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(r)) => r,
            // Written (or being written) when the connection broke.
            Ok(Err(_)) => Err(ConnError::Lost {
                addr: self.addr.clone(),
            }),
            Err(_) => Err(ConnError::Timeout {
                addr: self.addr.clone(),
                ms: timeout.as_millis() as u64,
            }),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// The connection task: writes requests, routes responses by id.
async fn run(
    framed: Framed<Stream, tokio_util::codec::LengthDelimitedCodec>,
    mut rx: mpsc::UnboundedReceiver<Call>,
) {
    let addr = framed
        .get_ref()
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    serve(framed, &mut rx, &addr).await;
    // Requests still queued were never written: say so, so that callers
    // may safely retry them elsewhere. (Written ones are dropped: "lost".)
    rx.close();
    while let Ok((_, reply)) = rx.try_recv() {
        let _ = reply.send(Err(ConnError::NotSent { addr: addr.clone() }));
    }
}

async fn serve(
    framed: Framed<Stream, tokio_util::codec::LengthDelimitedCodec>,
    rx: &mut mpsc::UnboundedReceiver<Call>,
    addr: &str,
) {
    let (mut sink, mut stream) = framed.split();
    let mut pending: HashMap<u64, oneshot::Sender<Result<ClientResponse, ConnError>>> =
        HashMap::new();
    let mut next_id = 1u64;
    loop {
        tokio::select! {
            call = rx.recv() => {
                let Some((req, reply)) = call else { return };
                let id = next_id;
                next_id += 1;
                let Ok(bytes) = wire::encode(&Envelope { id, body: req }) else {
                    // Never written: the caller may retry it elsewhere.
                    let _ = reply.send(Err(ConnError::NotSent { addr: addr.to_string() }));
                    continue;
                };
                pending.insert(id, reply);
                if sink.send(bytes).await.is_err() {
                    return;
                }
            }
            frame = stream.next() => {
                let Some(Ok(bytes)) = frame else { return };
                let Ok(env) = wire::decode::<Envelope<ClientResponse>>(&bytes) else { return };
                if let Some(reply) = pending.remove(&env.id) {
                    let _ = reply.send(Ok(env.body));
                }
                // Drop the senders of callers that gave up (timed out).
                pending.retain(|_, r| !r.is_closed());
            }
        }
    }
}
