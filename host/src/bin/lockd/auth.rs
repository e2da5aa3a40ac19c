//! `lockd auth`: bearer tokens, and checking an auth file.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum AuthCmd {
    /// Make a new random bearer token for PRINCIPAL: prints the token (give
    /// it to the client) and the entry for the auth file (which keeps only
    /// its hash).
    Token { principal: String },
    /// Read an auth file and say what it grants, or why it is refused.
    Check { file: PathBuf },
}

pub fn run(c: AuthCmd) -> Result<()> {
    match c {
        AuthCmd::Token { principal } => {
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes)
                .map_err(|e| anyhow::anyhow!("the OS's random source failed: {e}"))?;
            let token = format!("lkd_{}", hex::encode(bytes));
            let hash = hex::encode(lockd::auth::rules::token_hash(&token));
            println!("{token}");
            eprintln!(
                "give the token above to {principal}; add to the auth file:\n\n[principals.{}]\nroles = [...]\ntokens = [\"sha256:{hash}\"]",
                toml_key(&principal)
            );
            Ok(())
        }
        AuthCmd::Check { file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let rules = lockd::auth::Rules::parse(&text)
                .with_context(|| format!("{} is refused", file.display()))?;
            println!(
                "{}: {} principals, {} tokens",
                file.display(),
                rules.principals(),
                rules.tokens()
            );
            Ok(())
        }
    }
}

/// `name` as a TOML table key: bare when it can be, quoted otherwise.
fn toml_key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}
