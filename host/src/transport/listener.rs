//! The accept loop: one port, two protocols in the clear or inside TLS,
//! and the opening budget ([`super::limits`]) taken at accept.
//!
//! The first byte tells TLS (a handshake record, `0x16`) from the
//! plaintext protocols; inside TLS the protocol the caller chose (ALPN)
//! tells a peer and a native client (both framed) from HTTP. What to do
//! with a connection, including one in the clear to a node that requires
//! TLS, is the handler's choice ([`Incoming`]).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use lockd_net::socket::{BoxConn, Listener};
use lockd_net::tls::Alpn;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::limits::{Gate, Slot};
use super::rewind::Rewind;
use super::tls::{Identity, TlsServer};
use lockd_net::wire::MAGIC;

/// The first byte of a TLS connection (a handshake record).
const TLS_HANDSHAKE: u8 = 0x16;

/// Which protocol a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Framed,
    Http,
}

/// A byte stream to a caller: TCP, or TLS over it.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// What the handshake established about a caller over TLS.
#[derive(Clone, Debug)]
pub struct TlsCaller {
    /// `None`: it offered no protocol we speak (served as HTTP).
    pub alpn: Option<Alpn>,
    /// The certificate it presented, verified against the cluster's CA.
    pub identity: Option<Identity>,
}

/// Who is at the other end, as far as the transport knows.
#[derive(Clone, Debug)]
pub struct Caller {
    pub addr: SocketAddr,
    /// `None`: the connection is in the clear.
    pub tls: Option<TlsCaller>,
}

impl Caller {
    pub fn identity(&self) -> Option<&Identity> {
        self.tls.as_ref().and_then(|t| t.identity.as_ref())
    }
}

/// A connection accepted and told apart, for the handler.
pub struct Incoming {
    pub stream: Box<dyn Io>,
    pub protocol: Protocol,
    pub caller: Caller,
    /// Its place, in the opening budget until the handler settles it as a
    /// client's or gives it back as a peer's (see [`super::limits`]).
    pub slot: Slot,
    /// When the opening phase ends: the hello (framed) must be in by then.
    pub deadline: Instant,
    /// Turns true when the node shuts down: the connection ends after
    /// what it is serving.
    pub shutdown: watch::Receiver<bool>,
}

/// What the first bytes say.
#[derive(Debug, PartialEq, Eq)]
enum First {
    Tls,
    Plain(Protocol),
}

/// Read until the first bytes are known, by `deadline`; they are put
/// back in front of the stream for its handler. `None`: the connection
/// closed first.
async fn sniff(mut stream: BoxConn, deadline: Instant) -> std::io::Result<Option<(First, Rewind)>> {
    let mut buf = [0u8; 3];
    let mut n = 0;
    let first = loop {
        let got = tokio::time::timeout_at(deadline, stream.read(&mut buf[n..]))
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "no bytes from the client")
            })??;
        if got == 0 {
            return Ok(None);
        }
        n += got;
        if buf[0] == TLS_HANDSHAKE {
            break First::Tls;
        }
        // HTTP methods never start with 'L' followed by "KD"; decide as soon
        // as the bytes seen so far rule the preface out.
        if buf[..n] != MAGIC[..n] {
            break First::Plain(Protocol::Http);
        }
        if n == MAGIC.len() {
            break First::Plain(Protocol::Framed);
        }
    };
    Ok(Some((first, Rewind::new(buf[..n].to_vec(), stream))))
}

/// Tell the connection apart and, for TLS, complete the handshake.
async fn open(
    stream: BoxConn,
    addr: SocketAddr,
    tls: Option<&TlsServer>,
    deadline: Instant,
    slot: Slot,
    shutdown: watch::Receiver<bool>,
) -> Option<Incoming> {
    let (first, stream) = match sniff(stream, deadline).await {
        Ok(Some(f)) => f,
        Ok(None) => return None,
        Err(e) => {
            tracing::debug!(peer = %addr, error = %e, "connection dropped before its first bytes");
            return None;
        }
    };
    match (first, tls) {
        (First::Plain(protocol), _) => Some(Incoming {
            stream: Box::new(stream),
            protocol,
            caller: Caller { addr, tls: None },
            slot,
            deadline,
            shutdown,
        }),
        (First::Tls, None) => {
            tracing::info!(peer = %addr, "a TLS connection reached a node without TLS; closed");
            None
        }
        (First::Tls, Some(server)) => {
            let accepted = match tokio::time::timeout_at(deadline, server.accept(stream)).await {
                Ok(Ok(a)) => a,
                Ok(Err(e)) => {
                    // An unknown CA, an expired certificate, a wrong name:
                    // the operator needs to see these.
                    tracing::warn!(peer = %addr, error = %e, "TLS handshake refused");
                    return None;
                }
                Err(_) => {
                    tracing::debug!(peer = %addr, "TLS handshake timed out");
                    return None;
                }
            };
            let protocol = match accepted.alpn {
                Some(Alpn::Peer | Alpn::Native) => Protocol::Framed,
                Some(Alpn::Http) | None => Protocol::Http,
            };
            Some(Incoming {
                stream: Box::new(accepted.stream),
                protocol,
                caller: Caller {
                    addr,
                    tls: Some(TlsCaller {
                        alpn: accepted.alpn,
                        identity: accepted.identity,
                    }),
                },
                slot,
                deadline,
                shutdown,
            })
        }
    }
}

/// Resolves once `shutdown` is true (or its sender is gone); unlike
/// `wait_for`, it holds no borrow of the value, so a `select!` around it
/// stays `Send`.
pub async fn stopping(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// Accept connections until `shutdown` turns true, handing each (as a
/// task of `tasks`, which the node's shutdown waits for) to
/// `handle` once its protocol is known, with its place in `gate`'s
/// opening budget (the handler moves it on: see [`super::limits`]). With
/// `tls`, TLS connections are accepted with the node's certificate.
pub async fn serve<H, HF>(
    mut listener: Box<dyn Listener>,
    gate: Gate,
    tls: Option<TlsServer>,
    handle: H,
    mut shutdown: watch::Receiver<bool>,
    tasks: TaskTracker,
) where
    H: Fn(Incoming) -> HF + Clone + Send + 'static,
    HF: Future<Output = ()> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.wait_for(|s| *s) => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors and the like: back off, don't spin.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Past the opening budget: closed before a byte is read or a
        // handshake begun.
        let slot = match gate.open(peer.ip()) {
            Ok(o) => o,
            Err(why) => {
                tracing::debug!(%peer, %why, "connection closed at accept");
                drop(stream);
                continue;
            }
        };
        // One deadline for the whole opening phase (first bytes, TLS,
        // hello), not one per step.
        let deadline = Instant::now() + gate.limits().hello_timeout;
        let (handle, tls, stop) = (handle.clone(), tls.clone(), shutdown.clone());
        tasks.spawn(async move {
            let mut stop_rx = stop.clone();
            let opened = tokio::select! {
                o = open(stream, peer, tls.as_ref(), deadline, slot, stop) => o,
                () = stopping(&mut stop_rx) => None,
            };
            if let Some(incoming) = opened {
                handle(incoming).await;
            }
        });
    }
}
