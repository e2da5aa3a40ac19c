//! A scripted run: a leader whose own disk is slow is crashed and
//! restarted at once, after its followers committed a grant its disk never
//! got.
//!
//! A leader replicates while its own sync runs (vendor/openraft/PATCHED.md),
//! so a grant is committed, applied and acknowledged on the followers'
//! syncs alone when the leader's is slower. Here the leader's disk takes
//! [`SLOW_SYNC_MS`] per batch and its followers' none; once the grant is
//! acknowledged (and the leader's log is seen not to hold it yet), the
//! leader is crashed, which loses the grant from its disk, and restarted
//! at once, before its followers stand.
//!
//! Restored as its term's leader (openraft 0.9's own behaviour: the
//! control `restore-leader`), it writes its next entry under the log id
//! its followers hold the grant under; they take one for the other, and
//! the replicas part: the same applied index, different states, and the
//! acknowledged grant forgotten where the leader answers. Started as a
//! follower (`LogStore::forget_leadership`), it must first win a new term,
//! which it cannot with the shorter log, and a follower that holds the
//! grant leads instead.

use std::sync::Mutex;
use std::time::Duration;

use lockd_client::admin::Http;

use super::run::node_addr;
use super::scenario::{leader, scripted, scripted_config, status, until, Hands};
use super::Control;
use crate::jepsen::history::Ret;
use crate::jepsen::workload::{ret_of, Target};

/// How long the leader's disk takes to sync one batch.
pub const SLOW_SYNC_MS: u64 = 300;
const LEASE: Duration = Duration::from_secs(60);
const KEY: &str = "acknowledged";

/// What the run saw.
#[derive(Clone, Debug, Default)]
pub struct Bounce {
    /// The leader that was bounced.
    pub leader: u64,
    /// The grant's token, acknowledged while the leader's log had not
    /// written it yet.
    pub token: Option<u64>,
    /// Every node at the end: (id, applied index, state hash).
    pub states: Vec<(u64, u64, String)>,
    /// What a second acquire of the acknowledged key got.
    pub again: Option<Ret>,
    /// Why the script stopped early, if it did.
    pub error: Option<String>,
}

impl Bounce {
    /// Whether the acknowledged grant survived on every node alike.
    /// (A script that stopped early judged nothing: see `error`.)
    pub fn verdict(&self) -> Result<(), String> {
        let Some(first) = self.states.first() else {
            return Err("no node's state was read".into());
        };
        if let Some(other) = self.states.iter().find(|s| s.2 != first.2) {
            return Err(format!(
                "the replicas parted: node {} at index {} has state {}, node {} at index {} has {}",
                first.0, first.1, first.2, other.0, other.1, other.2
            ));
        }
        match &self.again {
            Some(Ret::Held) => Ok(()),
            other => Err(format!(
                "the acknowledged grant (token {:?}) was not held: a second acquire got {other:?}",
                self.token
            )),
        }
    }
}

/// Run the scenario (with `control`, a broken variant) and report it.
pub fn leader_restarted_mid_sync(control: Option<Control>) -> Bounce {
    let cfg = scripted_config(control);
    let (mut out, error) = scripted(&cfg, |r, hands| async move { script(&r, &hands).await });
    out.error = out.error.or(error);
    out
}

async fn script(report: &Mutex<Bounce>, hands: &Hands) -> Result<(), String> {
    let http = Http::with_timeout(Duration::from_secs(1));
    let leader = leader(&http).await?;
    report.lock().unwrap_or_else(|p| p.into_inner()).leader = leader;
    let target = Target {
        endpoints: (1..=3).map(node_addr).collect(),
        credentials: Default::default(),
        admin: None,
    };
    let client = target.client(Duration::from_secs(5), Duration::from_secs(1));

    hands.set_sync_ms(leader, SLOW_SYNC_MS);
    let written = status(&http, leader).await?.wal_entries;
    let granted = client
        .acquire(KEY, LEASE, Duration::ZERO)
        .await
        .map_err(|e| format!("the grant: {e}"))?;
    report.lock().unwrap_or_else(|p| p.into_inner()).token = Some(granted.token());
    if status(&http, leader).await?.wal_entries != written {
        return Err("the leader's log wrote the grant before it was acknowledged".into());
    }
    hands.set_sync_ms(leader, 0);
    hands.bounce(leader);
    until("the leader back", || async {
        status(&http, leader).await.ok().map(|_| ())
    })
    .await?;

    // A second write, wherever the cluster takes it now.
    let _after = client
        .acquire("after-the-restart", LEASE, Duration::ZERO)
        .await
        .map_err(|e| format!("the write after the restart: {e}"))?;
    let states = until("every node at one applied index", || async {
        let mut states = Vec::new();
        for id in 1..=3 {
            let s = status(&http, id).await.ok()?;
            states.push((id, s.applied_index, s.state_hash));
        }
        states.iter().all(|s| s.1 == states[0].1).then_some(states)
    })
    .await?;
    // Another client: the first would be let in again (reentrancy).
    let other = target.client(Duration::from_secs(5), Duration::from_secs(1));
    let again = match other.acquire(KEY, LEASE, Duration::ZERO).await {
        Ok(g) => Ret::Granted(g.token()),
        Err(e) => ret_of(&e),
    };
    let mut r = report.lock().unwrap_or_else(|p| p.into_inner());
    r.states = states;
    r.again = Some(again);
    Ok(())
}
