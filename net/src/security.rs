//! How a caller reaches a node: in the clear or over TLS, and with which
//! credentials ([`Credentials`]: a trust store and client certificate, a
//! bearer token, or both).
//!
//! [`connect`] opens a [`Stream`] to a node for one of the protocols a
//! node serves on its one address (see [`crate::tls::Alpn`]); the native
//! client, `lockctl`, and the node itself (peers, forwarding, audit reads)
//! all connect through it.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::socket::{self as net, BoxConn};
use crate::tls::{host_name, Alpn, TlsClient};

/// A bearer token. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn new(token: impl Into<String>) -> Token {
        Token(token.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(…)")
    }
}

/// What a caller brings to a node: TLS settings (whom to trust, and the
/// client certificate if any) and a bearer token. The default is neither:
/// plaintext, anonymous (what a node on loopback without TLS serves).
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    pub tls: Option<TlsClient>,
    pub token: Option<Token>,
}

impl Credentials {
    /// The token to send to `addr` (`host:port` or a host): with TLS,
    /// after the handshake proved the node; in the clear only to a
    /// loopback address, where nothing else can read it. A token meant for
    /// a node that requires TLS is never sent in the clear to learn that
    /// it does. `Err` says why it is kept back.
    pub fn token_for(&self, addr: &str) -> Result<Option<&Token>, String> {
        match &self.token {
            Some(t) if self.tls.is_none() && !is_loopback(addr) => Err(format!(
                "a bearer token is sent only over TLS (--cacert) or to a loopback address, not in the clear to {addr}"
            )),
            t => Ok(t.as_ref()),
        }
    }

    /// The URL scheme of the HTTP API with these settings.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

/// Whether `addr` (`host:port`, `[v6]:port` or a host) is a loopback
/// address: `localhost`, 127.0.0.0/8 or ::1.
pub fn is_loopback(addr: &str) -> bool {
    if let Ok(ip) = addr.parse::<std::net::IpAddr>() {
        return ip.is_loopback();
    }
    let host = match addr.rsplit_once(':') {
        Some((h, port)) if !h.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A connection to a node: plain TCP, or TLS over it (TCP or the
/// simulation's network: [`crate::socket`]).
pub enum Stream {
    Plain(BoxConn),
    Tls(Box<tokio_rustls::client::TlsStream<BoxConn>>),
}

impl Stream {
    pub fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        match self {
            Stream::Plain(s) => s.peer_addr(),
            Stream::Tls(s) => s.get_ref().0.peer_addr(),
        }
    }
}

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{0}")]
    Tcp(io::Error),
    #[error("{0}")]
    Name(#[from] crate::tls::TlsError),
    /// The TLS handshake failed: an untrusted or expired certificate, a
    /// name that does not match, or a node that does not speak TLS.
    #[error("TLS handshake failed: {0}{hint}", hint = tls_hint(.0))]
    Handshake(io::Error),
}

/// What a handshake error most likely means, when rustls's own words do
/// not say it.
fn tls_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
            " (the node closed the connection: is it serving TLS?)"
        }
        _ => "",
    }
}

/// Open a connection to `addr` for `alpn`: TLS when `tls` is given,
/// checking the node's certificate against `name` (default: the host of
/// `addr`, as any TLS client does; peers check the node id instead).
pub async fn connect(
    addr: &str,
    tls: Option<&TlsClient>,
    alpn: Alpn,
    name: Option<ServerName<'static>>,
) -> Result<Stream, ConnectError> {
    let tcp = net::connect(addr).await.map_err(ConnectError::Tcp)?;
    let Some(tls) = tls else {
        return Ok(Stream::Plain(tcp));
    };
    let name = match name {
        Some(n) => n,
        None => host_name(addr)?,
    };
    let stream = tls
        .connector(alpn)
        .connect(name, tcp)
        .await
        .map_err(ConnectError::Handshake)?;
    Ok(Stream::Tls(Box::new(stream)))
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_goes_in_the_clear_only_to_loopback() {
        let c = Credentials {
            tls: None,
            token: Some(Token::new("lkd_secret")),
        };
        for a in [
            "127.0.0.1:7400",
            "127.9.0.2:1",
            "localhost:7400",
            "[::1]:7400",
            "::1",
        ] {
            assert!(c.token_for(a).is_ok_and(|t| t.is_some()), "{a}");
        }
        for a in [
            "10.0.0.1:7400",
            "node1:7400",
            "[2001:db8::1]:7400",
            "127.0.0.1.example:1",
        ] {
            let e = c.token_for(a).unwrap_err();
            assert!(
                e.contains("only over TLS") && !e.contains("lkd_secret"),
                "{a}: {e}"
            );
        }
        assert!(!format!("{c:?}").contains("lkd_secret"));
        let hello = crate::wire::Role::ClientToken {
            token: "lkd_secret".into(),
        };
        assert!(!format!("{hello:?}").contains("lkd_secret"));
    }
}
