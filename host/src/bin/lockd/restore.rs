//! `lockd restore` and `lockd recover`: a new cluster's data dir from a
//! backup, or from one survivor's data dir.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use lockd::cluster_id::ClusterId;
use lockd_core::engine::WasmEngine;

#[derive(Args)]
pub struct RestoreArgs {
    /// The backup file.
    #[arg(long)]
    snapshot: PathBuf,
    /// This node's id in the new cluster.
    #[arg(long)]
    id: u64,
    /// This node's new data dir (absent or empty).
    #[arg(long)]
    data_dir: PathBuf,
    /// Every member of the new cluster, ID=ADDR,…
    #[arg(long)]
    initial_cluster: String,
    /// The module hash the backup must hold as its active module (needed
    /// when it trusts module keys).
    #[arg(long)]
    module: Option<String>,
    /// A module key the backup must trust (64 hex digits), once for each:
    /// a backup that trusts keys is restored only when every one is named.
    #[arg(long = "trusted-module-key")]
    trusted_module_keys: Vec<String>,
    /// Restore a backup that requires no module signature (an older
    /// format, or a cluster that trusted no key).
    #[arg(long)]
    allow_unsigned_backup: bool,
}

#[derive(Args)]
pub struct RecoverArgs {
    /// Required: the old membership is discarded.
    #[arg(long, required = true)]
    force_new_cluster: bool,
    /// The surviving node's id (it keeps it).
    #[arg(long)]
    id: u64,
    /// The surviving node's data dir (the node must be stopped).
    #[arg(long)]
    data_dir: PathBuf,
    /// The address the node will serve at (its advertise address).
    #[arg(long)]
    addr: String,
}

/// The engine under the default settings (the cluster's, unless it was
/// started with other fuel or memory limits), with no compiled-module cache.
fn default_engine() -> Result<Arc<WasmEngine>> {
    Ok(Arc::new(WasmEngine::new(Default::default(), None)?))
}

pub fn restore(a: RestoreArgs) -> Result<()> {
    let members = lockd::config::parse_members(&a.initial_cluster)?;
    let bytes = std::fs::read(&a.snapshot)
        .with_context(|| format!("cannot read {}", a.snapshot.display()))?;
    let blob = lockd::restore::decode(&bytes)
        .with_context(|| format!("{} is refused", a.snapshot.display()))?;
    let vouched = lockd::restore::Vouched {
        module: a
            .module
            .as_deref()
            .map(|m| {
                lockd_core::engine::ModuleHash::parse(m).ok_or_else(|| {
                    anyhow::anyhow!("--module {m:?} is not a module hash (64 hex digits)")
                })
            })
            .transpose()?,
        keys: a
            .trusted_module_keys
            .iter()
            .map(|k| {
                lockd_core::signature::ModuleKey::parse(k)
                    .with_context(|| format!("--trusted-module-key {k:?}"))
            })
            .collect::<Result<_>>()?,
        allow_unsigned: a.allow_unsigned_backup,
    };
    lockd::restore::check_vouched(&blob, &vouched)
        .with_context(|| format!("{} is refused", a.snapshot.display()))?;
    let engine = default_engine()?;
    // The same for every node restored from this file with these members.
    let cluster = ClusterId::at_restore(&bytes, &members);
    let r = lockd::restore::write_node(&engine, &a.data_dir, a.id, blob, &members, &cluster)
        .with_context(|| format!("cannot restore into {}", a.data_dir.display()))?;
    report_restored(a.id, &a.data_dir, &members, &cluster, &r);
    Ok(())
}

pub fn recover(a: RecoverArgs) -> Result<()> {
    let engine = default_engine()?;
    let blob = lockd::restore::survivor_state(&engine, &a.data_dir, lockd_core::builtin::LOCK_SM)
        .with_context(|| {
        format!(
            "cannot read the survivor's state in {}",
            a.data_dir.display()
        )
    })?;
    // The old data dir is kept beside the new one, never deleted.
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut kept = a.data_dir.clone().into_os_string();
    kept.push(format!(".before-recover-{stamp}"));
    let kept = PathBuf::from(kept);
    std::fs::rename(&a.data_dir, &kept).with_context(|| {
        format!(
            "cannot move {} aside to {}",
            a.data_dir.display(),
            kept.display()
        )
    })?;
    let members = BTreeMap::from([(a.id, a.addr.clone())]);
    let cluster = ClusterId::random()?;
    let r = lockd::restore::write_node(&engine, &a.data_dir, a.id, blob, &members, &cluster)
        .with_context(|| {
            format!(
                "cannot write the new data dir {} (the old one is {})",
                a.data_dir.display(),
                kept.display()
            )
        })?;
    println!("the old data dir is kept at {}", kept.display());
    report_restored(a.id, &a.data_dir, &members, &cluster, &r);
    Ok(())
}

fn report_restored(
    id: u64,
    dir: &Path,
    members: &BTreeMap<u64, String>,
    cluster: &ClusterId,
    r: &lockd::restore::Restored,
) {
    println!(
        "node {id} of the new cluster {cluster} in {}: the state at index {} (module {}, {} holdings, state hash {}); tokens continue from {} (they were at {})",
        dir.display(),
        r.index,
        r.module_hash,
        r.locks_held,
        &r.state_hash[..12],
        r.tokens_now,
        r.tokens_were
    );
    let addr = members.get(&id).map(String::as_str).unwrap_or("ADDR");
    println!(
        "start it with: lockd serve --id {id} --addr {addr} --data-dir {}",
        dir.display()
    );
}
