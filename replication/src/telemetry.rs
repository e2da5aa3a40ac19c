//! Latency histograms the hot paths record into (docs/operations.md,
//! "Metrics"), read by `/metrics` (the node's `api::metrics`).
//!
//! Each layer owns the histograms of what it times — the log its
//! group-commit writes, the state machine its applies and module swaps,
//! the lock service its acquires and commits — so a layer built alone (in
//! a unit test) needs nothing handed in, and several nodes in one process
//! (`lockd dev`, the tests) never share one. A histogram is a handle to
//! shared counts: cloning it for a scrape's registry copies no data.
//!
//! Pure: no I/O, and no imports from the rest of the crate.

use std::time::{Duration, Instant};

mod stages;
pub use stages::{Stage, Stages};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

/// Bucket bounds for every latency: 50 µs doubling to about 26 s (20
/// buckets), wide enough for an fsync on a fast disk and for an acquire
/// that waited in a queue.
fn buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.000_05, 2.0, 20)
}

fn histogram() -> Histogram {
    Histogram::new(buckets())
}

/// One latency histogram, in seconds.
#[derive(Clone, Debug)]
pub struct Latency(Histogram);

impl Default for Latency {
    fn default() -> Self {
        Latency(histogram())
    }
}

impl Latency {
    pub fn observe(&self, took: Duration) {
        self.0.observe(took.as_secs_f64());
    }

    /// Record the time since `start`.
    pub fn since(&self, start: Instant) {
        self.observe(start.elapsed());
    }

    /// A handle for a registry.
    pub fn histogram(&self) -> Histogram {
        self.0.clone()
    }
}

/// The label of an outcome: `{result="…"}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: &'static str,
}

type Constructor = fn() -> Histogram;

/// A latency histogram per outcome.
#[derive(Clone, Debug)]
pub struct ByResult(Family<ResultLabel, Histogram, Constructor>);

impl Default for ByResult {
    fn default() -> Self {
        ByResult(Family::new_with_constructor(histogram))
    }
}

impl ByResult {
    pub fn observe(&self, result: &'static str, took: Duration) {
        self.0
            .get_or_create(&ResultLabel { result })
            .observe(took.as_secs_f64());
    }

    /// A handle for a registry.
    pub fn family(&self) -> Family<ResultLabel, Histogram, Constructor> {
        self.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    fn text(reg: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, reg).expect("encodes");
        out
    }

    #[test]
    fn a_clone_sees_every_observation_and_buckets_are_cumulative() {
        let l = Latency::default();
        let mut reg = Registry::default();
        reg.register("t_seconds", "t", l.histogram());
        l.observe(Duration::from_micros(70));
        l.observe(Duration::from_millis(3));
        let out = text(&reg);
        assert!(out.contains("t_seconds_count 2"), "{out}");
        assert!(out.contains("t_seconds_bucket{le=\"0.0001\"} 1"), "{out}");
        assert!(out.contains("t_seconds_bucket{le=\"+Inf\"} 2"), "{out}");
    }

    #[test]
    fn outcomes_are_labels() {
        let b = ByResult::default();
        let mut reg = Registry::default();
        reg.register("a_seconds", "a", b.family());
        b.observe("granted", Duration::from_millis(1));
        b.observe("timeout", Duration::from_millis(1));
        b.observe("granted", Duration::from_millis(1));
        let out = text(&reg);
        assert!(
            out.contains("a_seconds_count{result=\"granted\"} 2"),
            "{out}"
        );
        assert!(
            out.contains("a_seconds_count{result=\"timeout\"} 1"),
            "{out}"
        );
    }
}
