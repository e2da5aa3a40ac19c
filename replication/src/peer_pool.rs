//! Connections to peers that no call holds. openraft makes a client per
//! leadership check (every read barrier) and per vote round, and drops it
//! after one call; without a pool each of those opened a connection of
//! its own: four round trips (TCP, TLS, the hello, the keep-alive ask),
//! and on a link slower than a quarter of a heartbeat, more than the
//! check's deadline (a heartbeat), so no check could ever succeed (found
//! by the simulation: seeds 95 and 123 of runs with TLS and a 25 ms
//! heartbeat). A client that ends leaves its connection here, a
//! connection made for a call that gave up is left here once made, and
//! the next client of that peer takes the newest one.
//!
//! Bounded: at most [`IDLE_PER_PEER`] a peer (the oldest dropped), and a
//! connection idle for longer than the stall bound is dropped when met
//! (a peer that restarted, or a partition, may have left it dead; a call
//! on it would only wait out its deadline).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

// tokio's clock, not the machine's: the simulation runs on it.
use tokio::time::Instant;

use crate::peer_conn::FramedConn;
use crate::NodeId;

/// Idle connections kept per peer, at most.
pub const IDLE_PER_PEER: usize = 4;

/// A peer's idle connections, each with when it was left, oldest first.
type Idle = Vec<(Instant, FramedConn)>;

/// The idle connections of one node's clients, by peer (shared by every
/// clone of the network factory).
#[derive(Clone, Default)]
pub struct IdleConns {
    inner: Arc<Mutex<BTreeMap<NodeId, Idle>>>,
}

impl IdleConns {
    /// The newest connection to `peer` idle for at most `fresh`, if any.
    pub fn take(&self, peer: NodeId, fresh: Duration) -> Option<FramedConn> {
        let mut all = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let conns = all.get_mut(&peer)?;
        conns.retain(|(since, _)| since.elapsed() <= fresh);
        conns.pop().map(|(_, c)| c)
    }

    /// Leave `conn` to `peer` for the next client.
    pub fn put(&self, peer: NodeId, conn: FramedConn) {
        let mut all = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let conns = all.entry(peer).or_default();
        if conns.len() >= IDLE_PER_PEER {
            conns.remove(0);
        }
        conns.push((Instant::now(), conn));
    }
}
