//! Builds the lock state machines of world 0.1 (`guest-sm`, the module at
//! index 0 of every log), world 0.2 (`guest-sm/world02`), world 0.3
//! (`guest-sm/world03`, the module a new cluster records first) and world
//! 0.4 (`guest-sm/world04`) for wasm32 and turns them into the components
//! `lockd` embeds.

fn main() {
    let manifest = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let workspace = manifest.parent().expect("core/ sits in the workspace");
    if let Err(e) = guest_build::build_components(
        workspace,
        &[
            "guest-sm",
            "guest-sm-world02",
            "guest-sm-world03",
            "guest-sm-world04",
        ],
        &[
            "guest-sm/src",
            "guest-sm/Cargo.toml",
            "guest-sm/key",
            "guest-sm/logic/src",
            "guest-sm/logic/Cargo.toml",
            "guest-sm/world02/src",
            "guest-sm/world02/Cargo.toml",
            "guest-sm/world03/src",
            "guest-sm/world03/Cargo.toml",
            "guest-sm/world04/src",
            "guest-sm/world04/Cargo.toml",
            "wit",
        ],
    ) {
        panic!("cannot build the built-in lock state machine component:\n{e}");
    }
}
