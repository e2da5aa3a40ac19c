//! Builds the lock state machine (`guest-sm`) for wasm32 and turns it into
//! the component that `lockd` embeds as its built-in module.

fn main() {
    let manifest = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let workspace = manifest.parent().expect("core/ sits in the workspace");
    if let Err(e) = guest_build::build_components(
        workspace,
        &["guest-sm"],
        &["guest-sm/src", "guest-sm/Cargo.toml", "guest-sm/key", "wit"],
    ) {
        panic!("cannot build the built-in lock state machine component:\n{e}");
    }
}
