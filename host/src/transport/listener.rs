//! The accept loop: one port, two protocols.

use std::future::Future;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::frame::MAGIC;

/// How long a new connection may take to send its first bytes.
const SNIFF_TIMEOUT: Duration = Duration::from_secs(10);

/// Which protocol a connection speaks, from its first bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Protocol {
    Framed,
    Http,
}

/// Peek (without consuming) until the first three bytes are known.
pub async fn sniff(stream: &TcpStream) -> std::io::Result<Option<Protocol>> {
    let mut buf = [0u8; 3];
    let deadline = tokio::time::Instant::now() + SNIFF_TIMEOUT;
    loop {
        let n = tokio::time::timeout_at(deadline, stream.peek(&mut buf))
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "no bytes from the client")
            })??;
        if n == 0 {
            return Ok(None);
        }
        // HTTP methods never start with 'L' followed by "KD"; decide as soon
        // as the bytes seen so far rule the preface out.
        if buf[..n] != MAGIC[..n] {
            return Ok(Some(Protocol::Http));
        }
        if n == MAGIC.len() {
            return Ok(Some(Protocol::Framed));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Accept connections until `shutdown` turns true, handing each to
/// `on_framed` or `on_http` by its first bytes.
pub async fn serve<F, FF, H, HF>(
    listener: TcpListener,
    on_framed: F,
    on_http: H,
    mut shutdown: watch::Receiver<bool>,
) where
    F: Fn(TcpStream) -> FF + Clone + Send + 'static,
    FF: Future<Output = ()> + Send + 'static,
    H: Fn(TcpStream) -> HF + Clone + Send + 'static,
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
        let _ = stream.set_nodelay(true);
        let (on_framed, on_http) = (on_framed.clone(), on_http.clone());
        tokio::spawn(async move {
            match sniff(&stream).await {
                Ok(Some(Protocol::Framed)) => on_framed(stream).await,
                Ok(Some(Protocol::Http)) => on_http(stream).await,
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "connection dropped before its first bytes")
                }
            }
        });
    }
}
