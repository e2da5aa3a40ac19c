//! A world-0.3 run's session clients (docs/sessions.md), judged by the
//! same checkers as every other holder.
//!
//! A session round: open a session, hold one `s*` key in it, write the
//! fenced register under it (sometimes after renewing the session once,
//! sometimes after stalling past its TTL), then release the key or close
//! the session. The holding's window ends at the session's promise: the
//! invocation of its last acknowledged keepalive (or of its open) plus
//! the TTL, never the client library's deadline. A service that ends a
//! session before that lets another client hold the key inside the
//! window, and the holders checker sees two holders at once (the negative
//! control `session-early-expiry`).
//!
//! Session keys are left out of the linearizability model, whose leases
//! do not move with a session's keepalives; the acquire records the
//! promise the session had when it was invoked as its lease, which is
//! what the refusal and survival checkers may rely on (a later keepalive
//! only lengthens it).
//!
//! Elections are the workers' `e*` keys (see [`super::workload`]): an
//! election is an exclusive lock with a value, so no two leaders
//! overlapping is the holders checker's and the model's to see, and a
//! deposed leader's writes are the fenced register's.

use std::time::Duration;

use lockd_client::{AcquireOptions, Client};

use super::history::{Call, History, Holding, LockMode, Op, Ret};
use super::register::FencedRegister;
use super::rng::Rng;
use super::workload::{release, ret_of};

/// A session's TTL against the run's lease: long enough to hold a key
/// through a short wait.
const TTL_LEASES: u64 = 2;

/// One session round of client `id` on one of `keys` keys.
pub async fn round(
    id: usize,
    (keys, lease_ms, pause_one_in): (usize, u64, u64),
    client: &Client,
    history: &History,
    register: &FencedRegister,
    rng: &mut Rng,
) {
    let ttl_ms = lease_ms * TTL_LEASES;
    let ttl = Duration::from_millis(ttl_ms);
    let opened = history.now();
    let Ok(session) = client.open_session(ttl).await else {
        tokio::time::sleep(Duration::from_millis(rng.below(50))).await;
        return;
    };
    let mut promised = opened + ttl_ms as f64;
    let key = format!("s{}", rng.below(keys as u64));
    let wait_ms = if rng.below(2) == 0 { 0 } else { lease_ms / 2 };
    let invoke = history.now();
    let opts = AcquireOptions::exclusive(ttl).wait(Duration::from_millis(wait_ms));
    let r = session.acquire(&key, opts).await;
    history.record(Op {
        client: id,
        key: key.clone(),
        call: Call::Acquire {
            lease_ms: (promised - invoke).max(0.0) as u64,
            wait_ms,
            mode: LockMode::Exclusive,
            limit: 1,
            session: true,
        },
        invoke,
        complete: history.now(),
        ret: match &r {
            Ok(g) => Ret::Granted(g.token()),
            Err(e) => ret_of(e),
        },
    });
    let Ok(guard) = r else {
        let _ = session.close().await;
        return;
    };
    let token = guard.token();
    std::mem::forget(guard); // released below, or with its session
    let from = history.now();
    if rng.below(2) == 0 {
        let sent = history.now();
        if session.keepalive().await.is_ok() {
            promised = promised.max(sent + ttl_ms as f64);
        }
    }
    if let Some(v) = register.read(&key, token) {
        // A holder that stalls past its session (a GC pause, a stopped VM).
        let stall = if rng.below(pause_one_in) == 0 {
            ttl_ms * 3 / 2
        } else {
            rng.below(20)
        };
        tokio::time::sleep(Duration::from_millis(stall)).await;
        register.write(&key, id, token, v);
    }
    history.record_holding(Holding {
        client: id,
        key: key.clone(),
        token,
        mode: LockMode::Exclusive,
        limit: 1,
        from,
        until: history.now().min(promised),
    });
    let by_hand = rng.below(2) == 0;
    if by_hand {
        release(client, history, id, &key, token).await;
    }
    // Else the close releases it, and is recorded as its release: what
    // the close answers it released, or "not held" when the session had
    // ended (inside its promise, that is a refusal inside the lease).
    let invoke = history.now();
    let closed = session.close().await;
    if !by_hand {
        let ret = match &closed {
            Ok(released) if released.iter().any(|(k, t)| *k == key && *t == token) => Ret::Released,
            Ok(_) => Ret::Refused,
            Err(e) => ret_of(e),
        };
        history.record(Op {
            client: id,
            key,
            call: Call::Release { token },
            invoke,
            complete: history.now(),
            ret,
        });
    }
}
