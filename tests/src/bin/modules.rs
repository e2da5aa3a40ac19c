//! Write the lock modules built in this workspace to a directory, as
//! component files for `lockctl upgrade` and `lockd replay`, each named
//! for the world it implements (the version each reports is another
//! number: docs/lock-modules.md, "Module versions and worlds").
//!
//! ```text
//! cargo run --release -p lockd-tests --bin modules -- DIR
//! ```
//!
//! * `lock_sm_0_1.wasm`: the built-in module of world `lock-sm@0.1.0`
//!   (`guest-sm/`), index 0 of every log;
//! * `lock_sm_0_1_v2.wasm`: version 2 of the 0.1 module
//!   (`tests/fixtures/guest-sm-world01-v2/`): snapshot format 2 and keys
//!   under `reserved/` refused;
//! * `lock_sm_0_2.wasm`: the reference module of world `lock-sm@0.2.0`
//!   (`guest-sm/world02/`, package `guest-sm-world02`): shared locks, semaphores, holders, policy data;
//! * `lock_sm_0_3.wasm`: the reference module of world `lock-sm@0.3.0`
//!   (`guest-sm/world03/`): 0.2's and sessions, reentrant locks, values;
//!   what a new cluster runs;
//! * `lock_sm_0_4.wasm`: the reference module of world `lock-sm@0.4.0`
//!   (`guest-sm/world04/`): 0.3's and its election policy (priorities,
//!   sticky leadership);
//! * `chaos_guest.wasm`: the hostile test fixture (see its docs), for
//!   seeing a rejected upgrade.

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: modules DIR");
        std::process::exit(1);
    };
    let dir = std::path::PathBuf::from(dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("cannot create {}: {e}", dir.display());
        std::process::exit(1);
    }
    for (name, bytes) in [
        ("lock_sm_0_1.wasm", lockd_core::builtin::LOCK_SM),
        (
            "lock_sm_0_1_v2.wasm",
            lockd_tests::fixtures::LOCK_SM_WORLD01_V2,
        ),
        ("lock_sm_0_2.wasm", lockd_tests::fixtures::LOCK_SM_WORLD02),
        ("lock_sm_0_3.wasm", lockd_core::builtin::LOCK_SM_0_3),
        ("lock_sm_0_4.wasm", lockd_tests::fixtures::LOCK_SM_WORLD04),
        ("chaos_guest.wasm", lockd_tests::fixtures::CHAOS_GUEST),
    ] {
        let path = dir.join(name);
        if let Err(e) = std::fs::write(&path, bytes) {
            eprintln!("cannot write {}: {e}", path.display());
            std::process::exit(1);
        }
        println!(
            "{}  {}",
            lockd_core::engine::ModuleHash::of(bytes),
            path.display()
        );
    }
}
