//! A slow link: a TCP proxy on loopback that forwards each direction of
//! every connection at no more than a given rate, for tests of transfers
//! that must complete however slowly they go.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A running proxy; it stops accepting when dropped (connections already
/// open end with their peers).
pub struct Proxy {
    pub addr: String,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// Listen on `127.0.0.1:port` and forward every connection to `to`,
    /// `bytes_per_sec` each way.
    pub fn start(port: u16, to: String, bytes_per_sec: u64) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("the proxy's port");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let to = to.clone();
                        std::thread::spawn(move || link(client, &to, bytes_per_sec));
                    }
                    // Nothing to accept: look again shortly (and at `stop`).
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Proxy {
            addr: format!("127.0.0.1:{port}"),
            stop,
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn link(client: TcpStream, to: &str, rate: u64) {
    let Ok(server) = TcpStream::connect(to) else {
        return;
    };
    let _ = client.set_nonblocking(false);
    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    std::thread::spawn(move || pump(c2, s2, rate));
    pump(server, client, rate);
}

/// Copy `from` to `to` at no more than `rate` bytes a second.
fn pump(mut from: TcpStream, mut to: TcpStream, rate: u64) {
    // When the link is free again: an idle link saves no time up.
    let mut free_at = Instant::now();
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        // These bytes keep the link busy this long.
        free_at = free_at.max(Instant::now()) + Duration::from_secs_f64(n as f64 / rate as f64);
        if let Some(ahead) = free_at.checked_duration_since(Instant::now()) {
            std::thread::sleep(ahead);
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}
