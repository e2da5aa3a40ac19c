//! turmoil's simulated network behind lockd's network seam
//! (`lockd_client::net`): every connection the nodes and the clients open
//! or accept in a simulation is a turmoil stream, which the simulation
//! delays, holds, partitions and breaks under its seed.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use futures::future::BoxFuture;
use lockd_client::net::{BoxConn, Listener, Net, Socket};

/// The simulated network.
pub struct Turmoil;

/// Make the simulated network this process's. Every test of the
/// simulation's binary calls it first; the binary opens no real socket.
pub fn install() {
    let _ = lockd_client::net::install(Arc::new(Turmoil));
}

struct Bound(turmoil::net::TcpListener);

impl Listener for Bound {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxConn, SocketAddr)>> {
        Box::pin(async move {
            let (s, a) = self.0.accept().await?;
            Ok((Box::new(Socket::new(s, Some(a))) as BoxConn, a))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl Net for Turmoil {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxConn>> {
        Box::pin(async move {
            let s = turmoil::net::TcpStream::connect(addr).await?;
            let peer = s.peer_addr().ok();
            Ok(Box::new(Socket::new(s, peer)) as BoxConn)
        })
    }

    fn bind<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<Box<dyn Listener>>> {
        Box::pin(async move {
            let l = turmoil::net::TcpListener::bind(addr).await?;
            Ok(Box::new(Bound(l)) as Box<dyn Listener>)
        })
    }
}
