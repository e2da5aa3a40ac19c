//! `lockd certs init`: a development CA and certificates for a cluster
//! with TLS.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum CertsCmd {
    /// Make a development CA in DIR (ca.pem, ca.key), a certificate for
    /// each node (node-ID.pem, node-ID.key: DNS name node-ID.lockd and its
    /// host) and one for each client (NAME.pem, NAME.key: principal NAME).
    Init {
        dir: PathBuf,
        /// A node as ID=HOST (the IP address or DNS name clients dial);
        /// repeat for each node.
        #[arg(long = "node", required = true)]
        nodes: Vec<lockd::certs::NodeSpec>,
        /// A client principal; repeat for each.
        #[arg(long = "client", default_values_t = ["admin".to_string()])]
        clients: Vec<String>,
        /// Days the certificates are valid.
        #[arg(long, default_value_t = 365)]
        days: i64,
    },
}

pub fn run(c: CertsCmd) -> Result<()> {
    let CertsCmd::Init {
        dir,
        nodes,
        clients,
        days,
    } = c;
    if days < 1 {
        bail!("--days must be at least 1");
    }
    for path in lockd::certs::init(&dir, &nodes, &clients, days)? {
        println!("wrote {}", path.display());
    }
    Ok(())
}
