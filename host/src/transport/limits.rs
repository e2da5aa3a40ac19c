//! Connection limits: how many client connections a node keeps, from one
//! address and in all, and how long a connection may take to say who it is
//! or sit idle.
//!
//! Peers are never turned away by these caps: a flood of client
//! connections must not cut the cluster's own links. A connection is
//! admitted (or not) when it is accepted, and the answer is only acted on
//! once its first bytes say what it is: HTTP gets a 503 with
//! `Retry-After`, a framed client a refused hello with the reason, a peer
//! is served either way and gives its place back.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest frame before the caller is known (a hello is small).
pub const MAX_HELLO_FRAME: usize = 64 << 10;
/// The largest frame a client may send (its biggest request, an acquire
/// with a 1 KiB key and its names, is well under 2 KiB). Peers may send
/// frames up to the protocol's limit (log entries, snapshot chunks).
pub const MAX_CLIENT_FRAME: usize = 64 << 10;

/// The bounds, from `lockd serve`'s flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// Client connections (HTTP and framed) open at once, counting those
    /// that have not said what they are yet.
    pub max_connections: usize,
    /// The same, from one IP address.
    pub max_connections_per_ip: usize,
    /// Time to send the first bytes and, for the framed protocol, the hello.
    pub hello_timeout: Duration,
    /// Time to send an HTTP request's headers; also how long a kept-alive
    /// HTTP connection may wait for its next request.
    pub header_timeout: Duration,
    /// A framed client connection with nothing in flight and no frame for
    /// this long is closed (the client reconnects on its next request).
    pub idle_timeout: Duration,
    /// Requests one framed client connection may have in flight; past it
    /// the node stops reading that connection until one finishes.
    pub max_in_flight: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            max_connections: 4096,
            max_connections_per_ip: 1024,
            hello_timeout: Duration::from_secs(5),
            header_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(600),
            max_in_flight: 1024,
        }
    }
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// Counts the open client connections.
#[derive(Clone)]
pub struct Gate {
    counts: Arc<Mutex<Counts>>,
    limits: Arc<ConnLimits>,
}

/// A place taken by an admitted connection, given back when dropped.
pub struct Ticket {
    counts: Arc<Mutex<Counts>>,
    ip: IpAddr,
}

/// Whether a new connection may be served as a client.
pub type Admission = Result<Ticket, String>;

impl Gate {
    pub fn new(limits: ConnLimits) -> Gate {
        Gate {
            counts: Arc::default(),
            limits: Arc::new(limits),
        }
    }

    pub fn limits(&self) -> &ConnLimits {
        &self.limits
    }

    /// Take a place for a connection from `ip`, or say which cap is full.
    pub fn admit(&self, ip: IpAddr) -> Admission {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if c.total >= self.limits.max_connections {
            return Err(format!(
                "too many connections: {} open (--max-connections)",
                c.total
            ));
        }
        let from_ip = c.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= self.limits.max_connections_per_ip {
            return Err(format!(
                "too many connections from {ip}: {from_ip} open (--max-connections-per-ip)"
            ));
        }
        c.total += 1;
        *c.per_ip.entry(ip).or_insert(0) += 1;
        Ok(Ticket {
            counts: self.counts.clone(),
            ip,
        })
    }

    /// Open client connections: in all, and from `ip`.
    #[cfg(test)]
    fn open(&self, ip: IpAddr) -> (usize, usize) {
        let c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        (c.total, c.per_ip.get(&ip).copied().unwrap_or(0))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                c.per_ip.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_hold_in_all_and_per_address_and_places_come_back() {
        let gate = Gate::new(ConnLimits {
            max_connections: 3,
            max_connections_per_ip: 2,
            ..ConnLimits::default()
        });
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let a1 = gate.admit(a).expect("first");
        let _a2 = gate.admit(a).expect("second");
        let why = gate.admit(a).err().expect("third from a");
        assert!(why.contains("--max-connections-per-ip"), "{why}");
        let _b1 = gate.admit(b).expect("b");
        let why = gate.admit(b).err().expect("fourth in all");
        assert!(why.contains("--max-connections"), "{why}");
        drop(a1);
        assert_eq!(gate.open(a), (2, 1));
        gate.admit(b).expect("room again");
    }
}
