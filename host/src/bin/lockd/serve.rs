//! `lockd serve`: run a node until a signal, and read its auth file again
//! at every SIGHUP.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use lockd::config::NodeConfig;
use lockd::node::Node;

pub async fn run(config: NodeConfig) -> Result<()> {
    if config.insecure {
        tracing::warn!(
            addr = %config.addr,
            tls = config.tls.is_some(),
            auth = config.auth_file.is_some(),
            "--insecure: this node may serve without TLS or authentication; anyone who can reach it may take and release any lock and replace the lock module"
        );
    }
    let node = Node::start(config).await.context("cannot start the node")?;
    let reload = reload_on_sighup(node.clone());
    let failed = tokio::select! {
        _ = lockd::shutdown::signal() => {
            tracing::info!("shutting down");
            None
        }
        _ = node.stopped() => None,
        why = node.failed() => Some(why),
    };
    reload.abort();
    node.shutdown().await;
    match failed {
        // Not half alive: exit non-zero so a supervisor restarts the node,
        // which recovers from its log.
        Some(why) => {
            tracing::error!(error = %why, "raft stopped; exiting");
            bail!("raft stopped: {why}")
        }
        None => Ok(()),
    }
}

/// Read the auth file again at every SIGHUP; a file that does not parse
/// leaves the rules in force.
fn reload_on_sighup(node: Arc<Node>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP; the auth file is read at start only");
            return;
        };
        while hup.recv().await.is_some() {
            match node.auth().reload() {
                Ok(n) if node.auth().is_on() => {
                    tracing::info!(principals = n, "SIGHUP: auth file read again")
                }
                Ok(_) => tracing::info!("SIGHUP: no auth file to read (authentication is off)"),
                Err(e) => {
                    tracing::error!(error = %e, "SIGHUP: the auth file is refused; the rules in force stay")
                }
            }
        }
    })
}
