//! Scenario files: their syntax (blocks of a command, `----` and the
//! expected actions), running one, the diff of a failure, and the test
//! that runs every file in `testdata/`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use super::{ms, Runner, Table, WaitLimits};

/// One `command` / `----` / expected block of a file.
struct Block {
    line: usize,
    command: String,
    expected: Vec<String>,
}

fn parse(text: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match lines.next() {
            Some((_, "----")) => {}
            _ => return Err(format!("line {}: `{line}` is not followed by ----", n + 1)),
        }
        let mut expected = Vec::new();
        while let Some((_, l)) = lines.peek() {
            if l.trim().is_empty() {
                break;
            }
            expected.push(l.trim_end().to_string());
            lines.next();
        }
        blocks.push(Block {
            line: n + 1,
            command: line.to_string(),
            expected,
        });
    }
    Ok(blocks)
}

/// `name k=v k=v ...`; `error=` takes the rest of the line.
pub(super) fn args(command: &str) -> (String, HashMap<String, String>) {
    let (name, rest) = command.split_once(' ').unwrap_or((command, ""));
    let mut map = HashMap::new();
    let mut rest = rest.trim();
    while !rest.is_empty() {
        if let Some(text) = rest.strip_prefix("error=") {
            map.insert("error".into(), text.to_string());
            break;
        }
        let (word, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        match word.split_once('=') {
            Some((k, v)) => map.insert(k.to_string(), v.to_string()),
            None => map.insert(word.to_string(), String::new()),
        };
        rest = tail.trim();
    }
    (name.to_string(), map)
}

/// The lines of `a` and `b` as a diff (`-` expected, `+` actual).
fn diff(a: &[String], b: &[String]) -> String {
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            let _ = writeln!(out, "   {}", a[i]);
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            let _ = writeln!(out, "  -{}", a[i]);
            i += 1;
        } else {
            let _ = writeln!(out, "  +{}", b[j]);
            j += 1;
        }
    }
    out
}

/// Run one file; returns the failures (as diffs) and the rewritten text.
fn run_file(path: &Path) -> Result<(Vec<String>, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let blocks = parse(&text)?;
    let mut runner = Runner {
        table: Table::new(1, ms(1000), WaitLimits::default()),
        now: Duration::ZERO,
        proposals: HashMap::new(),
    };
    let mut failures = Vec::new();
    let mut rewritten = String::new();
    let mut by_line: HashMap<usize, Vec<String>> = HashMap::new();
    for b in &blocks {
        let actual = runner
            .run(&b.command)
            .map_err(|e| format!("{}:{}: {e}", path.display(), b.line))?;
        if actual != b.expected {
            failures.push(format!(
                "{}:{}: {}\n{}",
                path.display(),
                b.line,
                b.command,
                diff(&b.expected, &actual)
            ));
        }
        by_line.insert(b.line, actual);
    }
    // Rewrite: keep comments and commands, replace each expected block.
    let mut lines = text.lines().enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        let _ = writeln!(rewritten, "{line}");
        if let Some(actual) = by_line.get(&(n + 1)) {
            let _ = lines.next();
            rewritten.push_str("----\n");
            while lines.peek().is_some_and(|(_, l)| !l.trim().is_empty()) {
                lines.next();
            }
            for l in actual {
                let _ = writeln!(rewritten, "{l}");
            }
        }
    }
    Ok((failures, rewritten))
}

#[test]
fn scenarios() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/table/testdata");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("testdata directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenario files in {}", dir.display());
    let rewrite = std::env::var_os("LOCKD_REWRITE").is_some();
    let mut failures = Vec::new();
    for f in &files {
        match run_file(f) {
            Ok((fails, text)) => {
                if rewrite && !fails.is_empty() {
                    std::fs::write(f, text).expect("rewrite scenario file");
                }
                failures.extend(fails);
            }
            Err(e) => failures.push(e),
        }
    }
    assert!(
        failures.is_empty() || rewrite,
        "{} scenario block(s) differ (- expected, + actual):\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}
