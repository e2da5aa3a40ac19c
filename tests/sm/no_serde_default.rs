//! No `#[serde(default)]` (or `skip`) on a type postcard encodes.
//!
//! postcard reads fields by position: a field missing at the end of an
//! older encoding is an error, not its default, and a skipped field shifts
//! every later one. So such an attribute on a log entry, a snapshot, a
//! peer message or a frame (the types of `core/` and `proto/`) does nothing
//! for compatibility except hide a format change; a field is only added
//! through a new version. This test reads those crates' sources and
//! refuses any.

use std::path::{Path, PathBuf};

/// The lines of `text` that put `default` or `skip` on a serde field or
/// container: `(line number, line)`.
fn offending(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let l = line.trim_start();
            l.starts_with("#[serde(")
                && ["default", "skip", "flatten"]
                    .iter()
                    .any(|word| l.contains(word))
        })
        .map(|(i, l)| (i + 1, l.trim().to_string()))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_postcard_encoded_type_has_a_serde_default() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace");
    let mut files = Vec::new();
    for crate_dir in ["core/src", "proto/src"] {
        rust_files(&workspace.join(crate_dir), &mut files);
    }
    assert!(files.len() > 20, "the sources were found: {files:?}");
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).expect("a source file");
            offending(&text)
                .into_iter()
                .map(move |(n, l)| format!("{}:{n}: {l}", f.display()))
        })
        .collect();
    assert!(
        found.is_empty(),
        "serde attributes postcard ignores:\n{}",
        found.join("\n")
    );
}

/// The negative control: the scan finds each attribute it must, and not
/// a mention in a comment.
#[test]
fn the_scan_finds_a_default_a_skip_and_a_flatten() {
    let sample = "pub struct S {\n    #[serde(default)]\n    a: u64,\n    \
                  #[serde(skip_serializing_if = \"Option::is_none\")]\n    b: Option<u8>,\n    \
                  #[serde(flatten)]\n    c: T,\n    /// `#[serde(default)]` in a doc is fine\n    \
                  #[serde(rename = \"d\")]\n    d: u8,\n}\n";
    let lines: Vec<usize> = offending(sample).into_iter().map(|(n, _)| n).collect();
    assert_eq!(lines, [2, 4, 6]);
}
