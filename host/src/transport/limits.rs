//! Connection limits: how many connections a node keeps in each phase of
//! their life, from one address and in all, and how long each phase may
//! last (docs/security.md, "Connection slots").
//!
//! A connection goes through at most three budgets:
//!
//! 1. **Opening** (accept → its protocol known, TLS done, and its hello
//!    or first HTTP request read): `max_handshakes` in all and per
//!    address, for `hello_timeout` from accept. Past it, a new connection
//!    is closed at accept, before any byte is read or any handshake
//!    begun: the work a stranger can make the node do is bounded.
//! 2. **Unauthenticated** (authentication on, a client that has not
//!    presented a valid credential): `max_unauthenticated` in all and per
//!    address, closed `unauthenticated_timeout` after accept. An HTTP
//!    connection moves on to the clients' budget with its first request
//!    that carries a valid credential (when that budget has room); a
//!    native one is settled at its hello.
//! 3. **Clients** (authenticated, or authentication off):
//!    `max_connections` in all and per address.
//!
//! Past a client or unauthenticated budget, HTTP gets a 503 with
//! `Retry-After` and a native client a refused hello with the reason.
//! Peers leave the opening budget as soon as their hello is believed and
//! take no client place: a flood of clients cannot cut the cluster's own
//! links once they are up (a new link meets the opening budget like
//! anyone, and Raft reconnects). A peer whose hello names a node that is
//! not a member of this node's membership (a node removed, a stranger
//! without TLS) takes a place in a budget of its own instead,
//! [`MAX_UNPROVEN_PEERS`], and may send only frames of
//! [`MAX_UNPROVEN_PEER_FRAME`] bytes, until it is proven a member.
//!
//! "Per address" is per IPv4 address and per IPv6 /64 ([`prefix`]): one
//! host is handed a whole /64, so counting single IPv6 addresses would
//! bound nothing.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest frame before the caller is known (a hello is small).
pub(crate) const MAX_HELLO_FRAME: usize = 64 << 10;
/// The largest frame a client may send (its biggest request, an acquire
/// with a 1 KiB key and its names, is well under 2 KiB). Peers may send
/// frames up to the protocol's limit (log entries, snapshot chunks).
pub(crate) const MAX_CLIENT_FRAME: usize = 64 << 10;

/// How long a client may go without moving a byte of what it is in the
/// middle of: sending a request's body (HTTP), or taking what the node
/// sends it (a native answer or watch frame). Past it the connection is
/// closed: a client that died mid-request, or stopped reading, holds no
/// slot (a watcher's among them) longer than this.
pub(crate) const CLIENT_STALL: Duration = Duration::from_secs(30);

/// Peer connections from nodes that are not members, at once: in all, and
/// from one address (a node removed, or one being added by a leader this
/// node does not know yet, needs only a few).
pub const MAX_UNPROVEN_PEERS: (usize, usize) = (64, 16);
/// The largest frame a peer that is not a member may send: a vote, a
/// pre-vote, a hand-over notice (a leader this node does not know yet
/// reconnects once a member vouches for it, and may then send entries).
pub const MAX_UNPROVEN_PEER_FRAME: usize = 64 << 10;

/// The bounds, from `lockd serve`'s flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// Client connections (HTTP and framed) served at once.
    pub max_connections: usize,
    /// The same, from one address.
    pub max_connections_per_ip: usize,
    /// Connections that have not yet said what they are.
    pub max_handshakes: usize,
    /// The same, from one address.
    pub max_handshakes_per_ip: usize,
    /// With authentication on: client connections without a valid
    /// credential.
    pub max_unauthenticated: usize,
    /// The same, from one address.
    pub max_unauthenticated_per_ip: usize,
    /// Time to send the first bytes and, for the framed protocol, the hello.
    pub hello_timeout: Duration,
    /// Time an unauthenticated client connection is kept.
    pub unauthenticated_timeout: Duration,
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
            max_handshakes: 1024,
            max_handshakes_per_ip: 128,
            max_unauthenticated: 128,
            max_unauthenticated_per_ip: 16,
            hello_timeout: Duration::from_secs(5),
            unauthenticated_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(600),
            max_in_flight: 1024,
        }
    }
}

impl ConnLimits {
    /// When a connection whose opening phase ends at `opening_deadline`
    /// must have presented a valid credential (counted from accept, like
    /// the opening phase).
    pub(crate) fn unauthenticated_deadline(
        &self,
        opening_deadline: tokio::time::Instant,
    ) -> tokio::time::Instant {
        opening_deadline - self.hello_timeout + self.unauthenticated_timeout
    }
}

/// The key an address is counted under: an IPv4 address itself (also
/// when mapped into IPv6), an IPv6 address's /64.
pub fn prefix(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// The four budgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Budget {
    Opening,
    Unauthenticated,
    Client,
    UnprovenPeer,
}

impl Budget {
    /// The caps (in all, per address) and the flags that set them.
    fn caps(self, l: &ConnLimits) -> (usize, usize, &'static str, &'static str) {
        match self {
            Budget::Opening => (
                l.max_handshakes,
                l.max_handshakes_per_ip,
                "--max-handshakes",
                "--max-handshakes-per-ip",
            ),
            Budget::Unauthenticated => (
                l.max_unauthenticated,
                l.max_unauthenticated_per_ip,
                "--max-unauthenticated",
                "--max-unauthenticated-per-ip",
            ),
            Budget::Client => (
                l.max_connections,
                l.max_connections_per_ip,
                "--max-connections",
                "--max-connections-per-ip",
            ),
            Budget::UnprovenPeer => (
                MAX_UNPROVEN_PEERS.0,
                MAX_UNPROVEN_PEERS.1,
                "a fixed bound",
                "a fixed bound",
            ),
        }
    }

    fn what(self) -> &'static str {
        match self {
            Budget::Opening => "connections opening",
            Budget::Unauthenticated => "unauthenticated connections",
            Budget::Client => "connections",
            Budget::UnprovenPeer => "peer connections from nodes that are not members",
        }
    }
}

#[derive(Default)]
struct Tally {
    total: usize,
    per_prefix: HashMap<IpAddr, usize>,
}

#[derive(Default)]
struct Counts {
    opening: Tally,
    unauthenticated: Tally,
    client: Tally,
    unproven_peer: Tally,
}

impl Counts {
    fn tally(&mut self, b: Budget) -> &mut Tally {
        match b {
            Budget::Opening => &mut self.opening,
            Budget::Unauthenticated => &mut self.unauthenticated,
            Budget::Client => &mut self.client,
            Budget::UnprovenPeer => &mut self.unproven_peer,
        }
    }
}

/// Counts the connections in each budget.
#[derive(Clone)]
pub struct Gate {
    counts: Arc<Mutex<Counts>>,
    limits: Arc<ConnLimits>,
}

/// A place in one budget, given back when dropped.
struct Place {
    gate: Gate,
    budget: Budget,
    key: IpAddr,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut c = self.gate.lock();
        let t = c.tally(self.budget);
        t.total = t.total.saturating_sub(1);
        if let Some(n) = t.per_prefix.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                t.per_prefix.remove(&self.key);
            }
        }
    }
}

/// A connection's place: in the opening budget until [`Slot::settle`]
/// moves it to a client's (or [`Slot::peer`] gives it back), then
/// unauthenticated until a valid credential moves it to the clients'.
/// Shared by the connection and the requests on it.
pub struct Slot {
    gate: Gate,
    key: IpAddr,
    /// `None` once given back (a peer, or an opening that expired).
    place: Mutex<Option<Place>>,
}
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place in `budget` for `key`, or which cap is full.
    fn take(&self, budget: Budget, key: IpAddr) -> Result<Place, String> {
        let (all, per, all_flag, per_flag) = budget.caps(&self.limits);
        let mut c = self.lock();
        let t = c.tally(budget);
        if t.total >= all {
            return Err(format!(
                "too many {}: {} open ({all_flag})",
                budget.what(),
                t.total
            ));
        }
        let from = t.per_prefix.get(&key).copied().unwrap_or(0);
        if from >= per {
            return Err(format!(
                "too many {} from {key}: {from} open ({per_flag})",
                budget.what()
            ));
        }
        t.total += 1;
        *t.per_prefix.entry(key).or_insert(0) += 1;
        drop(c);
        Ok(Place {
            gate: self.clone(),
            budget,
            key,
        })
    }

    /// At accept: a place in the opening budget for a connection from
    /// `ip`, or why it is to be closed at once.
    pub fn open(&self, ip: IpAddr) -> Result<Slot, String> {
        let key = prefix(ip);
        let place = self.take(Budget::Opening, key)?;
        Ok(Slot {
            gate: self.clone(),
            key,
            place: Mutex::new(Some(place)),
        })
    }

    /// Connections in each budget (opening, unauthenticated, clients):
    /// in all, and from `ip`'s prefix.
    pub fn counts(&self, ip: IpAddr) -> [(usize, usize); 3] {
        let key = prefix(ip);
        let mut c = self.lock();
        [Budget::Opening, Budget::Unauthenticated, Budget::Client].map(|b| {
            let t = c.tally(b);
            (t.total, t.per_prefix.get(&key).copied().unwrap_or(0))
        })
    }
}

impl Slot {
    fn place(&self) -> std::sync::MutexGuard<'_, Option<Place>> {
        self.place.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn budget(&self) -> Option<Budget> {
        self.place().as_ref().map(|p| p.budget)
    }

    /// The caller is a client, `authenticated` or not. Out of the opening
    /// phase, into the clients' budget or the unauthenticated one; later,
    /// with a valid credential, from the unauthenticated budget to the
    /// clients' when it has room (else it stays, under its deadline).
    /// `Err`: the budget it needs is full (or its place was given back);
    /// the connection is to be refused with the reason.
    pub fn settle(&self, authenticated: bool) -> Result<(), String> {
        let mut place = self.place();
        let Some(now) = place.as_ref().map(|p| p.budget) else {
            return Err("the connection's opening phase is over".into());
        };
        let next = match (now, authenticated) {
            (Budget::Opening, true) => Budget::Client,
            (Budget::Opening, false) => Budget::Unauthenticated,
            (Budget::Unauthenticated, true) => {
                if let Ok(p) = self.gate.take(Budget::Client, self.key) {
                    // The unauthenticated place is given back as it drops.
                    *place = Some(p);
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        *place = Some(self.gate.take(next, self.key)?);
        Ok(())
    }

    /// The connection is a peer of this node's membership: it takes no
    /// client place (nor, once proven, an unproven peer's).
    pub fn peer(&self) {
        *self.place() = None;
    }

    /// The connection is a peer whose hello names a node that is not a
    /// member: out of the opening phase, into the unproven peers' budget.
    /// `Err`: that budget is full; the hello is to be refused.
    pub(crate) fn unproven_peer(&self) -> Result<(), String> {
        let mut place = self.place();
        if place.as_ref().map(|p| p.budget) != Some(Budget::Opening) {
            return Err("the connection's opening phase is over".into());
        }
        *place = Some(self.gate.take(Budget::UnprovenPeer, self.key)?);
        Ok(())
    }

    /// At the end of the opening phase: `true` (and the place given back)
    /// when the connection is still opening, to be closed.
    pub(crate) fn expire_opening(&self) -> bool {
        let mut place = self.place();
        if place.as_ref().is_some_and(|p| p.budget == Budget::Opening) {
            *place = None;
            return true;
        }
        false
    }

    /// Whether the connection holds a client's place (not opening, not
    /// unauthenticated).
    pub(crate) fn is_authenticated(&self) -> bool {
        self.budget() == Some(Budget::Client)
    }
}

#[cfg(test)]
mod tests;
