//! The accept loop: one port, two protocols, and the connection caps
//! ([`super::limits`]) taken at accept.

use std::future::Future;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::frame::MAGIC;
use super::limits::{Admission, Gate};

/// Which protocol a connection speaks, from its first bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Protocol {
    Framed,
    Http,
}

/// Peek (without consuming) until the first three bytes are known, within
/// `timeout`.
pub async fn sniff(stream: &TcpStream, timeout: Duration) -> std::io::Result<Option<Protocol>> {
    let mut buf = [0u8; 3];
    let deadline = tokio::time::Instant::now() + timeout;
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
/// `on_framed` or `on_http` by its first bytes, with its admission by
/// `gate` (which they act on: see [`super::limits`]).
pub async fn serve<F, FF, H, HF>(
    listener: TcpListener,
    gate: Gate,
    on_framed: F,
    on_http: H,
    mut shutdown: watch::Receiver<bool>,
) where
    F: Fn(TcpStream, Admission) -> FF + Clone + Send + 'static,
    FF: Future<Output = ()> + Send + 'static,
    H: Fn(TcpStream, Admission) -> HF + Clone + Send + 'static,
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
        let admission = gate.admit(peer.ip());
        let hello_timeout = gate.limits().hello_timeout;
        let (on_framed, on_http) = (on_framed.clone(), on_http.clone());
        tokio::spawn(async move {
            match sniff(&stream, hello_timeout).await {
                Ok(Some(Protocol::Framed)) => on_framed(stream, admission).await,
                Ok(Some(Protocol::Http)) => on_http(stream, admission).await,
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "connection dropped before its first bytes")
                }
            }
        });
    }
}
