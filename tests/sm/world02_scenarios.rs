//! Every scenario in `scenarios-0.2/` against the native and the wasm build
//! of the 0.2 reference module, with equal state hashes after every step.

use std::path::Path;

use lock_tests::world02::machine::both;
use lock_tests::world02::scenario::run_file;

#[test]
fn every_0_2_scenario_passes_on_native_and_wasm() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios-0.2");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("scenarios-0.2 dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 8,
        "expected the scenario files, found {files:?}"
    );
    let mut failures = Vec::new();
    for f in &files {
        match run_file(f, &mut both()) {
            Ok(steps) => assert!(steps > 0, "{} has no steps", f.display()),
            Err(e) => failures.extend(e),
        }
    }
    assert!(
        failures.is_empty(),
        "scenario failures:\n{}",
        failures.join("\n")
    );
}

/// The runner must be able to fail: a wrong expectation is reported with the
/// file, line and machine, and so is a directive it does not know.
#[test]
fn a_wrong_0_2_expectation_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wrong.txt");
    std::fs::write(
        &path,
        "apply\ngrant a 1 shared\n----\ngranted token=2 lease=1\n",
    )
    .unwrap();
    let failures = run_file(&path, &mut both()).unwrap_err();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[0].contains("wrong.txt:1 [native]") && failures[0].contains("granted token=1"),
        "{failures:?}"
    );
    assert!(failures[1].contains("[wasm]"), "{failures:?}");
    std::fs::write(&path, "frobnicate\n----\nok\n").unwrap();
    let failures = run_file(&path, &mut both()).unwrap_err();
    assert!(failures[0].contains("unknown directive"), "{failures:?}");
}
