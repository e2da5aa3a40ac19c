//! The label sets of the metric families and the helpers that register
//! one series (a gauge, a counter, a counter family by label) on a scrape's
//! registry.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BuildLabels {
    pub(super) version: &'static str,
    pub(super) wasmtime: &'static str,
    pub(super) module_hash: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct Event {
    pub(super) event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct Kind {
    pub(super) kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct Outcome {
    pub(super) result: &'static str,
}

pub(super) fn gauge(reg: &mut Registry, name: &str, help: &str, value: u64) {
    let g = Gauge::<i64>::default();
    g.set(i64::try_from(value).unwrap_or(i64::MAX));
    reg.register(name, help, g);
}

/// A counter, `name` without the `_total` the encoder adds.
pub(super) fn counter(reg: &mut Registry, name: &str, help: &str, value: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(value);
    reg.register(name, help, c);
}

pub(super) fn labelled<L>(reg: &mut Registry, name: &str, help: &str, values: &[(L, u64)])
where
    L: Clone + std::fmt::Debug + std::hash::Hash + Eq + EncodeLabelSet + Send + Sync + 'static,
{
    let f = Family::<L, Counter<u64, AtomicU64>>::default();
    for (label, v) in values {
        f.get_or_create(label).inc_by(*v);
    }
    reg.register(name, help, f);
}
