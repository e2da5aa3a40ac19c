//! `lockctl upgrade FILE [--replaces HASH] [--no-precheck]`, `upgrade
//! --shadow FILE`, `upgrade --promote`, `upgrade --abort`: replace the lock
//! module through the log, or run one beside it first. Prints what the
//! leader did (with `--json`, its answer as sent).

use std::path::PathBuf;

use anyhow::{anyhow, Context};
use lockd_client::admin::Admin;

use crate::output::{print, Failure};

/// What `upgrade` was asked to do.
pub enum Upgrade {
    /// Swap in (or with `shadow`, start beside the active module) the
    /// component in `file`.
    Install {
        file: Option<PathBuf>,
        shadow: bool,
        replaces: Option<String>,
        precheck: bool,
    },
    /// Upgrade to the running shadow module.
    Promote,
    /// Stop the running shadow module.
    Abort,
}

pub async fn run(admin: &Admin, j: bool, what: Upgrade) -> Result<(), Failure> {
    let r = match what {
        Upgrade::Promote => admin.promote_shadow().await?,
        Upgrade::Abort => admin.abort_shadow().await?,
        Upgrade::Install {
            file,
            shadow,
            replaces,
            precheck,
        } => {
            let file =
                file.ok_or_else(|| anyhow!("give the component file (or --promote / --abort)"))?;
            let module =
                std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            if shadow {
                if replaces.is_some() {
                    return Err(anyhow!("--replaces applies to upgrades, not --shadow").into());
                }
                admin.start_shadow(module, precheck).await?
            } else {
                admin.upgrade(module, replaces.as_deref(), precheck).await?
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
    print(j, r.clone(), human);
    Ok(())
}
