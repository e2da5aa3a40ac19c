//! The clients of a run: workers that take a lock, increment the fenced
//! register under it and release it (with a ledger lock now and then), the
//! keeper that holds one lock through every fault, and the waiters that
//! must be served once the faults heal.
//!
//! In a mixed run ([`RunConfig::mixed`]) every worker also takes
//! readers-writer keys (`rw*`: a writer increments the register, a reader
//! only holds) and semaphore keys (`sem*`), all through
//! [`Client::acquire_with`], whose request ids make its retries safe.
//!
//! In a world-0.3 run ([`RunConfig::sessions`], on the module of world
//! 0.4, 0.3's with the election policy) a worker also campaigns in
//! elections at one of three priorities (`e*` keys: an acquire with a
//! value, a proclaim, the
//! register written with the epoch, a resignation) and holds keys in
//! sessions ([`super::sessions`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lockd_client::{AcquireOptions, Client, ClientError};

use super::config::RunConfig;
use super::history::{Call, History, Holding, LockMode, Ret};
use super::http_locks::{self, HttpLocks};
use super::register::FencedRegister;
use super::rng::Rng;

mod target;
mod waiters;
pub use target::{ret_of, ret_of_code, Target};
pub use waiters::waiters;

/// The key the keeper holds, and its lease: far longer than any fault, so
/// only a service that drops a renewed lock (or cannot renew one for this
/// long) loses it.
pub const KEEPER_KEY: &str = "keeper";
pub const KEEPER_LEASE: Duration = Duration::from_secs(10);
/// Ledger locks outlast the run.
pub const LEDGER_LEASE_MS: u64 = 600_000;
/// Readers at once on a readers-writer key of a mixed run.
pub const READERS: u32 = 4;
/// Slots of a semaphore key of a mixed run.
pub const SLOTS: u32 = 3;

/// What a worker takes: a mutex, a reader's or a writer's side of a
/// readers-writer key, or a semaphore slot.
#[derive(Clone, Copy, Debug)]
struct Want {
    mode: LockMode,
    limit: u32,
    /// Through `acquire_with` (mixed runs) rather than the seed's acquire.
    with_options: bool,
    /// A campaign: published with a value, proclaimed again once held.
    elect: bool,
}

const MUTEX: Want = Want {
    mode: LockMode::Exclusive,
    limit: 1,
    with_options: false,
    elect: false,
};

/// Acquire `key` and record the operation.
async fn acquire(
    client: &Client,
    history: &History,
    id: usize,
    key: &str,
    taken: (u64, u64),
    want: Want,
) -> Result<Granted, ClientError> {
    acquire_or_die(client, history, id, key, taken, want, None).await
}

/// [`acquire`], by a process that dies `dies_after` its invoke if the
/// answer has not come by then: the request is dropped wherever it is
/// (sent, waiting, granted and on its way back), its outcome unknown.
async fn acquire_or_die(
    client: &Client,
    history: &History,
    id: usize,
    key: &str,
    (lease_ms, wait_ms): (u64, u64),
    want: Want,
    dies_after: Option<Duration>,
) -> Result<Granted, ClientError> {
    let invoke = history.now();
    let retries = client.retries();
    let (lease, wait) = (
        Duration::from_millis(lease_ms),
        Duration::from_millis(wait_ms),
    );
    let call = async {
        if want.with_options {
            let mut opts = AcquireOptions {
                mode: want.mode,
                limit: want.limit,
                ..AcquireOptions::exclusive(lease).wait(wait)
            };
            if want.elect {
                // Three ranks of candidates (no draw from the run's RNG: the
                // other draws stay where they were), so the module's pick
                // reorders waiters under the faults.
                opts = opts
                    .value(format!("candidate {id}"))
                    .priority((id % 3) as u32);
            }
            client.acquire_with(key, opts).await
        } else {
            // The protocol's first acquire, which has no request id.
            client.acquire_once(key, lease, wait).await
        }
    };
    let (r, died) = match dies_after {
        None => (call.await, false),
        Some(after) => match tokio::time::timeout(after, call).await {
            Ok(r) => (r, false),
            Err(_) => (Err(ClientError::Unknown("its process died".into())), true),
        },
    };
    if !died && client.retries() == retries {
        history.answered_first_try(id, invoke);
    }
    let call = Call::Acquire {
        lease_ms,
        wait_ms,
        mode: want.mode,
        limit: want.limit,
        session: false,
    };
    let ret = match &r {
        Ok(g) => Ret::Granted(g.token()),
        Err(e) => ret_of(e),
    };
    history.completed(id, key, call, invoke, ret);
    r.map(|guard| Granted {
        guard,
        promised: invoke + lease_ms as f64,
    })
}

/// A grant and the end of the lease the *server* promised: the lease asked
/// for, from when the acquire was invoked (the grant came no earlier).
/// Never the client library's own deadline: the library is under test too.
struct Granted {
    guard: lockd_client::LockGuard,
    promised: f64,
}

/// Release `token` on `key` and record the operation.
pub(super) async fn release(client: &Client, history: &History, id: usize, key: &str, token: u64) {
    let invoke = history.now();
    let r = client.release(key, token).await;
    let ret = match &r {
        Ok(()) => Ret::Released,
        Err(e) => ret_of(e),
    };
    history.completed(id, key, Call::Release { token }, invoke, ret);
}

pub async fn worker(
    id: usize,
    cfg: RunConfig,
    target: Target,
    history: Arc<History>,
    register: Arc<FencedRegister>,
    stop: Arc<AtomicBool>,
) {
    let mut rng = Rng::new(cfg.seed * 1000 + id as u64);
    let new_client = || target.client(Duration::from_secs(3), Duration::from_secs(3));
    let mut client = new_client();
    let mut http = None;
    let mut ledger = 0;
    let mutex = Want {
        with_options: cfg.mixed,
        ..MUTEX
    };
    if cfg.mixed && id < 4 {
        opening(id, &cfg, &client, &history).await;
    }
    while !stop.load(Ordering::Relaxed) {
        if rng.below(cfg.ledger_one_in) == 0 {
            ledger += 1;
            let key = format!("ledger/{id}/{ledger}");
            let taken = (LEDGER_LEASE_MS, 0);
            if let Ok(Granted { guard: g, .. }) =
                acquire(&client, &history, id, &key, taken, mutex).await
            {
                if rng.below(2) == 0 {
                    release(&client, &history, id, &key, g.token()).await;
                }
                std::mem::forget(g); // kept or released above; no drop action
            }
            continue;
        }
        // A world-0.3 run: a quarter of the rounds in a session, a quarter
        // campaigns (drawn only then, so other runs keep their draws).
        let round = if cfg.sessions { rng.below(4) } else { 3 };
        if round == 0 {
            let shape = (cfg.keys, cfg.lease_ms, cfg.pause_one_in);
            super::sessions::round(id, shape, &client, &history, &register, &mut rng).await;
            continue;
        }
        let n = rng.below(cfg.keys as u64);
        // A mixed run: half mutexes; a quarter readers-writer keys (one
        // writer to two readers); a quarter semaphore slots.
        let (key, want) = match (cfg.mixed, rng.below(12)) {
            _ if round == 1 => (
                format!("e{n}"),
                Want {
                    with_options: true,
                    elect: true,
                    ..MUTEX
                },
            ),
            (false, _) | (true, 0..=5) => (format!("j{n}"), mutex),
            (true, 6) => (format!("rw{n}"), mutex),
            (true, 7..=8) => (
                format!("rw{n}"),
                Want {
                    mode: LockMode::Shared,
                    limit: READERS,
                    with_options: true,
                    elect: false,
                },
            ),
            (true, _) => (
                format!("sem{n}"),
                Want {
                    limit: SLOTS,
                    ..mutex
                },
            ),
        };
        let wait_ms = if rng.below(2) == 0 { 0 } else { 1500 };
        let taken = (cfg.lease_ms, wait_ms);
        // Drawn only in runs that speak HTTP: the others keep their draws.
        let plain = want.mode == LockMode::Exclusive && want.limit == 1 && !want.elect;
        if plain && cfg.http_one_in > 0 && rng.below(cfg.http_one_in) == 0 {
            let http = http.get_or_insert_with(|| {
                HttpLocks::new(target.endpoints.clone(), target.credentials.clone())
            });
            let pause = cfg.pause_one_in;
            http_locks::round(
                (id, http),
                &history,
                &register,
                &key,
                taken,
                &mut rng,
                pause,
            )
            .await;
            continue;
        }
        // Drawn only in runs that crash clients: the others keep their draws.
        let dies = (cfg.crash_one_in > 0 && rng.below(cfg.crash_one_in) == 0)
            .then(|| Duration::from_millis(rng.below(40)));
        let got = acquire_or_die(&client, &history, id, &key, taken, want, dies).await;
        if dies.is_some() {
            // Dead mid-request or holding: nothing is released; the lease
            // (or, unanswered, the leader's phantom release) ends it.
            if let Ok(g) = got {
                drop(g.guard.release_on_drop(false));
            }
            history.note("client.died");
            client = new_client();
            continue;
        }
        let Ok(granted) = got else {
            tokio::time::sleep(Duration::from_millis(rng.below(50))).await;
            continue;
        };
        let token = granted.guard.token();
        let from = history.now();
        if want.elect {
            // The leader publishes a new value; a deposed one is refused.
            let _ = client.proclaim(&key, token, &format!("leader {id}")).await;
        }
        // Only a sole holder may write; the others only hold.
        let sole = want.mode == LockMode::Exclusive && want.limit == 1;
        let read = if sole {
            register.read(&key, token)
        } else {
            Some(0)
        };
        if let Some(v) = read {
            work(&mut rng, cfg.lease_ms, cfg.pause_one_in).await;
            if sole {
                register.write(&key, id, token, v);
            }
        }
        done(&client, &history, id, &key, want, from, granted).await;
    }
}

/// A holder's work under the lock: a few ms, or one time in
/// `pause_one_in` a stall past its lease (a GC pause, a stopped VM).
pub(super) async fn work(rng: &mut Rng, lease_ms: u64, pause_one_in: u64) {
    let ms = match rng.below(pause_one_in) {
        0 => lease_ms * 3 / 2,
        _ => rng.below(20),
    };
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// A holder is done: record the window it held `key` in by the server's
/// promise (from `from` to now or the end of the lease it was promised,
/// whichever is earlier), then release the lock.
async fn done(
    client: &Client,
    history: &History,
    id: usize,
    key: &str,
    want: Want,
    from: f64,
    granted: Granted,
) {
    let Granted { guard, promised } = granted;
    history.record_holding(Holding {
        client: id,
        key: key.to_string(),
        token: guard.token(),
        mode: want.mode,
        limit: want.limit,
        from,
        until: history.now().min(promised),
    });
    release(client, history, id, key, guard.token()).await;
    std::mem::forget(guard); // released above (or lost); no drop action
}

/// A mixed run's opening, before the first fault: workers 0 and 1 take
/// `rw0` as readers and workers 2 and 3 a slot of `sem0` at once, each
/// holding it for half a second, so every mixed run has shared holders
/// for the holders checker to check, whatever the faults do later.
async fn opening(id: usize, cfg: &RunConfig, client: &Client, history: &History) {
    let (key, want) = if id < 2 {
        (
            "rw0",
            Want {
                mode: LockMode::Shared,
                limit: READERS,
                with_options: true,
                elect: false,
            },
        )
    } else {
        (
            "sem0",
            Want {
                limit: SLOTS,
                with_options: true,
                ..MUTEX
            },
        )
    };
    let taken = (cfg.lease_ms.max(2000), 1500);
    let Ok(granted) = acquire(client, history, id, key, taken, want).await else {
        return;
    };
    let from = history.now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    done(client, history, id, key, want, from, granted).await;
}
