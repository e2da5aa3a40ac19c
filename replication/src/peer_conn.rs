//! The calling side of a framed connection to a peer (Raft RPC, and the
//! check a leader makes before it adds a learner).
//!
//! With TLS, the connection presents this node's certificate and checks
//! the other side's against the node id it dials (`node-ID.lockd`), not
//! just its address: addresses get reused, node ids do not.
//!
//! A call ends at its deadline, and sooner when the connection stops
//! making progress: once the peer has agreed to send keep-alive frames
//! (see [`FramedConn::keep_alive`]), a call during which no byte moved
//! either way for its `stall` bound is abandoned as dead, and so is one
//! quiet for half of it when a new connection to the same peer opens (a
//! keep-alive comes every quarter of the bound: two missed while the peer
//! answers a new connection mean this one is gone). A connection whose
//! packets a partition dropped then fails soon after the link is back, not
//! at the deadline of a long request (a snapshot's install), and its
//! caller retries on a new one.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use lockd_net::security::{self, ConnectError, Stream};
use lockd_net::tls::{node_name, Alpn, TlsClient};
use rustls::pki_types::ServerName;
use serde::de::DeserializeOwned;
use serde::Serialize;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::codec::{Framed, LengthDelimitedCodec};

use lockd_net::wire::{self as frame, Envelope, HandshakeError, Role, Welcome};

/// An answer frame, or only a sign that the peer is still at it.
pub trait Reply {
    /// Whether this frame only says "still working" (it answers nothing).
    fn is_keep_alive(&self) -> bool;
}

/// A client's answer: the native protocol has no keep-alive frames (a
/// test may speak it through this connection).
impl Reply for lockd_proto::ClientResponse {
    fn is_keep_alive(&self) -> bool {
        false
    }
}

/// One framed connection, used for one request at a time.
pub struct FramedConn {
    addr: String,
    framed: Framed<Counted<Stream>, LengthDelimitedCodec>,
    next_id: u64,
    pub welcome: Welcome,
    /// Bytes moved either way so far (the progress a call watches).
    moved: Arc<AtomicU64>,
    /// Whether the peer sends keep-alive frames while it reads or works
    /// on a request, so that silence means a dead connection.
    keep_alive: bool,
}

/// A stream that counts the bytes it moves.
struct Counted<S> {
    inner: S,
    moved: Arc<AtomicU64>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut me.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            me.moved.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            me.moved.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
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
            let moved = Arc::new(AtomicU64::new(0));
            let stream = Counted {
                inner: stream,
                moved: moved.clone(),
            };
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
                moved,
                keep_alive: false,
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

    /// The peer agreed to send keep-alive frames: from now on a call's
    /// `stall` bound applies.
    pub fn keep_alive(&mut self) {
        self.keep_alive = true;
    }

    /// Send one request and wait for its response, at most `timeout`, and
    /// (when the peer sends keep-alive frames) at most `stall` without a
    /// byte moving either way, or half of it when `probe` (a new
    /// connection to the same peer) succeeds meanwhile.
    pub async fn call<Req, Resp, P, Probe>(
        &mut self,
        body: &Req,
        timeout: Duration,
        stall: Duration,
        probe: P,
    ) -> Result<Resp, TransportError>
    where
        Req: Serialize,
        Resp: DeserializeOwned + Reply,
        P: Fn() -> Probe,
        Probe: std::future::Future<Output = bool>,
    {
        let id = self.next_id;
        self.next_id += 1;
        let addr = self.addr.clone();
        let ms = timeout.as_millis() as u64;
        let bytes = frame::encode(&Envelope { id, body })
            .map_err(|e| TransportError::Encode(e.to_string()))?;
        let moved = self.moved.clone();
        // A call whose deadline comes before its first probe (an append:
        // a heartbeat's time) needs no watch, and gets no timer.
        let watched = self.keep_alive && timeout > stall / 2;
        #[cfg(feature = "faults")]
        let watched = watched && !lockd_core::faults::get().stuck_stream;
        let exchange = async {
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
                // A keep-alive answers nothing (the bytes it moved are the
                // progress). Id 0 is a node's answer to a request it could
                // not read (an older node meeting a newer request): the
                // answer to this one, the only one in flight. Another id is
                // skipped; none is owed: the caller drops a connection after
                // any call that failed or was abandoned
                // (`raft::peer_client::PeerClient::call`).
                if !env.body.is_keep_alive() && (env.id == id || env.id == 0) {
                    return Ok(env.body);
                }
            }
        };
        let stalled = async {
            if !watched {
                return std::future::pending().await;
            }
            let (what, quiet) = stalled(&moved, stall, probe).await;
            TransportError::Timeout {
                addr: addr.clone(),
                what,
                ms: quiet.as_millis() as u64,
            }
        };
        let fut = async {
            tokio::select! {
                r = exchange => r,
                e = stalled => Err(e),
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

/// Returns once `moved` has not changed for `stall`, or for half of it
/// when `probe` then succeeds (checked every eighth of the bound, each
/// probe given a quarter of it): why, and for how long it was quiet.
async fn stalled<P, Probe>(moved: &AtomicU64, stall: Duration, probe: P) -> (&'static str, Duration)
where
    P: Fn() -> Probe,
    Probe: std::future::Future<Output = bool>,
{
    let step = (stall / 8).max(Duration::from_millis(1));
    let mut last = moved.load(Ordering::Relaxed);
    let mut since = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(step).await;
        let now = moved.load(Ordering::Relaxed);
        if now != last {
            (last, since) = (now, tokio::time::Instant::now());
            continue;
        }
        let quiet = since.elapsed();
        if quiet >= stall {
            return ("request (no progress)", quiet);
        }
        if quiet >= stall / 2
            && tokio::time::timeout(stall / 4, probe())
                .await
                .unwrap_or(false)
            && moved.load(Ordering::Relaxed) == last
        {
            return (
                "request (no progress, while the node answers a new connection)",
                since.elapsed(),
            );
        }
    }
}

#[derive(Debug, Error)]
pub enum TransportError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("{what} to {addr} timed out after {ms} ms")]
    Timeout {
        addr: String,
        what: &'static str,
        ms: u64,
    },
    #[error(
        "{addr} is not a lockd node speaking protocol version {}: {detail}",
        lockd_proto::wire::VERSION
    )]
    NotLockd { addr: String, detail: String },
    #[error("{addr} refused the connection: {reason}")]
    Refused { addr: String, reason: String },
    #[error("connection to {addr} closed")]
    Closed { addr: String },
    #[error("i/o with {addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("frame from {addr} does not decode: {detail}")]
    Decode { addr: String, detail: String },
    #[error("frame encoding failed: {0}")]
    Encode(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    const STALL: Duration = Duration::from_millis(400);

    /// How long [`stalled`] took on a connection that moves `moved` bytes
    /// every `every` (if ever), with `probe` answering, and why it ended;
    /// `None` if it had not ended by `limit`.
    async fn quiet_for(
        every: Option<Duration>,
        probe: bool,
        limit: Duration,
    ) -> Option<(&'static str, Duration)> {
        let moved = Arc::new(AtomicU64::new(0));
        let mover = moved.clone();
        let _traffic = every.map(|every| {
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    mover.fetch_add(1, Ordering::Relaxed);
                }
            })
        });
        let started = tokio::time::Instant::now();
        let watch = stalled(&moved, STALL, || async move { probe });
        let (why, _) = tokio::time::timeout(limit, watch).await.ok()?;
        Some((why, started.elapsed()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_connection_is_given_up_at_the_stall_bound() {
        let (why, after) = quiet_for(None, false, STALL * 4).await.expect("ended");
        assert_eq!(why, "request (no progress)");
        assert!(after >= STALL && after <= STALL * 5 / 4, "{after:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_connection_is_given_up_at_half_of_it_when_a_new_one_opens() {
        let (why, after) = quiet_for(None, true, STALL * 4).await.expect("ended");
        assert!(why.contains("answers a new connection"), "{why}");
        assert!(after >= STALL / 2 && after < STALL, "{after:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_moves_is_never_given_up() {
        // Keep-alives every quarter of the bound, a new connection opening
        // all the while: a long request on a live connection goes on.
        let ended = quiet_for(Some(STALL / 4), true, STALL * 20).await;
        assert_eq!(ended, None);
    }
}
