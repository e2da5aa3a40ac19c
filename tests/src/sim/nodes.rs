//! A node's host in a run: the real node started on its data dir, its
//! leader takeovers recorded for the horizon, and its stops judged.
//!
//! A node may stop only when its disk broke under it (the nemesis
//! restarts it later on what the disk kept). Any other stop is a finding:
//! a node that cannot open its data again after a crash, or whose Raft
//! stops on a storage error, lost or damaged what it had acknowledged
//! (the durability checker); any other reason is the harness's. The node
//! then stays down and the run goes on, so the other checkers judge what
//! the clients saw too.

use std::sync::{Arc, Mutex};

use lockd::config::NodeConfig;
use lockd::node::{Node, NodeError, Seams};
use openraft::error::Fatal;

use super::disk::SimDisk;
use super::run::sim_ms;
use crate::jepsen::check::{Checker, Violation};

/// Leader takeovers as the nodes saw them: (ms, node, term).
pub type Takeovers = Arc<Mutex<Vec<(f64, u64, u64)>>>;
/// Stops no fault explains.
pub type Stops = Arc<Mutex<Vec<Violation>>>;

/// What a node's host reports to, and the disk it runs on.
pub struct Watch {
    pub takeovers: Takeovers,
    pub stops: Stops,
    pub disk: Arc<SimDisk>,
}

impl Watch {
    fn stopped(&self, config: &NodeConfig, checker: Checker, what: String) {
        if self.disk.tripped(&config.data_dir) {
            return;
        }
        let v = Violation::new(checker, format!("node {} {what}", config.id));
        self.stops.lock().unwrap_or_else(|p| p.into_inner()).push(v);
    }
}

/// The software of node `config.id`'s host. It never returns: a node
/// that stops stays down until the nemesis restarts its host.
pub async fn node(config: NodeConfig, seams: Seams, watch: Watch) -> turmoil::Result {
    let id = config.id;
    let node = match Node::start_with(config.clone(), seams).await {
        Ok(node) => node,
        Err(e) => {
            let checker = match e {
                NodeError::Log(_)
                | NodeError::StateMachine(_)
                | NodeError::DataDir { .. }
                | NodeError::Cluster(_) => Checker::Durability,
                _ => Checker::Harness,
            };
            watch.stopped(&config, checker, format!("could not restart: {e}"));
            return down().await;
        }
    };
    let mut metrics = node.raft_metrics();
    let mut term = 0;
    loop {
        {
            let m = metrics.borrow_and_update();
            if m.current_leader == Some(id) && m.current_term != term {
                term = m.current_term;
                let mut t = watch.takeovers.lock().unwrap_or_else(|p| p.into_inner());
                t.push((sim_ms(), id, term));
            }
        }
        if metrics.changed().await.is_err() {
            let why = node.failed().await;
            let storage = matches!(metrics.borrow().running_state, Err(Fatal::StorageError(_)));
            let checker = if storage {
                Checker::Durability
            } else {
                Checker::Harness
            };
            watch.stopped(&config, checker, format!("stopped: {why}"));
            return down().await;
        }
    }
}

async fn down() -> turmoil::Result {
    std::future::pending::<()>().await;
    Ok(())
}
