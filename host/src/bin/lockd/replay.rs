//! `lockd replay`: a stopped node's stored log through a candidate module,
//! every outcome that differs from the active module's printed. Exits 2
//! when some differ.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use lockd::config::settings::Engine;

#[derive(Args)]
pub struct ReplayArgs {
    /// The node's data dir (the node must be stopped).
    #[arg(long)]
    data_dir: PathBuf,
    /// The candidate component.
    #[arg(long)]
    module: PathBuf,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
    /// The cluster's engine budgets (give them if it does not run the
    /// defaults).
    #[command(flatten)]
    engine: Engine,
}

pub fn run(a: ReplayArgs) -> Result<()> {
    let module = std::fs::read(&a.module)
        .with_context(|| format!("cannot read module {}", a.module.display()))?;
    let engine = Arc::new(lockd_core::engine::WasmEngine::new(
        a.engine.settings(),
        None,
    )?);
    let r =
        lockd::modules::replay::replay(&engine, &a.data_dir, &module, lockd_core::builtin::LOCK_SM)
            .with_context(|| format!("cannot replay {}", a.data_dir.display()))?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "replayed entries {}..={} ({} entries, {} commands, {} upgrade entries) after the snapshot at {}",
            r.from_index + 1,
            r.to_index,
            r.entries,
            r.commands,
            r.upgrades,
            r.from_index
        );
        println!("active module    {}", r.active_module);
        println!(
            "candidate module {} ({})",
            r.candidate_module, r.candidate_version
        );
        for d in &r.differences {
            println!(
                "index {}: {}: active {}, candidate {}",
                d.index, d.command, d.active, d.candidate
            );
        }
        if let Some(f) = &r.candidate_failed {
            println!("the candidate failed {f}; nothing after it was compared");
        }
        println!(
            "{} outcome(s) differ; final state hashes {}",
            r.differences.len(),
            if r.candidate_state_hash.as_deref() == Some(r.active_state_hash.as_str()) {
                "equal"
            } else {
                "differ"
            }
        );
    }
    if !r.differences.is_empty() || r.candidate_failed.is_some() {
        std::process::exit(2);
    }
    Ok(())
}
