//! Every scenario in `scenarios/` against the native and the wasm build.

use lockd_tests::machines::all_machines;
use lockd_tests::scenario::run_file;

#[test]
fn every_scenario_passes_on_native_and_wasm() {
    lockd_tests::scenario::run_dir("scenarios", 6, |f| run_file(f, &mut all_machines()));
}

/// The runner must be able to fail: a wrong expectation is reported with the
/// file, line and machine.
#[test]
fn a_wrong_expectation_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wrong.txt");
    std::fs::write(&path, "apply\ngrant a 1\n----\ngranted token=2\n").unwrap();
    let failures = run_file(&path, &mut all_machines()).unwrap_err();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[0].contains("wrong.txt:1 [native]") && failures[0].contains("granted token=1"),
        "{failures:?}"
    );
    assert!(failures[1].contains("[wasm]"), "{failures:?}");
}
