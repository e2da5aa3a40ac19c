//! Data-driven scenarios: a scenario is data, not code.
//!
//! A file is a sequence of steps separated by blank lines. Each step is a
//! directive line, optional input lines, a `----` line, and the expected
//! output (lines up to the next blank line). `#` starts a comment line.
//!
//! ```text
//! # a held key is rejected
//! apply
//! grant a 1000
//! grant a 500
//! ----
//! granted token=1
//! grant-rejected
//! ```
//!
//! Directives:
//!
//! | directive | input | output |
//! |---|---|---|
//! | `apply` | one entry a line: `grant KEY LEASE_MS`, `release KEY`, `expire KEY TOKEN`, `blank` (an entry with no lock command) | one outcome a line |
//! | `get KEY...` | | `KEY: held token=T lease_ms=L` or `KEY: free` |
//! | `locks [after=KEY] [limit=N]` | | `KEY token=T lease_ms=L` a line, or `(none)` |
//! | `stats` | | `held=N next-token=T` |
//! | `restart` | | `ok`: snapshot, then restore into a fresh instance |
//! | `restore TEXT` | | `ok` or `error: ...`: restore TEXT's bytes |
//!
//! [`run_file`] runs every step on every machine (native and wasm), compares
//! each machine's output with the expected output, and after every step
//! requires all machines to have the same state hash. A `restart` must keep
//! the hash; a refused `restore` must leave it unchanged.

use std::path::{Path, PathBuf};

use guest_sm::{Command, Outcome};

use crate::machines::LockMachine;

#[derive(Debug, Clone)]
pub struct Step {
    /// 1-based line of the directive in the file.
    pub line: usize,
    pub directive: String,
    pub args: Vec<String>,
    pub input: Vec<String>,
    pub expected: Vec<String>,
}

pub fn parse(text: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace().map(str::to_string);
        let directive = words.next().unwrap_or_default();
        let args = words.collect();
        let mut input = Vec::new();
        loop {
            match lines.next() {
                Some((_, l)) if l.trim() == "----" => break,
                Some((m, l)) if l.trim().is_empty() => {
                    return Err(format!("line {}: step has no ---- line", m + 1))
                }
                Some((_, l)) => input.push(l.trim().to_string()),
                None => return Err(format!("line {}: step has no ---- line", n + 1)),
            }
        }
        let mut expected = Vec::new();
        while let Some((_, l)) = lines.peek() {
            if l.trim().is_empty() {
                break;
            }
            expected.push(l.trim().to_string());
            lines.next();
        }
        steps.push(Step {
            line: n + 1,
            directive,
            args,
            input,
            expected,
        });
    }
    Ok(steps)
}

/// Parse one input line of `apply`; `None` is a blank entry.
pub fn parse_entry(line: &str) -> Result<Option<Command>, String> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let num = |s: &str| {
        s.parse::<u64>()
            .map_err(|e| format!("{line:?}: {s:?} is not a number: {e}"))
    };
    match w.as_slice() {
        ["grant", key, lease] => Ok(Some(Command::Grant {
            key: key.to_string(),
            lease_ms: num(lease)?,
        })),
        ["release", key] => Ok(Some(Command::Release {
            key: key.to_string(),
        })),
        ["expire", key, token] => Ok(Some(Command::Expire {
            key: key.to_string(),
            token: num(token)?,
        })),
        ["blank"] => Ok(None),
        _ => Err(format!("cannot parse entry {line:?}")),
    }
}

pub fn format_outcome(o: &Outcome) -> String {
    match o {
        Outcome::Granted { token } => format!("granted token={token}"),
        Outcome::GrantRejected => "grant-rejected".into(),
        Outcome::Released => "released".into(),
        Outcome::NotFound => "not-found".into(),
        Outcome::Expired { existed } => format!("expired existed={existed}"),
        Outcome::Noop => "noop".into(),
    }
}

/// Run one step on one machine; returns the output lines.
pub fn run_step(m: &mut Box<dyn LockMachine>, step: &Step) -> Result<Vec<String>, String> {
    let name = m.name();
    let at = |msg: String| format!("line {} ({name}): {msg}", step.line);
    match step.directive.as_str() {
        "apply" => {
            let batch = step
                .input
                .iter()
                .map(|l| parse_entry(l))
                .collect::<Result<Vec<_>, _>>()
                .map_err(at)?;
            Ok(m.apply(&batch).iter().map(format_outcome).collect())
        }
        "get" => Ok(step
            .args
            .iter()
            .map(|k| match m.get(k) {
                Some(i) => format!("{k}: held token={} lease_ms={}", i.token, i.lease_ms),
                None => format!("{k}: free"),
            })
            .collect()),
        "locks" => {
            let mut after = None;
            let mut limit = u32::MAX;
            for a in &step.args {
                match a.split_once('=') {
                    Some(("after", k)) => after = Some(k.to_string()),
                    Some(("limit", n)) => {
                        limit = n.parse().map_err(|e| at(format!("bad limit: {e}")))?
                    }
                    _ => return Err(at(format!("unknown argument {a:?}"))),
                }
            }
            let locks = m.locks(after.as_deref(), limit);
            if locks.is_empty() {
                return Ok(vec!["(none)".into()]);
            }
            Ok(locks
                .iter()
                .map(|h| format!("{} token={} lease_ms={}", h.key, h.token, h.lease_ms))
                .collect())
        }
        "stats" => {
            let s = m.stats();
            Ok(vec![format!("held={} next-token={}", s.held, s.next_token)])
        }
        "restart" => {
            let before = m.state_hash();
            let snap = m.snapshot();
            let mut fresh = m.fresh();
            fresh
                .restore(&snap)
                .map_err(|e| at(format!("restore of own snapshot refused: {e}")))?;
            if fresh.state_hash() != before {
                return Err(at("state hash changed across snapshot/restore".into()));
            }
            *m = fresh;
            Ok(vec!["ok".into()])
        }
        "restore" => {
            let bytes = bytes_arg(&step.args).map_err(at)?;
            let before = m.state_hash();
            match m.restore(&bytes) {
                Ok(()) => Ok(vec!["ok".into()]),
                Err(e) => {
                    if m.state_hash() != before {
                        return Err(at("a refused restore changed the state".into()));
                    }
                    Ok(vec![format!("error: {e}")])
                }
            }
        }
        other => Err(at(format!("unknown directive {other:?}"))),
    }
}

/// The bytes a `restore` step names: its arguments as text, or `hex:...`.
pub fn bytes_arg(args: &[String]) -> Result<Vec<u8>, String> {
    let text = args.join(" ");
    match text.strip_prefix("hex:") {
        Some(h) => hex::decode(h).map_err(|e| format!("bad hex: {e}")),
        None => Ok(text.into_bytes()),
    }
}

/// Run a scenario file on every machine in `machines`. Returns every
/// mismatch found, each naming the file, line and machine.
pub fn run_file(path: &Path, machines: &mut [Box<dyn LockMachine>]) -> Result<usize, Vec<String>> {
    run_file_with(path, machines, |m| m.name(), |m| m.state_hash(), run_step)
}

/// The runner for machines of any world: `run_step` runs one step on one
/// machine; after every step all machines must have the same state hash.
pub fn run_file_with<M: ?Sized>(
    path: &Path,
    machines: &mut [Box<M>],
    name_of: impl Fn(&M) -> &'static str,
    state_hash: impl Fn(&mut M) -> [u8; 32],
    run_step: impl Fn(&mut Box<M>, &Step) -> Result<Vec<String>, String>,
) -> Result<usize, Vec<String>> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| vec![format!("{name}: {e}")])?;
    let steps = parse(&text).map_err(|e| vec![format!("{name}: {e}")])?;
    let mut failures = Vec::new();
    for step in &steps {
        for m in machines.iter_mut() {
            match run_step(m, step) {
                Ok(got) if got == step.expected => {}
                Ok(got) => failures.push(format!(
                    "{name}:{} [{}] `{} {}`\n  expected: {:?}\n  got:      {:?}",
                    step.line,
                    name_of(m),
                    step.directive,
                    step.args.join(" "),
                    step.expected,
                    got
                )),
                Err(e) => failures.push(format!("{name}: {e}")),
            }
        }
        let hashes: Vec<_> = machines
            .iter_mut()
            .map(|m| (name_of(m), hex::encode(state_hash(m))))
            .collect();
        if hashes.windows(2).any(|w| w[0].1 != w[1].1) {
            failures.push(format!(
                "{name}:{}: state hashes differ after this step: {hashes:?}",
                step.line
            ));
        }
        if !failures.is_empty() {
            break;
        }
    }
    if failures.is_empty() {
        Ok(steps.len())
    } else {
        Err(failures)
    }
}

/// Run every `*.txt` scenario in `dir` (under the test crate) with `run`,
/// in name order; panics listing every failure, or when fewer than
/// `at_least` files are found or a file has no steps.
pub fn run_dir(
    dir: &str,
    at_least: usize,
    mut run: impl FnMut(&Path) -> Result<usize, Vec<String>>,
) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(
        files.len() >= at_least,
        "expected the scenario files, found {files:?}"
    );
    let mut failures = Vec::new();
    for f in &files {
        match run(f) {
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
