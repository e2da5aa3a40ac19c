//! When a node stands for election: as soon as its leader is gone, and
//! only with a quorum's pre-vote.
//!
//! openraft 0.9 has a follower stand only after the leader's lease *plus*
//! an election timeout of silence (2.5 to 3 timeouts after the last
//! heartbeat, docs/performance.md, "The failover tail"), and without
//! pre-vote. Its timer is off (`enable_elect: false`,
//! `lockd::config::NodeConfig::raft_timeouts`); this loop is the only
//! thing that makes a node stand (`trigger().elect()`, which that switch
//! does not stop), and it stands only after a pre-vote round
//! ([`super::prevote`]) granted by a quorum.
//!
//! A node wants to stand when its leader is gone, which it learns two
//! ways:
//! * **silence**: no message from a leader (an AppendEntries or a
//!   snapshot chunk it accepted) for the election timeout, plus 1/32 of it;
//! * **a closed connection**: the connection that carried the leader's
//!   last message has closed *and* the leader's address refuses a new
//!   one ([`Silence::probe`]), and openraft's lease (during which the
//!   voters would refuse the real vote) has run out, plus 1/32 of the
//!   election timeout. A leader's process that dies closes its sockets
//!   with it, so the followers know at once; a network cut or a machine
//!   that loses power is found by the silence.
//!
//! Each wait gets a random part of up to 1/8 of the election timeout (so
//! that two followers rarely ask at once), drawn from the generator
//! openraft draws from (`raft::runtime`), so a simulation's seed replays
//! it. A node asked for its real vote holds back half a timeout (that
//! candidate gets the time to win), and a node that granted a pre-vote to
//! a better candidate (a longer log, or as long and a lower id) holds back
//! a quarter, and drops its own round if that happened while it asked.
//! A leader that stops hands over (`raft::handoff`): the successor it
//! names stands as soon as the lease allows, with no spread; the others
//! hold back a whole timeout. After it stood, it stands again half to a whole timeout later unless a
//! leader is heard (a split vote); after a refused round, when the voters
//! said they would grant (but after half a timeout at most: a voter that
//! had not yet found the leader's process gone names a whole timeout), or
//! half to a whole timeout later.
//!
//! What it never does: stand while it leads, while its elections are
//! paused (a non-member, `raft::non_member`), or once its Raft has stopped.
//! Raft's safety does not depend on when a node stands (the real vote
//! still needs a quorum whose logs are no longer than the candidate's);
//! the lease a new leader gives the locks it inherits does not either
//! (`service::table`: a full lease from the takeover plus the longest
//! election).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::log_store::LogStore;
use super::non_member::Standing;
use super::peer_client::NetworkFactory;
use super::prevote::Waits;
use super::{NodeId, Raft};

mod asked;
mod round;
use round::{eligible, random_up_to, Clients, Eligible, Tally};

/// What this node knows of its leader's liveness, shared by the peer
/// server (which hears the leader) and the loop that stands.
#[derive(Debug)]
pub struct Silence {
    started: Instant,
    waits: Waits,
    state: Mutex<State>,
    changed: Notify,
    next_conn: AtomicU64,
    /// Pre-vote rounds asked: won, lost (metrics).
    won: AtomicU64,
    lost: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// The leader's last message let in, and the connection it came on.
    heard: Option<Instant>,
    leader_conn: u64,
    /// When that connection closed, not yet known why (no message heard
    /// since): the node probes the leader's address.
    closed: Option<Instant>,
    /// When that connection closed and the leader's address refused a
    /// connection (its process is gone), or the leader resigned (no
    /// message heard since).
    gone: Option<Instant>,
    /// The resigning leader named this node its successor.
    successor: bool,
    /// Not before this (and a random part): another node stands, or was
    /// named successor.
    hold: Option<Instant>,
    /// The furthest log id a leader's accepted message showed: a pre-vote
    /// claiming more is not believed (it holds no one back).
    heard_log: Option<super::LogId>,
}

impl State {
    fn hold_until(&mut self, until: Instant) {
        self.hold = Some(self.hold.map_or(until, |h| h.max(until)));
    }
}

/// A peer connection being served; closing it (drop) tells [`Silence`].
#[derive(Debug)]
pub struct PeerConn {
    id: u64,
    silence: Arc<Silence>,
}

impl PeerConn {
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for PeerConn {
    fn drop(&mut self) {
        self.silence.closed(self.id);
    }
}

impl Silence {
    pub fn new(waits: Waits) -> Arc<Silence> {
        Arc::new(Silence {
            started: Instant::now(),
            waits,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            next_conn: AtomicU64::new(1),
            won: AtomicU64::new(0),
            lost: AtomicU64::new(0),
        })
    }

    /// Pre-vote rounds this node asked: (won, lost).
    pub fn rounds(&self) -> (u64, u64) {
        (
            self.won.load(Ordering::Relaxed),
            self.lost.load(Ordering::Relaxed),
        )
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A peer connection opens (after its hello).
    pub fn connection(self: &Arc<Self>) -> PeerConn {
        PeerConn {
            id: self.next_conn.fetch_add(1, Ordering::Relaxed),
            silence: self.clone(),
        }
    }

    /// A leader's message, on connection `conn`, was let in; it showed
    /// the log up to `log`.
    pub fn heard(&self, conn: u64, log: Option<super::LogId>) {
        let mut s = self.state();
        s.heard_log = s.heard_log.max(log);
        s.heard = Some(Instant::now());
        s.leader_conn = conn;
        s.closed = None;
        s.gone = None;
        s.successor = false;
    }

    fn closed(&self, conn: u64) {
        {
            let mut s = self.state();
            if s.heard.is_none() || s.leader_conn != conn || s.closed.is_some() {
                return;
            }
            s.closed = Some(Instant::now());
        }
        tracing::debug!(conn, "the connection the leader last spoke on closed");
        self.changed.notify_one();
    }

    /// A connection closes for other reasons than a death too: the
    /// leader's own client drops one after a call that timed out (a slow
    /// disk, a loaded machine) and opens another. So a closed connection
    /// counts only once the leader's address refuses a new one: its
    /// process, and its listening socket, are gone. Connections accepted
    /// four times, or no answer within `within` (a machine that went
    /// away), leave it to the silence.
    async fn probe(&self, raft: &Raft, within: Duration) {
        let (closed, gone) = {
            let s = self.state();
            (s.closed, s.gone)
        };
        let Some(closed) = closed.filter(|_| gone.is_none()) else {
            return;
        };
        let addr = {
            let m = raft.metrics();
            let m = m.borrow();
            let Some(leader) = m.current_leader else {
                return;
            };
            match m.membership_config.membership().get_node(&leader) {
                Some(node) => node.addr.clone(),
                None => return,
            }
        };
        // A dying process closes its connections a moment before its
        // listening socket: a connection accepted first is asked again.
        let mut refused = false;
        for _ in 0..4 {
            match tokio::time::timeout(within, lockd_net::socket::connect(&addr)).await {
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    refused = true;
                    break;
                }
                Ok(Ok(_accepted)) => tokio::time::sleep(within / 8).await,
                _ => break,
            }
        }
        let mut s = self.state();
        if refused && s.closed == Some(closed) {
            tracing::debug!(%addr, "the leader's address refuses connections: it is gone");
            s.gone = Some(closed);
        }
    }

    /// How long since this node last heard its leader (or started), in
    /// ms: a follower names no leader past the election timeout
    /// ([`super::known_leader`]).
    pub fn silent_ms(&self) -> u64 {
        let s = self.state();
        let since = s.heard.unwrap_or(self.started);
        u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// When this node should next try to stand (`spread`: its random
    /// part); see the module docs.
    fn due(&self, spread: Duration) -> Instant {
        let (e, lease) = (self.waits.election, self.waits.lease);
        let margin = e / 32;
        let s = self.state();
        let base = s.heard.unwrap_or(self.started);
        if let (Some(gone), true) = (s.gone, s.successor) {
            // Named by the leader: no guess, no spread.
            return gone.max(base + lease + Duration::from_millis(1));
        }
        let mut due = base + e + margin;
        if let Some(gone) = s.gone {
            due = due.min(gone.max(base + lease + margin));
        }
        due += spread;
        if let Some(hold) = s.hold {
            due = due.max(hold + spread);
        }
        due
    }

    /// Stand whenever the leader is gone (see the module docs); until
    /// `shutdown`, or until Raft stops.
    pub async fn run(
        self: Arc<Self>,
        raft: Raft,
        id: NodeId,
        log: LogStore,
        peers: NetworkFactory,
        standing: Arc<Standing>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let e = self.waits.election;
        let retry = e / 2;
        let mut clients = Clients::default();
        let mut not_before = self.started;
        loop {
            let due = self.due(random_up_to(e / 8)).max(not_before);
            tokio::select! {
                _ = tokio::time::sleep_until(due) => {}
                _ = self.changed.notified() => {
                    self.probe(&raft, e / 4).await;
                    continue;
                }
                _ = shutdown.changed() => return,
            }
            // A message heard while asleep moved it later.
            let now = Instant::now();
            if now < self.due(Duration::ZERO).max(not_before) {
                continue;
            }
            match eligible(&raft, id, &standing) {
                Eligible::Stopped => return,
                Eligible::No => {
                    not_before = now + retry;
                    continue;
                }
                Eligible::Yes => {}
            }
            #[cfg(feature = "faults")]
            let skip = lockd_core::faults::get().skip_prevote;
            #[cfg(not(feature = "faults"))]
            let skip = false;
            let tally = if skip {
                Tally {
                    quorum: true,
                    granted: vec![id],
                    wait: None,
                }
            } else {
                clients
                    .pre_vote(&raft, id, &log, &mut peers.clone(), e / 4)
                    .await
            };
            // A better candidate, or a leader, spoke meanwhile.
            if self.due(Duration::ZERO) > now {
                continue;
            }
            let count = if tally.quorum { &self.won } else { &self.lost };
            count.fetch_add(1, Ordering::Relaxed);
            if !tally.quorum {
                tracing::debug!(granted = ?tally.granted, "pre-vote refused");
                // A voter's wait is what it knew when it answered: one that
                // had not yet found the leader's process gone says "a whole
                // timeout", and learns otherwise a moment later. So ask
                // again after at most half a timeout.
                not_before = Instant::now()
                    + match tally.wait {
                        Some(wait) => wait.clamp(e / 32, retry),
                        None => retry + random_up_to(retry),
                    };
                continue;
            }
            let gone = self.state().gone.is_some();
            tracing::info!(
                granted = ?tally.granted,
                leader_connection_closed = gone,
                "no leader: standing for election"
            );
            if raft.trigger().elect().await.is_err() {
                return;
            }
            not_before = Instant::now() + retry + random_up_to(retry);
        }
    }
}
