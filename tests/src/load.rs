//! Continuous lock traffic for upgrade tests: client threads that acquire
//! and release their own keys through the HTTP API of any node until told
//! to stop, recording every answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::cluster::Cluster;

/// One completed acquire: when it was answered and the token it got.
#[derive(Clone, Debug)]
pub struct Grant {
    pub at: Instant,
    pub token: u64,
}

/// What one client thread saw.
#[derive(Clone, Debug, Default)]
pub struct ClientLog {
    pub grants: Vec<Grant>,
    /// Every answer that was not a success, with what was asked.
    pub failures: Vec<String>,
}

/// Sets the flag when dropped: hold one in the scope that runs [`run`], so
/// a failed assertion there stops the clients instead of leaving the scope
/// waiting for them forever.
pub struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Run `clients` threads against `nodes` (round robin) until `stop` is set;
/// each takes `load/{client}/{n}` with a long lease and releases it.
pub fn run(c: &Cluster, nodes: &[u64], clients: usize, stop: &AtomicBool) -> Vec<ClientLog> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|i| {
                let via = nodes[i % nodes.len()];
                s.spawn(move || {
                    let mut log = ClientLog::default();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let key = format!("load/{i}/{}", n % 8);
                        n += 1;
                        match c.acquire(via, &key, 30_000) {
                            Ok(r) if r.ok() => {
                                let Some(token) = r.body["token"].as_u64() else {
                                    log.failures
                                        .push(format!("acquire {key}: no token in {r:?}"));
                                    continue;
                                };
                                log.grants.push(Grant {
                                    at: Instant::now(),
                                    token,
                                });
                                match c.release(via, &key, token) {
                                    Ok(r) if r.ok() => {}
                                    other => log
                                        .failures
                                        .push(format!("release {key} token {token}: {other:?}")),
                                }
                            }
                            other => log.failures.push(format!("acquire {key}: {other:?}")),
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    log
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    })
}
