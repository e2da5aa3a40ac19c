//! `lockctl policy get` prints the lock module's policy data;
//! `lockctl policy set FILE` replaces it with FILE's (JSON,
//! `{"rules":[{"prefix":"…","reserved":bool,"max_lease_ms":N,"max_holders":N,"max_held":N}]}`,
//! `-` for stdin) through the log.

use std::io::Read as _;
use std::path::Path;

use anyhow::Context;
use lockd_client::admin::Admin;
use serde_json::Value;

use crate::output::{print, Failure};

pub async fn get(admin: &Admin, j: bool) -> Result<(), Failure> {
    let policy = admin.policy().await?;
    let rules = policy["rules"].as_array().cloned().unwrap_or_default();
    let text = if rules.is_empty() {
        "no policy rules".to_string()
    } else {
        rules
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    print(j, policy, text);
    Ok(())
}

pub async fn set(admin: &Admin, j: bool, file: &Path) -> Result<(), Failure> {
    let mut text = String::new();
    if file == Path::new("-") {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the policy from stdin")?;
    } else {
        text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    }
    let policy: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))?;
    admin.set_policy(&policy).await?;
    let n = policy["rules"].as_array().map_or(0, Vec::len);
    print(
        j,
        serde_json::json!({ "rules": n }),
        format!("policy set: {n} rules"),
    );
    Ok(())
}
