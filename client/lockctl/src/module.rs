//! `lockctl module …`: signed lock modules.
//!
//! ```text
//! lockctl module keygen NAME                  # NAME.key (private, 0600) and NAME.pub
//! lockctl module sign FILE.wasm --key NAME.key [--shadow]  # FILE.wasm.sig, for one use
//! lockctl module trust NAME.pub|HEX           # the cluster requires signatures by its keys
//! lockctl module untrust NAME.pub|HEX
//! lockctl module keys                         # the keys the cluster trusts
//! ```
//!
//! Keys and signatures are made here, on the signer's machine; a node only
//! ever sees public keys and signatures. The file formats are in
//! [`crate::keyfile`].

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use clap::Subcommand;
use lockd_client::admin::Admin;
use lockd_client::signature::{self, Binding, ModuleKeyReply, Purpose};
use serde_json::json;

use crate::keyfile;
use crate::output::{print, Failure};

#[derive(Subcommand)]
pub enum ModuleOp {
    /// Make a new signing key: NAME.key (PKCS#8 PEM, mode 0600) and
    /// NAME.pub (SPKI PEM). Never overwrites a file.
    Keygen { name: String },
    /// Sign FILE with a private key for one use: writes FILE.sig (128 hex
    /// digits). The signature is bound to this cluster and to the module
    /// it replaces, as the leader reports them, unless all three of
    /// --cluster-id, --replaces and --since are given (signing offline).
    Sign {
        file: PathBuf,
        /// The private key file (NAME.key, or any ed25519 PKCS#8 PEM).
        #[arg(long)]
        key: PathBuf,
        /// Sign for a shadow start (and its promote), not an upgrade.
        #[arg(long)]
        shadow: bool,
        /// The cluster's id (status `cluster_id`).
        #[arg(long, requires_all = ["replaces", "since"])]
        cluster_id: Option<String>,
        /// The active module's hash (status `module_hash`).
        #[arg(long, requires_all = ["cluster_id", "since"])]
        replaces: Option<String>,
        /// The index the active module became active at (status
        /// `module_since_index`).
        #[arg(long, requires_all = ["cluster_id", "replaces"])]
        since: Option<u64>,
    },
    /// Trust a module key: from then on every upgrade and shadow must be
    /// signed by a trusted key.
    Trust {
        /// NAME.pub, or the key's 64 hex digits.
        key: String,
    },
    /// Stop trusting a module key (with none left, signatures are no
    /// longer required).
    Untrust {
        /// NAME.pub, or the key's 64 hex digits.
        key: String,
    },
    /// The module keys the cluster trusts.
    Keys,
}

pub async fn run(admin: &Admin, j: bool, op: ModuleOp) -> Result<(), Failure> {
    match op {
        ModuleOp::Keygen { name } => keygen(j, &name),
        ModuleOp::Sign {
            file,
            key,
            shadow,
            cluster_id,
            replaces,
            since,
        } => {
            let purpose = if shadow {
                Purpose::Shadow
            } else {
                Purpose::Upgrade
            };
            let binding = match (cluster_id, replaces, since) {
                (Some(c), Some(r), Some(n)) => binding(purpose, &c, &r, n)?,
                _ => {
                    let s = admin.leader_status().await?;
                    let cluster = s.cluster_id.ok_or_else(|| {
                        anyhow!("the leader names no cluster id; sign with --cluster-id")
                    })?;
                    binding(purpose, &cluster, &s.module_hash, s.module_since_index)?
                }
            };
            sign(j, &file, &key, &binding)
        }
        ModuleOp::Trust { key } => {
            let reply = admin.trust_module_key(&key_arg(&key)?).await?;
            print_change(j, &reply);
            Ok(())
        }
        ModuleOp::Untrust { key } => {
            let reply = admin.untrust_module_key(&key_arg(&key)?).await?;
            print_change(j, &reply);
            Ok(())
        }
        ModuleOp::Keys => {
            let keys = admin.module_keys().await?;
            let human = if keys.keys.is_empty() {
                "no module key is trusted: upgrades need no signature".to_string()
            } else {
                keys.keys.join("\n")
            };
            print(j, serde_json::to_value(&keys).unwrap_or_default(), human);
            Ok(())
        }
    }
}

/// A key argument: a public key file, or 64 hex digits (when no file of
/// that name exists).
fn key_arg(arg: &str) -> anyhow::Result<String> {
    let path = Path::new(arg);
    let key = if path.exists() {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        keyfile::read_public(arg, &text)?
    } else {
        lockd_client::signature::parse_key(arg)
            .map_err(|e| anyhow!("{arg:?} is neither a public key file nor a key: {e}"))?
    };
    Ok(hex::encode(key))
}

fn print_change(j: bool, r: &ModuleKeyReply) {
    let human = format!(
        "{} module key {} at index {}; {} trusted",
        r.result.as_str(),
        r.key,
        r.index,
        match r.keys.len() {
            0 => "no key is now (upgrades need no signature)".to_string(),
            1 => "1 key is".to_string(),
            n => format!("{n} keys are"),
        }
    );
    print(j, serde_json::to_value(r).unwrap_or_default(), human);
}

/// `path` with `ext` appended to its whole name (`v2.wasm` → `v2.wasm.sig`).
pub fn with_suffix(path: &Path, ext: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(ext);
    PathBuf::from(s)
}

fn keygen(j: bool, name: &str) -> Result<(), Failure> {
    let private = with_suffix(Path::new(name), ".key");
    let public = with_suffix(Path::new(name), ".pub");
    for p in [&private, &public] {
        if p.symlink_metadata().is_ok() {
            return Err(anyhow!("{} exists; not overwriting it", p.display()).into());
        }
    }
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| anyhow!("no randomness from the OS: {e}"))?;
    let pair = keyfile::key_pair(&seed);
    seed.fill(0);
    let pair = pair?;
    write_new(&private, pair.private_pem.as_bytes(), 0o600)?;
    if let Err(e) = write_new(&public, pair.public_pem.as_bytes(), 0o644) {
        // No private key without its public half.
        let _ = std::fs::remove_file(&private);
        return Err(e.into());
    }
    let key = hex::encode(pair.public);
    print(
        j,
        json!({ "private": private, "public": public, "key": key }),
        format!(
            "wrote {} (private: keep it secret) and {}\nmodule key {key}",
            private.display(),
            public.display()
        ),
    );
    Ok(())
}

/// Create `path` (never replacing a file) with `mode` and write `bytes`.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut f = options
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A binding from its parts' text forms.
fn binding(purpose: Purpose, cluster: &str, replaces: &str, since: u64) -> anyhow::Result<Binding> {
    Ok(Binding {
        purpose,
        cluster: signature::parse_cluster(cluster).context("--cluster-id")?,
        replaces: signature::parse_hex("a module hash", replaces).context("--replaces")?,
        since,
    })
}

fn sign(j: bool, file: &Path, key_file: &Path, binding: &Binding) -> Result<(), Failure> {
    let module = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    if !module.starts_with(b"\0asm") {
        return Err(anyhow!(
            "{} is not a WebAssembly file (no \\0asm magic); not signing it",
            file.display()
        )
        .into());
    }
    let text = std::fs::read_to_string(key_file)
        .with_context(|| format!("cannot read {}", key_file.display()))?;
    let key = keyfile::read_private(&key_file.display().to_string(), &text)?;
    let (hash, sig) = keyfile::sign(&key, &module, binding);
    let out = with_suffix(file, ".sig");
    // Replaced when it exists: re-signing with a new key is how a key is
    // rotated, and a signature is no secret.
    std::fs::write(&out, keyfile::signature_text(&sig))
        .with_context(|| format!("cannot write {}", out.display()))?;
    let (hash, public) = (
        hex::encode(hash),
        hex::encode(key.verifying_key().to_bytes()),
    );
    let purpose = match binding.purpose {
        Purpose::Upgrade => "upgrade",
        Purpose::Shadow => "shadow",
    };
    let (cluster, replaces) = (hex::encode(binding.cluster), hex::encode(binding.replaces));
    print(
        j,
        json!({ "module_hash": hash, "key": public, "signature_file": out,
                "purpose": purpose, "cluster_id": cluster, "replaces": replaces,
                "since": binding.since }),
        format!(
            "signed module {hash} with key {public} for one {purpose} of cluster {cluster}, replacing {replaces} (active since index {}): wrote {}",
            binding.since,
            out.display()
        ),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suffix_goes_after_the_whole_name() {
        assert_eq!(
            with_suffix(Path::new("m/v2.wasm"), ".sig"),
            PathBuf::from("m/v2.wasm.sig")
        );
        assert_eq!(
            with_suffix(Path::new("ops"), ".key"),
            PathBuf::from("ops.key")
        );
    }
}
