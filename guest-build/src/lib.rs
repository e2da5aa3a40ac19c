//! Build-script support for crates that embed or test guest components.
//!
//! A build script calls [`build_components`] with the guest packages it
//! needs. That:
//!
//! 1. makes sure the `wasm32-unknown-unknown` target is installed, adding it
//!    with `rustup` when it is missing (rustup does not install targets on
//!    its own here) and failing with a clear message when it cannot;
//! 2. runs a nested `cargo build --target wasm32-unknown-unknown --profile
//!    guest` for those packages, with **its own target dir** (`target/guest`):
//!    a nested cargo that shared the outer build's target dir would wait
//!    forever on the lock the outer build holds;
//! 3. turns each core module into a component with `wit-component` (the
//!    bindings' custom section carries the world) and writes it to
//!    `OUT_DIR/<crate_name>.wasm`.
//!
//! # Layout
//!
//! * [`ensure_wasm_target`]: target check and install.
//! * [`cargo_build`]: the nested cargo invocation and its environment.
//! * [`componentize`]: core module → component.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const WASM_TARGET: &str = "wasm32-unknown-unknown";
pub const PROFILE: &str = "guest";

#[derive(Debug)]
pub struct BuildError(String);

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BuildError {}

fn err(msg: impl Into<String>) -> BuildError {
    BuildError(msg.into())
}

/// Check that the wasm32 target's standard library is installed; if not,
/// install it with `rustup target add`.
pub fn ensure_wasm_target() -> Result<(), BuildError> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| err(format!("cannot run `{rustc} --print sysroot`: {e}")))?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let libdir = sysroot.join("lib/rustlib").join(WASM_TARGET).join("lib");
    if libdir.is_dir() {
        return Ok(());
    }
    let status = Command::new("rustup")
        .args(["target", "add", WASM_TARGET])
        .status();
    match status {
        Ok(s) if s.success() && libdir.is_dir() => Ok(()),
        Ok(s) => Err(err(format!(
            "the {WASM_TARGET} target is not installed and `rustup target add {WASM_TARGET}` failed ({s}); \
             install it for the toolchain at {} and build again",
            sysroot.display()
        ))),
        Err(e) => Err(err(format!(
            "the {WASM_TARGET} target is not installed and rustup could not be run ({e}); \
             install the target for the toolchain at {} and build again",
            sysroot.display()
        ))),
    }
}

/// Environment variables the outer cargo sets for a build script that must
/// not leak into the nested build (they name the outer target, profile and
/// flags).
fn scrub(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let outer_only =
            (key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_NET_OFFLINE")
                || matches!(
                    key,
                    "TARGET"
                        | "HOST"
                        | "OUT_DIR"
                        | "PROFILE"
                        | "OPT_LEVEL"
                        | "DEBUG"
                        | "NUM_JOBS"
                        | "RUSTFLAGS"
                        | "RUSTDOCFLAGS"
                        | "RUSTC_WORKSPACE_WRAPPER"
                );
        if outer_only {
            cmd.env_remove(key);
        }
    }
}

/// Build `packages` of the workspace at `workspace` for wasm32 into
/// `target_dir`; returns the core module of each, in order.
pub fn cargo_build(
    workspace: &Path,
    packages: &[&str],
    target_dir: &Path,
) -> Result<Vec<PathBuf>, BuildError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    scrub(&mut cmd);
    cmd.current_dir(workspace)
        .args([
            "build",
            "--quiet",
            "--target",
            WASM_TARGET,
            "--profile",
            PROFILE,
            "--target-dir",
        ])
        .arg(target_dir);
    for p in packages {
        cmd.args(["-p", p]);
    }
    if std::env::var_os("CARGO_NET_OFFLINE").is_some() {
        cmd.arg("--offline");
    }
    let out = cmd
        .output()
        .map_err(|e| err(format!("cannot run the nested cargo: {e}")))?;
    if !out.status.success() {
        return Err(err(format!(
            "building guests {packages:?} for {WASM_TARGET} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let dir = target_dir.join(WASM_TARGET).join(PROFILE);
    Ok(packages
        .iter()
        .map(|p| dir.join(format!("{}.wasm", p.replace('-', "_"))))
        .collect())
}

/// Turn a core module built with `wit-bindgen` into a component.
pub fn componentize(core: &[u8]) -> Result<Vec<u8>, BuildError> {
    wit_component::ComponentEncoder::default()
        .module(core)
        .and_then(|e| e.validate(true).encode())
        .map_err(|e| {
            err(format!(
                "wit-component could not encode the component: {e:#}"
            ))
        })
}

/// Everything a build script needs: build `packages` (paths relative to the
/// workspace root are watched for changes) and write
/// `OUT_DIR/<crate_name>.wasm` components. Returns their paths.
pub fn build_components(
    workspace: &Path,
    packages: &[&str],
    watch: &[&str],
) -> Result<Vec<PathBuf>, BuildError> {
    for w in watch {
        println!("cargo:rerun-if-changed={}", workspace.join(w).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        workspace.join("Cargo.lock").display()
    );
    ensure_wasm_target()?;
    let target_root = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let cores = cargo_build(workspace, packages, &target_root.join("guest"))?;
    let out_dir =
        PathBuf::from(std::env::var_os("OUT_DIR").ok_or_else(|| err("OUT_DIR is not set"))?);
    let mut written = Vec::new();
    for (package, core_path) in packages.iter().zip(cores) {
        let core = std::fs::read(&core_path)
            .map_err(|e| err(format!("cannot read {}: {e}", core_path.display())))?;
        let component = componentize(&core)?;
        let dest = out_dir.join(format!("{}.wasm", package.replace('-', "_")));
        std::fs::write(&dest, component)
            .map_err(|e| err(format!("cannot write {}: {e}", dest.display())))?;
        written.push(dest);
    }
    Ok(written)
}
