//! Where a write's time goes, stage by stage (docs/performance.md,
//! "Stages"): `lockd_stage_seconds{stage}`.
//!
//! Two kinds of stage:
//!
//! * **A request's** (`receive`): observed once per request, where the
//!   request already reads the clock.
//! * **An entry's** (`queue`, `append`, `fsync`, `replicate`, `apply`,
//!   `answer`): the layers an entry passes (the log store, its writer, the
//!   commit, the state machine) each stamp it in a ring keyed by log index
//!   with one clock read per call (per batch of entries, not per request);
//!   the proposer, once the entry is answered, reads its stamps and
//!   observes each stage once per entry. Every request in an entry waits
//!   the entry's stages, so per entry is per request at one client and an
//!   even mix at many.
//!
//! Stages follow one another, but for the leader's `fsync`, which runs
//! beside `replicate` (the leader replicates while it syncs, and counts
//! itself in the quorum once synced): `queue`, `append`, `replicate`,
//! `apply` and `answer` add up to the time from the first stamp to the
//! last. A stamp that is missing (a ring slot reused
//! by a later entry, an entry that came by snapshot) drops that entry's
//! observations, never a wrong one.
//!
//! Pure: no I/O, and no imports from the rest of the crate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

/// Entries whose stamps are kept: far more than can be in flight.
const RING: usize = 4096;

/// A stage of a write, in path order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The request read, parsed and authorised, up to the lock service.
    Receive,
    /// The entry's first command group waiting for the proposer (a slot,
    /// the batch it joins).
    Queue,
    /// Proposed to Raft, until the leader's log store has it (openraft's
    /// queue, the entry encoded).
    Append,
    /// The leader's write and fsync of it: beside `Replicate`, not before
    /// it.
    Fsync,
    /// The leader's log store has the entry, to the entry committed: the
    /// followers' appends and fsyncs and the leader's own, in parallel,
    /// until a quorum has it durably.
    Replicate,
    /// Committed to applied (the apply queue, the module's apply).
    Apply,
    /// Applied to the proposer's answer (openraft's response).
    Answer,
}

impl Stage {
    pub const ALL: [Stage; 7] = [
        Stage::Receive,
        Stage::Queue,
        Stage::Append,
        Stage::Fsync,
        Stage::Replicate,
        Stage::Apply,
        Stage::Answer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Receive => "receive",
            Stage::Queue => "queue",
            Stage::Append => "append",
            Stage::Fsync => "fsync",
            Stage::Replicate => "replicate",
            Stage::Apply => "apply",
            Stage::Answer => "answer",
        }
    }
}

/// The label of a stage: `{stage="…"}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageLabel {
    pub stage: &'static str,
}

type Constructor = fn() -> Histogram;

/// 1 µs doubling to about 16 s: a stage can take a few microseconds.
fn histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_001, 2.0, 25))
}

/// One entry's stamps (nanoseconds since the ring's epoch; 0: not yet).
#[derive(Default)]
struct Slot {
    /// The log index the stamps are of.
    index: AtomicU64,
    appended: AtomicU64,
    fsynced: AtomicU64,
    committed: AtomicU64,
    applied: AtomicU64,
}

/// The stamps' ring and the stages' histograms of one node. Shared.
pub struct Stages {
    epoch: Instant,
    ring: Box<[Slot]>,
    /// The highest index stamped committed.
    committed: AtomicU64,
    family: Family<StageLabel, Histogram, Constructor>,
    /// The family's histograms, looked up once (an observe takes no
    /// lookup).
    each: Vec<Histogram>,
}

impl std::fmt::Debug for Stages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stages")
            .field("committed", &self.committed)
            .finish_non_exhaustive()
    }
}

impl Default for Stages {
    fn default() -> Self {
        let family: Family<StageLabel, Histogram, Constructor> =
            Family::new_with_constructor(histogram);
        let each = Stage::ALL
            .iter()
            .map(|s| {
                family
                    .get_or_create(&StageLabel { stage: s.name() })
                    .clone()
            })
            .collect();
        Stages {
            epoch: Instant::now(),
            ring: (0..RING).map(|_| Slot::default()).collect(),
            committed: AtomicU64::new(0),
            family,
            each,
        }
    }
}

/// Which stamp.
#[derive(Clone, Copy)]
enum Stamp {
    Appended,
    Fsynced,
    Committed,
    Applied,
}

impl Stages {
    /// A handle for a registry.
    pub fn family(&self) -> Family<StageLabel, Histogram, Constructor> {
        self.family.clone()
    }

    pub fn observe(&self, stage: Stage, took: Duration) {
        // `each` is in `Stage::ALL`'s order, which is the enum's.
        self.each[stage as usize].observe(took.as_secs_f64());
    }

    fn now(&self) -> u64 {
        // At least 1: 0 means "not stamped".
        (self.epoch.elapsed().as_nanos() as u64).max(1)
    }

    fn stamp(&self, indexes: impl IntoIterator<Item = u64>, which: Stamp, at: u64) {
        for index in indexes {
            let slot = &self.ring[index as usize % RING];
            if let Stamp::Appended = which {
                // A new entry at this slot: the older one's stamps go.
                slot.index.store(index, Ordering::Relaxed);
                for s in [&slot.fsynced, &slot.committed, &slot.applied] {
                    s.store(0, Ordering::Relaxed);
                }
            } else if slot.index.load(Ordering::Relaxed) != index {
                continue;
            }
            let field = match which {
                Stamp::Appended => &slot.appended,
                Stamp::Fsynced => &slot.fsynced,
                Stamp::Committed => &slot.committed,
                Stamp::Applied => &slot.applied,
            };
            field.store(at, Ordering::Relaxed);
        }
    }

    /// The log store took these entries (one clock read for all).
    pub fn appended(&self, indexes: impl IntoIterator<Item = u64>) {
        self.stamp(indexes, Stamp::Appended, self.now());
    }

    /// The log writer synced these entries.
    pub fn fsynced(&self, indexes: impl IntoIterator<Item = u64>) {
        self.stamp(indexes, Stamp::Fsynced, self.now());
    }

    /// Everything up to `upto` is committed: stamps the entries past the
    /// last commit (at most a ring's worth).
    pub fn committed(&self, upto: u64) {
        let before = self.committed.fetch_max(upto, Ordering::Relaxed);
        if upto > before {
            let from = (before + 1).max(upto.saturating_sub(RING as u64 - 1));
            self.stamp(from..=upto, Stamp::Committed, self.now());
        }
    }

    /// The state machine applied these entries.
    pub fn applied(&self, indexes: impl IntoIterator<Item = u64>) {
        self.stamp(indexes, Stamp::Applied, self.now());
    }

    /// Entry `index`, proposed at `proposed` after its first group waited
    /// since `queued`, is answered now: observe its stages.
    pub fn answered(&self, index: u64, queued: Instant, proposed: Instant) {
        let slot = &self.ring[index as usize % RING];
        let read = |s: &AtomicU64| s.load(Ordering::Relaxed);
        let stamps = [
            read(&slot.appended),
            read(&slot.fsynced),
            read(&slot.committed),
            read(&slot.applied),
        ];
        if read(&slot.index) != index || stamps.contains(&0) {
            return;
        }
        let since_epoch = |t: Instant| t.saturating_duration_since(self.epoch).as_nanos() as u64;
        let ns = |from: u64, to: u64| Duration::from_nanos(to.saturating_sub(from));
        let [appended, fsynced, committed, applied] = stamps;
        let proposed_at = since_epoch(proposed);
        self.observe(Stage::Queue, proposed.saturating_duration_since(queued));
        self.observe(Stage::Append, ns(proposed_at, appended));
        self.observe(Stage::Fsync, ns(appended, fsynced));
        self.observe(Stage::Replicate, ns(appended, committed));
        self.observe(Stage::Apply, ns(committed, applied));
        self.observe(Stage::Answer, ns(applied, self.now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    /// The stages' histograms as the metrics page shows them.
    fn encoded(s: &Stages) -> String {
        let mut reg = Registry::default();
        reg.register("s_seconds", "s", s.family());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).expect("encodes");
        out
    }

    fn counts(s: &Stages) -> String {
        let out = encoded(s);
        Stage::ALL
            .iter()
            .map(|st| {
                let key = format!("s_seconds_count{{stage=\"{}\"}} ", st.name());
                let n = out
                    .lines()
                    .find_map(|l| l.strip_prefix(&key))
                    .unwrap_or("?");
                format!("{}={n}", st.name())
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn an_entry_stamped_at_every_layer_is_observed_once_per_stage() {
        let s = Stages::default();
        let queued = Instant::now();
        let proposed = Instant::now();
        s.appended([7, 8]);
        s.fsynced([7, 8]);
        s.committed(8);
        s.applied([7, 8]);
        s.answered(8, queued, proposed);
        assert_eq!(
            counts(&s),
            "receive=0 queue=1 append=1 fsync=1 replicate=1 apply=1 answer=1"
        );
    }

    #[test]
    fn a_missing_or_reused_stamp_drops_the_entry_s_observations() {
        let s = Stages::default();
        let t = Instant::now();
        // Never committed: nothing observed.
        s.appended([1]);
        s.fsynced([1]);
        s.applied([1]);
        s.answered(1, t, t);
        // Its slot taken by an entry a ring later: the old one's stamps
        // are gone, and the new one's stages are its own.
        let later = 2 + RING as u64;
        s.appended([2]);
        s.appended([later]);
        s.fsynced([2, later]);
        s.committed(later);
        s.applied([2, later]);
        s.answered(2, t, t);
        assert!(counts(&s).contains("queue=0"), "{}", counts(&s));
        s.answered(later, t, t);
        assert!(counts(&s).contains("queue=1"), "{}", counts(&s));
    }

    fn sum_ns(s: &Stages, stage: Stage) -> u64 {
        let out = encoded(s);
        let key = format!("s_seconds_sum{{stage=\"{}\"}} ", stage.name());
        let secs: f64 = out
            .lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.parse().ok())
            .expect("a sum");
        (secs * 1e9).round() as u64
    }

    #[test]
    fn a_commit_before_the_leader_s_own_fsync_is_timed_from_the_append() {
        // The leader replicates while it syncs: a quorum of followers may
        // commit the entry before the leader's sync ends.
        let s = Stages::default();
        s.stamp([4], Stamp::Appended, 1_000);
        s.stamp([4], Stamp::Committed, 5_000);
        s.stamp([4], Stamp::Fsynced, 7_000);
        s.stamp([4], Stamp::Applied, 8_000);
        let t = s.epoch;
        s.answered(4, t, t);
        assert_eq!(sum_ns(&s, Stage::Replicate), 4_000);
        assert_eq!(sum_ns(&s, Stage::Fsync), 6_000);
        assert_eq!(sum_ns(&s, Stage::Apply), 3_000);
    }

    #[test]
    fn a_commit_stamps_only_what_it_newly_covers() {
        let s = Stages::default();
        s.appended([1, 2, 3]);
        s.committed(2);
        let first = s.ring[1].committed.load(Ordering::Relaxed);
        s.committed(3);
        // Entry 1 keeps the stamp of the commit that covered it.
        assert_eq!(s.ring[1].committed.load(Ordering::Relaxed), first);
        assert!(s.ring[3].committed.load(Ordering::Relaxed) >= first);
        // A commit index going back (a new term's leader) stamps nothing.
        s.committed(1);
        assert_eq!(s.committed.load(Ordering::Relaxed), 3);
    }
}
