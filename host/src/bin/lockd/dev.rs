//! `lockd dev`: a local cluster of several nodes in one process, for
//! trying it out. Its nodes share the tuning settings of `lockd serve`
//! (flags and `LOCKD_<NAME>` variables alike).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use lockd::config::settings::Tuning;
use lockd::config::{parse_members, Origins};
use lockd::node::Node;

#[derive(Args)]
pub struct DevArgs {
    /// How many nodes.
    #[arg(long, default_value_t = 3)]
    nodes: u64,
    /// Node i listens on 127.0.0.1:(base_port + i).
    #[arg(long, default_value_t = 7400)]
    base_port: u16,
    /// Node i's data dir is DATA_DIR/ni.
    #[arg(long, default_value = "lockd-dev")]
    data_dir: PathBuf,
    #[command(flatten)]
    tuning: Tuning,
}

pub async fn run(args: DevArgs, origins: &Origins) -> Result<()> {
    if args.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    let members: Vec<(u64, String)> = (1..=args.nodes)
        .map(|i| (i, format!("127.0.0.1:{}", u64::from(args.base_port) + i)))
        .collect();
    let cluster = members
        .iter()
        .map(|(i, a)| format!("{i}={a}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut nodes = Vec::new();
    for (id, addr) in &members {
        let mut c = args.tuning.node_config(origins)?;
        c.id = *id;
        c.addr = addr.clone();
        c.data_dir = args.data_dir.join(format!("n{id}"));
        c.initial_cluster = parse_members(&cluster)?;
        nodes.push(
            Node::start(c)
                .await
                .with_context(|| format!("cannot start node {id}"))?,
        );
    }
    let endpoints = members
        .iter()
        .map(|(_, a)| a.as_str())
        .collect::<Vec<_>>()
        .join(",");
    println!(
        "lockd dev: {} nodes serving; try\n  lockctl --endpoints {endpoints} status",
        args.nodes
    );
    lockd::shutdown::signal().await;
    for n in nodes {
        n.shutdown().await;
    }
    Ok(())
}
