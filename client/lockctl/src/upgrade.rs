//! `lockctl upgrade FILE [--signature FILE.sig] [--replaces HASH]
//! [--no-precheck] [--rollback] [--on-failure refuse|rollback] [--quorum]`,
//! `upgrade --rollback` (back to the previous module), `upgrade --shadow
//! FILE [--signature FILE.sig]`, `upgrade --promote`, `upgrade --abort`:
//! replace the lock module through the log, return to the one before, or
//! run one beside it first. Prints what the leader did and each voter's
//! pre-check verdict (with `--json`, its answer as sent); a refusal names
//! each voter that refused, and why.
//!
//! The module's signature (`lockctl module sign`) is sent with it: the one
//! `--signature` names, else `FILE.sig` when it exists; lockctl says which
//! (on stderr with `--json`). A promote carries the signature the shadow
//! was started with.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use lockd_client::admin::{Admin, UpgradeHow};
use lockd_client::proto::OnModuleFailure;

use crate::output::{print, Failure};

/// What `upgrade` was asked to do.
pub enum Upgrade {
    /// Swap in (or with `shadow`, start beside the active module) the
    /// component in `file`.
    Install {
        file: Option<PathBuf>,
        shadow: bool,
        signature: Option<PathBuf>,
        replaces: Option<String>,
        precheck: bool,
        /// Whatever its version.
        rollback: bool,
        on_failure: OnModuleFailure,
        /// Enacted once a majority of voters accepted it.
        quorum: bool,
    },
    /// Return to the module the active one replaced.
    Rollback { precheck: bool },
    /// Upgrade to the running shadow module.
    Promote,
    /// Stop the running shadow module.
    Abort,
}

pub async fn run(admin: &Admin, j: bool, what: Upgrade) -> Result<(), Failure> {
    let r = match what {
        Upgrade::Promote => admin.promote_shadow().await?,
        Upgrade::Abort => admin.abort_shadow().await?,
        Upgrade::Rollback { precheck } => admin.rollback(precheck).await?,
        Upgrade::Install {
            file,
            shadow,
            signature,
            replaces,
            precheck,
            rollback,
            on_failure,
            quorum,
        } => {
            let file =
                file.ok_or_else(|| anyhow!("give the component file (or --promote / --abort)"))?;
            let module =
                std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let sig = signature_for(&file, signature.as_deref())?;
            let note = match &sig {
                Some((path, _)) => format!("signature: {}", path.display()),
                None => format!(
                    "unsigned: no --signature and no {}",
                    crate::module::with_suffix(&file, ".sig").display()
                ),
            };
            if j {
                eprintln!("lockctl: {note}");
            } else {
                println!("{note}");
            }
            let sig = sig.map(|(_, s)| s);
            if shadow {
                // (`--on-failure` and `--rollback` with `--shadow` are
                // refused by the parser.)
                if replaces.is_some() {
                    return Err(anyhow!("--replaces applies to upgrades, not --shadow").into());
                }
                admin
                    .start_shadow_signed(module, sig.as_deref(), precheck)
                    .await?
            } else {
                let how = UpgradeHow {
                    replaces: replaces.as_deref(),
                    signature: sig.as_deref(),
                    precheck,
                    rollback,
                    on_failure,
                    quorum,
                };
                admin.upgrade_how(module, how).await?
            }
        }
    };
    let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
    let human = match s("result").as_str() {
        "swapped" => format!(
            "upgraded at index {}: module {} ({}) replaced {}",
            r["index"],
            s("module_hash"),
            s("version"),
            s("replaces")
        ),
        "shadow-started" => format!(
            "shadow module {} ({}) started at index {}; watch `lockctl status`",
            s("module_hash"),
            s("version"),
            r["index"]
        ),
        "shadow-stopped" => format!(
            "shadow module {} stopped at index {}",
            s("module_hash"),
            r["index"]
        ),
        other => format!("{other}: {r}"),
    };
    let human = match r["verdicts"].as_array() {
        Some(verdicts) => std::iter::once(human)
            .chain(verdicts.iter().map(verdict_line))
            .collect::<Vec<_>>()
            .join("\n"),
        None => human,
    };
    print(j, r.clone(), human);
    Ok(())
}

/// One voter's pre-check verdict, as a line.
fn verdict_line(v: &serde_json::Value) -> String {
    let node = &v["node"];
    let why = v["reason"].as_str().unwrap_or("");
    match (v["accepted"].as_bool(), v["answered"].as_bool()) {
        (Some(true), _) => format!("  node {node}: accepted"),
        (_, Some(false)) => format!("  node {node}: no answer: {why}"),
        _ => format!("  node {node}: refused: {why}"),
    }
}

/// The signature to send with `file`, and the file it came from: `given`,
/// else `FILE.sig` if it exists, else none.
fn signature_for(file: &Path, given: Option<&Path>) -> anyhow::Result<Option<(PathBuf, String)>> {
    let path = match given {
        Some(p) => p.to_path_buf(),
        None => {
            let default = crate::module::with_suffix(file, ".sig");
            if !default.exists() {
                return Ok(None);
            }
            default
        }
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let sig = crate::keyfile::read_signature(&path.display().to_string(), &text)?;
    Ok(Some((path, hex::encode(sig))))
}
