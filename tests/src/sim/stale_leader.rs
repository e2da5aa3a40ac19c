//! A scripted run: a leader cut off from the others is asked for a key
//! the others have since released.
//!
//! A client holds a key through leader `L`; `L` is cut off from both
//! followers, which elect a new leader, through which the key is
//! released. Then a client that reaches only `L` asks for the key. `L`
//! may still believe it leads, so before it answers "held" it must prove
//! that it does (the read barrier, docs/architecture.md); without the
//! proof it answers from its stale table, and the history (grant, release,
//! then "held" with nobody holding) is not linearizable.
//!
//! The random seeds catch a skipped barrier only when the nemesis happens
//! to cut a leader off while a worker asks it for a key that changed on
//! the other side (the first of them at seed 20); this script makes that
//! moment every time, so the control `skip-read-barrier` is caught here.

use std::sync::Mutex;
use std::time::Duration;

use lockd_client::admin::Http;
use lockd_proto::Role;

use super::faults::host;
use super::run::{node_addr, sim_ms};
use super::scenario::{leader, scripted, scripted_config, status, until};
use super::Control;
use crate::jepsen::history::{Call, Op, Ret};
use crate::jepsen::lin::{check_key, Horizon, NotShown};
use crate::jepsen::workload::{ret_of, Target};

const KEY: &str = "cut-off";
const LEASE: Duration = Duration::from_secs(60);

/// What the run saw.
#[derive(Clone, Debug, Default)]
pub struct StaleRead {
    /// The leader that was cut off.
    pub leader: u64,
    /// The key's operations, in order.
    pub ops: Vec<Op>,
    /// Why the script stopped early, if it did.
    pub error: Option<String>,
}

impl StaleRead {
    /// The linearizability checker's verdict on the key's operations.
    pub fn verdict(&self) -> Result<(), NotShown> {
        // No slack is needed: the lease (60 s) outlasts the run.
        check_key(&self.ops, &Horizon::default())
    }
}

/// Run the scenario (with `control`, a broken variant) and report it.
pub fn refusal_from_a_cut_off_leader(control: Option<Control>) -> StaleRead {
    let cfg = scripted_config(control);
    let (mut out, error) = scripted(&cfg, |r, _| async move { script(&r).await });
    out.error = out.error.or(error);
    out
}

async fn script(report: &Mutex<StaleRead>) -> Result<(), String> {
    let http = Http::with_timeout(Duration::from_secs(1));
    let leader = leader(&http).await?;
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let client = |ids: &[u64]| {
        Target {
            endpoints: ids.iter().map(|id| node_addr(*id)).collect(),
            credentials: Default::default(),
            admin: None,
        }
        .client(Duration::from_secs(3), Duration::from_secs(1))
    };
    let record = |call: Call, invoke: f64, ret: Ret| {
        report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ops
            .push(Op {
                client: 0,
                key: KEY.into(),
                call,
                invoke,
                complete: sim_ms(),
                ret,
            });
    };
    report.lock().unwrap_or_else(|p| p.into_inner()).leader = leader;

    let lease_ms = LEASE.as_millis() as u64;
    let at = sim_ms();
    let granted = client(&[leader])
        .acquire(KEY, LEASE, Duration::ZERO)
        .await
        .map_err(|e| format!("the first grant: {e}"))?;
    let token = granted.token();
    record(Call::acquire(lease_ms, 0), at, Ret::Granted(token));

    for other in &others {
        turmoil::partition(host(leader), host(*other));
    }
    until("a leader among the others", || async {
        for id in &others {
            if status(&http, *id).await.ok()?.role == Role::Leader {
                return Some(());
            }
        }
        None
    })
    .await?;
    let at = sim_ms();
    client(&others)
        .release(KEY, token)
        .await
        .map_err(|e| format!("the release through the others: {e}"))?;
    record(Call::Release { token }, at, Ret::Released);

    // Only now, with the release acknowledged and the clock past its
    // answer (so that the two cannot be ordered either way), ask the
    // cut-off leader.
    let released = sim_ms();
    until("the clock past the release", || async {
        (sim_ms() > released).then_some(())
    })
    .await?;
    let at = sim_ms();
    let ret = match client(&[leader]).acquire(KEY, LEASE, Duration::ZERO).await {
        Ok(g) => Ret::Granted(g.token()),
        Err(e) => ret_of(&e),
    };
    record(Call::acquire(lease_ms, 0), at, ret);
    Ok(())
}
