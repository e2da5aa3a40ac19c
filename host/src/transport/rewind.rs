//! A connection with the bytes already read put back in front: the accept
//! loop reads a connection's first bytes to tell its protocol apart, and
//! the protocol's handler then reads them again.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use lockd_net::socket::{BoxConn, Conn};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `inner` with `prefix` to be read first.
pub(crate) struct Rewind {
    prefix: Vec<u8>,
    read: usize,
    inner: BoxConn,
}

impl Rewind {
    pub fn new(prefix: Vec<u8>, inner: BoxConn) -> Rewind {
        Rewind {
            prefix,
            read: 0,
            inner,
        }
    }
}

impl Conn for Rewind {
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }
}

impl AsyncRead for Rewind {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.read < this.prefix.len() {
            let left = &this.prefix[this.read..];
            let n = left.len().min(buf.remaining());
            buf.put_slice(&left[..n]);
            this.read += n;
            if this.read == this.prefix.len() {
                this.prefix = Vec::new();
                this.read = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockd_net::socket::Socket;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn the_prefix_is_read_first_then_the_stream() {
        let (a, mut b) = tokio::io::duplex(64);
        b.write_all(b"def").await.unwrap();
        drop(b);
        let pipe = Socket::new(a, Some(SocketAddr::from(([127, 0, 0, 1], 1))));
        let mut r = Rewind::new(b"abc".to_vec(), Box::new(pipe));
        let mut small = [0u8; 2];
        r.read_exact(&mut small).await.unwrap();
        assert_eq!(&small, b"ab");
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"cdef");
    }
}
