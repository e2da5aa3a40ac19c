//! Every scenario in `scenarios-0.2/` against the native and the wasm build
//! of the 0.2 reference module, with equal state hashes after every step.

use lockd_tests::world02::machine::both;
use lockd_tests::world02::scenario::run_file;

#[test]
fn every_0_2_scenario_passes_on_native_and_wasm() {
    lockd_tests::scenario::run_dir("scenarios-0.2", 8, |f| run_file(f, &mut both()));
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
