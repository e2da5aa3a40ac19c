//! Builds the hostile guest fixtures, the module with its own invariants
//! and version 2 of the world-0.1 lock module (`guest-sm-world01-v2`) for
//! wasm32 and componentises them into `OUT_DIR`, where the tests include
//! them (the reference module of world 0.2 is `lockd-core`'s built-in).

fn main() {
    let manifest = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let workspace = manifest.parent().expect("tests/ sits in the workspace");
    let watch = [
        "tests/fixtures",
        "guest-sm/src",
        "guest-sm/key",
        "tests/fixtures/guest-sm-world01-v2/src",
        "guest-sm/logic/src",
        "guest-sm/world03/src",
        "wit",
    ];
    let guests = [
        "chaos-guest",
        "import-guest",
        "guest-sm-world01-v2",
        "checked-guest",
    ];
    if let Err(e) = guest_build::build_components(workspace, &guests, &watch) {
        panic!("cannot build the test fixture guests:\n{e}");
    }
}
