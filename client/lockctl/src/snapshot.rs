//! `lockctl snapshot save FILE`: a backup from the leader (module, state,
//! token counter, settings), written to FILE atomically (a temporary file
//! beside it, synced, then renamed), for `lockd restore`.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context;
use lockd_client::admin::Admin;
use serde_json::json;

use crate::output::{print, Failure};

pub async fn save(admin: &Admin, j: bool, file: &Path) -> Result<(), Failure> {
    let (index, bytes) = admin.snapshot().await?;
    let mut tmp = file.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = std::path::PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)
    };
    write().with_context(|| format!("cannot write {}", file.display()))?;
    print(
        j,
        json!({ "file": file.display().to_string(), "index": index, "bytes": bytes.len() }),
        format!(
            "saved the cluster's state at index {index} to {} ({} bytes)",
            file.display(),
            bytes.len()
        ),
    );
    Ok(())
}
