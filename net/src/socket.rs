//! The network seam: every socket lockd opens or accepts goes through one
//! [`Net`].
//!
//! Production uses [`Tcp`] (tokio's sockets, Nagle off). The deterministic
//! simulation installs its own [`Net`] once per process, before any socket
//! is opened, and then the same code paths (the native client, peers'
//! Raft RPC, forwarding, the admin HTTP client, the node's accept loop)
//! run over the simulated network. There is one path through the code;
//! only the bytes' carrier differs.
//!
//! Decision: the seam is a process-wide trait object rather than a
//! parameter threaded through every constructor. A process runs either
//! real sockets or a simulation, never both; a parameter would have to
//! reach a dozen places (every client, connector and listener) that never
//! differ within one process.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connected byte stream.
pub trait Conn: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static {
    /// The other end's address.
    fn peer_addr(&self) -> io::Result<SocketAddr>;
}

/// A boxed [`Conn`].
pub type BoxConn = Box<dyn Conn>;

/// A bound socket that accepts connections.
pub trait Listener: Send + 'static {
    /// The next connection and who opened it.
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConn, SocketAddr)>>;
    /// The address bound (with the port the OS chose for port 0).
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// Where connections come from.
pub trait Net: Send + Sync + 'static {
    /// Connect to `addr` (`host:port`).
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConn>>;
    /// Listen on `addr` (`host:port`).
    fn bind<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>>;
}

/// The real network: tokio's TCP sockets.
pub struct Tcp;

impl Conn for tokio::net::TcpStream {
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        tokio::net::TcpStream::peer_addr(self)
    }
}

struct TcpListener(tokio::net::TcpListener);

impl Listener for TcpListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConn, SocketAddr)>> {
        Box::pin(async move {
            let (s, a) = self.0.accept().await?;
            // Small request/answer frames: never let Nagle hold them back.
            let _ = s.set_nodelay(true);
            Ok((Box::new(s) as BoxConn, a))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Net for Tcp {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConn>> {
        Box::pin(async move {
            let s = tokio::net::TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            Ok(Box::new(s) as BoxConn)
        })
    }

    fn bind<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let l = tokio::net::TcpListener::bind(addr).await?;
            Ok(Box::new(TcpListener(l)) as Box<dyn Listener>)
        })
    }
}

static NET: OnceLock<Arc<dyn Net>> = OnceLock::new();

/// Make `net` the network of this process. Only before the first socket:
/// `false` when one is already in use (the first one stays).
pub fn install(net: Arc<dyn Net>) -> bool {
    NET.set(net).is_ok()
}

/// The network of this process ([`Tcp`] unless [`install`]ed otherwise).
pub fn get() -> &'static dyn Net {
    NET.get_or_init(|| Arc::new(Tcp)).as_ref()
}

/// Connect to `addr` over this process's network.
pub async fn connect(addr: &str) -> io::Result<BoxConn> {
    get().connect(addr).await
}

/// Listen on `addr` over this process's network.
pub async fn bind(addr: &str) -> io::Result<Box<dyn Listener>> {
    get().bind(addr).await
}

/// A stream of another kind as a [`Conn`]: the simulation's sockets, a
/// test's pipe, and a [`BoxConn`] as hyper's connection.
pub struct Socket<S> {
    stream: S,
    peer: Option<SocketAddr>,
}

impl<S> Socket<S> {
    /// `stream`, connected to `peer` (`None`: not known).
    pub fn new(stream: S, peer: Option<SocketAddr>) -> Socket<S> {
        Socket { stream, peer }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static> Conn for Socket<S> {
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.peer
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "peer address not known"))
    }
}

impl<S> Connection for Socket<S> {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Socket<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Socket<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// hyper's connector over this process's network (HTTP clients wrap it in
/// TLS where the credentials say so).
#[derive(Clone, Copy, Debug, Default)]
pub struct Connector;

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<Socket<BoxConn>>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Box::pin(async move {
            let host = uri.host().ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("no host in {uri}"))
            })?;
            let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
                Some("https") => 443,
                _ => 80,
            });
            let conn = connect(&format!("{host}:{port}")).await?;
            let peer = conn.peer_addr().ok();
            Ok(TokioIo::new(Socket::new(conn, peer)))
        })
    }
}
