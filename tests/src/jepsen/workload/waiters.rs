//! The waiters of a run: once the faults heal, one client per key waits
//! for it, and each must be served within the run's bound.

use std::sync::Arc;
use std::time::Duration;

use lockd_client::ClientOptions;
use tokio::time::Instant;

use super::{acquire, done, Target, MUTEX};
use crate::jepsen::check::{Checker, Violation};
use crate::jepsen::history::History;

/// After the faults heal, one client per key waits for it; each must be
/// served within `bound`. Returns how many were.
pub async fn waiters(
    clients: usize,
    keys: usize,
    target: Target,
    history: Arc<History>,
    bound: Duration,
) -> (usize, Vec<Violation>) {
    let mut tasks = Vec::new();
    for id in 0..clients {
        let (target, history) = (target.clone(), history.clone());
        let key = format!("j{}", id % keys);
        tasks.push(tokio::spawn(async move {
            let defaults = ClientOptions::default();
            let client = target.client(defaults.retry_for, defaults.request_timeout);
            let me = 1000 + id;
            let t = Instant::now();
            let lease_ms = 200;
            let taken = (lease_ms, bound.as_millis() as u64);
            let Ok(g) = acquire(&client, &history, me, &key, taken, MUTEX).await else {
                return false;
            };
            let served = t.elapsed() <= bound;
            let from = history.now();
            done(&client, &history, me, &key, MUTEX, from, g).await;
            served
        }));
    }
    let mut served = 0;
    let mut violations = Vec::new();
    for (id, t) in tasks.into_iter().enumerate() {
        match t.await {
            Ok(true) => served += 1,
            Ok(false) => {}
            Err(e) => violations.push(Violation::new(
                Checker::Harness,
                format!("waiting client {id} failed: {e}"),
            )),
        }
    }
    (served, violations)
}
