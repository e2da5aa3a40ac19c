//! Standing for election as soon as the leader falls silent.
//!
//! openraft 0.9 makes a follower that follows a leader wait out the
//! leader's lease *and then* an election timeout before it stands: with
//! its lease tied to `election_timeout_max`, a follower stood 2.2 to 3
//! election timeouts after the last heartbeat (docs/performance.md, "The
//! failover tail"), where etcd's stands after one to two.
//!
//! So the node does not wait for openraft's timer. It notes when it last
//! heard from a leader (an AppendEntries or a snapshot chunk that the
//! leader's vote let in, [`Silence::heard`]), and once nothing came for
//! `after` (`--election-timeout-ms`) plus a thirty-second and a random
//! part of up to an eighth of it, it asks openraft to stand (`trigger().elect()`); if no
//! leader is heard by half to all of `after` later (a split vote), it
//! stands again. Without pre-vote (openraft 0.9 has none), a candidate
//! whose log is shorter than a voter's can never win, and it keeps
//! raising the term under the voter that could: so a node that refuses
//! such a candidate stands at once (its own silence permitting), and a
//! candidate refused for its shorter log leaves the next round to the
//! others (it waits `after` more). A vote request from another candidate
//! holds this node back for half of `after`: that candidate gets the time
//! to win and be heard. The node builds the Raft
//! config so that openraft's own timer comes later (a fallback), and so
//! that a voter's lease, during which it refuses to vote for anyone else,
//! is `after` itself: a candidate that stood after `after` of silence is
//! not refused for a lease that has not run out
//! ([`crate::config::NodeConfig::raft_timeouts`]).
//!
//! What it never does: stand while it leads, while it is not a voter,
//! while its elections are paused (a non-member, `raft::standing`), or
//! once its Raft has stopped. Raft's safety does not depend on when a node
//! stands (a vote still needs a quorum whose logs are no longer than the
//! candidate's); the lease a new leader gives the locks it inherits does
//! not either (`service::table`, a full lease from the takeover plus the
//! longest election). The random part comes from the generator openraft
//! draws from (`raft::runtime`), so a simulation's seed replays it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::standing::Standing;
use super::{NodeId, Raft};

/// When this node last heard from a leader, and what the last votes said.
#[derive(Debug)]
pub struct Silence {
    /// The time everything is counted from.
    base: Instant,
    /// Microseconds after `base` of the last message from a leader.
    leader_us: AtomicU64,
    /// Microseconds after `base` of the last vote request from another
    /// candidate: an election is under way, and the candidate gets the
    /// time to win and be heard.
    vote_us: AtomicU64,
    /// This node refused a candidate whose log is shorter than its own
    /// (this is its term; 0: none since last looked): it should stand
    /// itself, above that term, now that the leader is silent.
    longer_log: AtomicU64,
    /// A voter refused this node for a longer log: it should leave the
    /// next election to that voter.
    shorter_log: AtomicBool,
    changed: Notify,
}

impl Silence {
    pub fn new() -> Arc<Silence> {
        Arc::new(Silence {
            base: Instant::now(),
            leader_us: AtomicU64::new(0),
            vote_us: AtomicU64::new(0),
            longer_log: AtomicU64::new(0),
            shorter_log: AtomicBool::new(false),
            changed: Notify::new(),
        })
    }

    fn now_us(&self) -> u64 {
        self.base.elapsed().as_micros() as u64
    }

    fn at(&self, us: &AtomicU64) -> Instant {
        self.base + Duration::from_micros(us.load(Ordering::Relaxed))
    }

    /// A leader's message was let in: it is alive.
    pub fn heard(&self) {
        self.leader_us.fetch_max(self.now_us(), Ordering::Relaxed);
    }

    /// Another node asks for this node's vote: it stands now.
    pub fn asked_to_vote(&self) {
        self.vote_us.fetch_max(self.now_us(), Ordering::Relaxed);
    }

    /// This node refused a candidate with a shorter log than its own (an
    /// answer to a vote request). Without pre-vote, that candidate keeps
    /// raising the term and can never win; this node can.
    pub fn refused_a_shorter_log(&self, term: u64) {
        self.longer_log.fetch_max(term, Ordering::Relaxed);
        self.changed.notify_one();
    }

    /// A voter refused this node for a log longer than its own.
    pub fn refused_for_a_shorter_log(&self) {
        self.shorter_log.store(true, Ordering::Relaxed);
        self.changed.notify_one();
    }

    /// Stand whenever the leader has been silent for `after` and a bit
    /// more (see the module docs); until `shutdown`, or until Raft stops.
    pub async fn run(
        self: Arc<Self>,
        raft: Raft,
        id: NodeId,
        after: Duration,
        standing: Arc<Standing>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let retry = after / 2;
        let mut not_before = Instant::now();
        loop {
            let (leader, vote) = (self.at(&self.leader_us), self.at(&self.vote_us));
            // A margin past `after`: a voter that heard the last heartbeat
            // a moment later than this node refuses votes until its own
            // lease (`after`) has run out.
            let jitter = after / 32 + random_up_to(after / 8);
            let due = (leader + after + jitter)
                .max(vote + retry + jitter)
                .max(not_before);
            // Standing over a candidate with a shorter log, which cannot
            // win (its term): neither its vote request nor this node's
            // last try holds this node back.
            let mut over_shorter = 0;
            tokio::select! {
                _ = tokio::time::sleep_until(due) => {}
                _ = self.changed.notified() => {
                    let now = Instant::now();
                    if self.shorter_log.swap(false, Ordering::Relaxed) {
                        not_before = now + after + random_up_to(retry);
                    }
                    // The candidate refused stood after its own silence:
                    // stand if this node's has lasted `after` too.
                    over_shorter = self.longer_log.swap(0, Ordering::Relaxed);
                    if over_shorter == 0 || leader + after > now {
                        continue;
                    }
                }
                _ = shutdown.changed() => return,
            }
            if self.at(&self.leader_us) > leader {
                continue;
            }
            let now = Instant::now();
            if over_shorter == 0 && (self.at(&self.vote_us) > vote || now < not_before) {
                continue;
            }
            match eligible(&raft, id, &standing) {
                Eligible::Stopped => return,
                Eligible::No => {
                    // (A leader looks again twice per timeout.)
                    not_before = now + after / 2;
                    continue;
                }
                Eligible::Yes => {}
            }
            tracing::info!(
                silent_ms = (now - leader).as_millis() as u64,
                "no leader heard: standing for election"
            );
            if stand(&raft, over_shorter, after / 4).await.is_err() {
                return;
            }
            not_before = now + retry + random_up_to(retry);
        }
    }
}

/// Stand, at a term above `above` (a candidate this node outranks:
/// openraft stands at its own term plus one, which that candidate may
/// already have taken, voting for itself). `Err`: Raft has stopped.
async fn stand(raft: &Raft, above: u64, within: Duration) -> Result<(), ()> {
    for _ in 0..3 {
        let term = raft.metrics().borrow().vote.leader_id().term;
        raft.trigger().elect().await.map_err(|_| ())?;
        if term + 1 > above {
            return Ok(());
        }
        // Once this try's term shows, another one above it.
        let _ = raft
            .wait(Some(within))
            .metrics(|m| m.vote.leader_id().term > term, "the term rises")
            .await;
    }
    Ok(())
}

enum Eligible {
    Yes,
    No,
    Stopped,
}

/// Whether this node may stand now.
fn eligible(raft: &Raft, id: NodeId, standing: &Standing) -> Eligible {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    if m.running_state.is_err() {
        return Eligible::Stopped;
    }
    let voter = m
        .membership_config
        .membership()
        .voter_ids()
        .any(|v| v == id);
    let leads = m.current_leader == Some(id);
    if !voter || leads || standing.is_paused() {
        return Eligible::No;
    }
    Eligible::Yes
}

/// A duration in `[0, max)`, from the generator openraft draws from.
fn random_up_to(max: Duration) -> Duration {
    let us = max.as_micros() as u64;
    if us == 0 {
        return Duration::ZERO;
    }
    let mut rng = super::runtime::RaftRng;
    Duration::from_micros(rng.gen_range(0..us))
}
