//! Test-only fault (the `faults` feature; a build of lockd alone never has
//! it), active when `LOCKD_FAULT_STALE_DONE` is set: it provokes the
//! interleaving behind a release refused as "not held" inside its lease.
//!
//! When a client's `Release` of a key commits, the actor is told to rebuild
//! its mirror (as after a failed proposal), and the release's `Done` is held
//! back until a `Grant` of the same key is proposed (or two seconds pass).
//! A mirror rebuilt without waiting for that `Done` then applies it on top of
//! the new grant in flight.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;

/// How long a held-back `Done` waits for the grant at most.
const HOLD: Duration = Duration::from_secs(2);

fn gates() -> &'static Mutex<HashMap<String, Arc<Notify>>> {
    static GATES: OnceLock<Mutex<HashMap<String, Arc<Notify>>>> = OnceLock::new();
    GATES.get_or_init(Default::default)
}

pub(super) fn active() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("LOCKD_FAULT_STALE_DONE").is_some())
}

/// A gate for the release of `key` being proposed now.
pub(super) fn gate(key: &str) -> Arc<Notify> {
    let notify = Arc::new(Notify::new());
    if let Ok(mut g) = gates().lock() {
        g.insert(key.to_string(), notify.clone());
    }
    notify
}

/// Wait at the gate (a grant of the key opens it).
pub(super) async fn hold(notify: Arc<Notify>) {
    let _ = tokio::time::timeout(HOLD, notify.notified()).await;
}

/// A grant of `key` is being proposed: open its gate, if any.
pub(super) fn open(key: &str) {
    if let Some(n) = gates().lock().ok().and_then(|mut g| g.remove(key)) {
        n.notify_one();
    }
}
