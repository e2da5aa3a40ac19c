//! One framed connection to a node, carrying many requests at once.

use std::collections::HashMap;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::Framed;

use crate::proto::{ClientRequest, ClientResponse, ErrorCode};
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

/// Where a request's answers go.
enum Reply {
    /// One response (with an error's precise code when the node sent
    /// one), or [`ConnError::NotSent`] when the connection ended before
    /// it was written.
    Once(oneshot::Sender<Result<Answer, ConnError>>),
    /// A stream of responses (a watch), until one that ends it or the
    /// connection; the channel's bound holds the reading back when its
    /// receiver is slow.
    Many(mpsc::Sender<ClientResponse>),
}

impl Reply {
    fn is_closed(&self) -> bool {
        match self {
            Reply::Once(r) => r.is_closed(),
            Reply::Many(r) => r.is_closed(),
        }
    }
}

/// A request and where its answers go.
type Call = (ClientRequest, Reply);

/// A response, and the precise code of an error response, which a node
/// sends after the envelope (docs/api.md, "Error codes"; `None` from a
/// node that sends none).
pub type Answer = (ClientResponse, Option<ErrorCode>);

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
        self.call_coded(req, timeout).await.map(|(r, _)| r)
    }

    /// [`Conn::call`], with an error's precise code.
    pub async fn call_coded(
        &self,
        req: ClientRequest,
        timeout: Duration,
    ) -> Result<Answer, ConnError> {
        let (reply, rx) = oneshot::channel();
        // A closed queue means the connection task is gone: never sent.
        self.tx
            .send((req, Reply::Once(reply)))
            .map_err(|_| ConnError::NotSent {
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

    /// Send one request answered by a stream of responses (a watch). The
    /// stream ends when the node ends it ([`ClientResponse::Cut`] or an
    /// error) or the connection goes. Use a connection of its own: while
    /// the receiver is full, no response of any request on this
    /// connection is read.
    pub fn stream(&self, req: ClientRequest) -> Result<mpsc::Receiver<ClientResponse>, ConnError> {
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        self.tx
            .send((req, Reply::Many(tx)))
            .map_err(|_| ConnError::NotSent {
                addr: self.addr.clone(),
            })?;
        Ok(rx)
    }
}

/// Responses of a stream read ahead of its receiver.
const STREAM_BUFFER: usize = 64;

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
        if let Reply::Once(reply) = reply {
            let _ = reply.send(Err(ConnError::NotSent { addr: addr.clone() }));
        }
    }
}

async fn serve(
    framed: Framed<Stream, tokio_util::codec::LengthDelimitedCodec>,
    rx: &mut mpsc::UnboundedReceiver<Call>,
    addr: &str,
) {
    let (mut sink, mut stream) = framed.split();
    let mut pending: HashMap<u64, Reply> = HashMap::new();
    let mut next_id = 1u64;
    loop {
        tokio::select! {
            call = rx.recv() => {
                let Some((req, reply)) = call else { return };
                let id = next_id;
                next_id += 1;
                let Ok(bytes) = wire::encode(&Envelope { id, body: req }) else {
                    // Never written: the caller may retry it elsewhere.
                    if let Reply::Once(reply) = reply {
                        let _ = reply.send(Err(ConnError::NotSent { addr: addr.to_string() }));
                    }
                    continue;
                };
                pending.insert(id, reply);
                if sink.send(bytes).await.is_err() {
                    return;
                }
            }
            frame = stream.next() => {
                let Some(Ok(bytes)) = frame else { return };
                let Ok((Envelope { id, body }, code)) = wire::decode_answer::<ClientResponse>(&bytes) else { return };
                let last = matches!(body, ClientResponse::Cut(_) | ClientResponse::Error(_));
                match pending.remove(&id) {
                    Some(Reply::Once(reply)) => {
                        let _ = reply.send(Ok((body, code)));
                    }
                    Some(Reply::Many(to)) => {
                        // Waits while the receiver is full: the node's
                        // stream waits for this connection in turn.
                        let delivered = to.send(body).await.is_ok();
                        if delivered && !last {
                            pending.insert(id, Reply::Many(to));
                        }
                    }
                    None => {}
                }
                // Drop the senders of callers that gave up (timed out).
                pending.retain(|_, r| !r.is_closed());
            }
        }
    }
}
