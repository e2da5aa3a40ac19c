//! Data-driven scenario tests of the leader's table under simulated time,
//! in the style of etcd-io/raft's `testdata`: each file in `testdata/` is a
//! script of events, each followed by `----` and the actions the table must
//! answer with (one per line), then a blank line. Lines starting with `#`
//! are comments. Set `LOCKD_REWRITE=1` to write the actual output back
//! into the files (then read the diff before committing it).
//!
//! Commands (times in ms; the clock only moves on `tick`):
//!
//! * `leader term=T`, `follower [leader=N]`, `reload`
//! * `loaded term=T [locks=key:token:lease[:shared|exclusive:LIMIT[:OWNER:REQUEST[:PRINCIPAL]]],...] [error=TEXT]`
//! * `acquire r=R key=K lease=MS [wait=MS] [mode=shared]
//!   [limit=N|default:N] [owner=O] [request=ID] [principal=P]`
//!   (`default:N`: no limit given, N the service's fallback), `release r=R key=K token=T
//!   [by=P]`, `extend r=R key=K token=T [from=MS] [by=P]` (`by`: the
//!   caller's principal; absent: an admin, or no authentication),
//!   `gone r=R`, `undelivered key=K token=T`
//! * `commit id=P out=O,...` with outcomes `granted:T`, `repeat:T`,
//!   `busy`, `policy`, `quota`, `unsupported`, `released`,
//!   `released-full` (freed false), `expired`, `expired-none`,
//!   `not-found`, `noop`; `fail id=P [error=TEXT]`
//! * `tick [+MS]`: advance the clock, then deliver a tick; `advance +MS`:
//!   advance it without a tick (a timer that has not fired yet)
//! * `state`, `stats`: print the table (not an event)
//! * `limits per_key=N total=M`: set the bounds on waiters (not an event;
//!   the node's configuration)

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use super::{Action, Cmd, Event, Held, Ident, Outcome, Reject, Request, Spec, Table, WaitLimits};
use crate::service::error::ServiceError;
use lockd_core::command::Mode;

mod values;
use values::{held, limit, mode, outcome};

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
fn args(command: &str) -> (String, HashMap<String, String>) {
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

struct Runner {
    table: Table,
    now: Duration,
    /// The grants' leases of each proposal, to fill in `granted:T`.
    proposals: HashMap<u64, Vec<u64>>,
}

fn num(a: &HashMap<String, String>, k: &str) -> Result<u64, String> {
    let v = a.get(k).ok_or_else(|| format!("missing {k}="))?;
    v.trim_start_matches('+')
        .parse()
        .map_err(|e| format!("{k}={v}: {e}"))
}

fn opt(a: &HashMap<String, String>, k: &str) -> Result<Option<u64>, String> {
    a.contains_key(k).then(|| num(a, k)).transpose()
}

fn text(a: &HashMap<String, String>, k: &str) -> Result<String, String> {
    a.get(k).cloned().ok_or_else(|| format!("missing {k}="))
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

impl Runner {
    fn run(&mut self, command: &str) -> Result<Vec<String>, String> {
        let (name, a) = args(command);
        let event = match name.as_str() {
            "leader" => Event::BecameLeader {
                term: num(&a, "term")?,
            },
            "follower" => Event::LostLeadership {
                leader: opt(&a, "leader")?,
            },
            "reload" => Event::Reload,
            "loaded" => {
                let locks = match a.get("error") {
                    Some(e) => Err(ServiceError::StateMachine(e.clone())),
                    None => Ok(a
                        .get("locks")
                        .map(|l| l.split(',').map(held).collect())
                        .unwrap_or(Ok(Vec::new()))?),
                };
                Event::TableLoaded {
                    term: num(&a, "term")?,
                    locks,
                }
            }
            "acquire" => {
                let (limit, adopt) = limit(a.get("limit").map_or("1", |l| l.as_str()))?;
                Event::Request(Request::Acquire {
                    req: num(&a, "r")?,
                    key: text(&a, "key")?,
                    spec: Spec {
                        mode: mode(a.get("mode").map_or("exclusive", |m| m.as_str()))?,
                        limit,
                        adopt,
                        owner: a.get("owner").cloned().unwrap_or_default(),
                        request_id: a.get("request").cloned().unwrap_or_default(),
                        principal: a.get("principal").cloned().unwrap_or_default(),
                        ..Spec::exclusive(num(&a, "lease")?)
                    },
                    wait: ms(opt(&a, "wait")?.unwrap_or(0)),
                })
            }
            "release" => Event::Request(Request::Release {
                req: num(&a, "r")?,
                key: text(&a, "key")?,
                token: num(&a, "token")?,
                by: a.get("by").cloned(),
            }),
            "extend" => Event::Request(Request::Extend {
                req: num(&a, "r")?,
                key: text(&a, "key")?,
                token: num(&a, "token")?,
                from: opt(&a, "from")?.map(ms).unwrap_or(self.now),
                by: a.get("by").cloned(),
            }),
            "gone" => Event::CallerGone { req: num(&a, "r")? },
            "undelivered" => Event::Undelivered {
                key: text(&a, "key")?,
                token: num(&a, "token")?,
            },
            "commit" => {
                let id = num(&a, "id")?;
                let mut leases = self.proposals.get(&id).cloned().unwrap_or_default();
                leases.reverse();
                let out = text(&a, "out")?;
                let outcomes = out
                    .split(',')
                    .map(|o| outcome(o, &mut leases))
                    .collect::<Result<_, _>>()?;
                Event::Committed { id, outcomes }
            }
            "fail" => Event::ProposalFailed {
                id: num(&a, "id")?,
                error: ServiceError::Unavailable(
                    a.get("error")
                        .cloned()
                        .unwrap_or_else(|| "proposal failed".into()),
                ),
            },
            "tick" => {
                let by = a
                    .keys()
                    .next()
                    .map(|k| k.trim_start_matches('+').parse::<u64>());
                if let Some(by) = by {
                    self.now += ms(by.map_err(|e| format!("tick: {e}"))?);
                }
                Event::Tick
            }
            "advance" => {
                let by = a.keys().next().ok_or("advance: by how much?")?;
                let by: u64 = by
                    .trim_start_matches('+')
                    .parse()
                    .map_err(|e| format!("advance: {e}"))?;
                self.now += ms(by);
                return Ok(Vec::new());
            }
            "limits" => {
                self.table.limits = WaitLimits {
                    per_key: num(&a, "per_key")? as usize,
                    total: num(&a, "total")? as usize,
                };
                return Ok(Vec::new());
            }
            "state" => return Ok(self.state()),
            "stats" => return Ok(vec![format!("{:?}", self.table.counters())]),
            other => return Err(format!("unknown command {other:?}")),
        };
        let actions = self.table.handle(self.now, event);
        for a in &actions {
            if let Action::Propose { id, commands, .. } = a {
                let leases = commands.iter().filter_map(|c| match c {
                    Cmd::Grant { spec, .. } => Some(spec.lease_ms),
                    _ => None,
                });
                self.proposals.insert(*id, leases.collect());
            }
        }
        Ok(actions.iter().map(|a| a.to_string()).collect())
    }

    fn state(&self) -> Vec<String> {
        let t = &self.table;
        let mut out = vec![format!("now={}ms role={:?}", self.now.as_millis(), t.role)];
        let mut keys: Vec<_> = t.keys.iter().collect();
        keys.sort_by(|a, b| a.0.cmp(b.0));
        for (key, k) in keys {
            let mut line = format!("{key}:");
            for (token, h) in k.holders.iter() {
                let _ = write!(
                    line,
                    " held token={token} lease={} until={}ms",
                    h.lease_ms,
                    h.deadline.as_millis()
                );
                if h.mode != Mode::Exclusive || h.limit != 1 {
                    let _ = write!(line, " {}/{}", h.mode.as_str(), h.limit);
                }
            }
            match k.inflight {
                0 => {}
                1 => line.push_str(" busy"),
                n => {
                    let _ = write!(line, " busy={n}");
                }
            }
            for w in &k.waiters {
                if w.once {
                    let _ = write!(line, " waiter=r{}(once)", w.req);
                } else {
                    let _ = write!(line, " waiter=r{}(until={}ms)", w.req, w.until.as_millis());
                }
            }
            out.push(line);
        }
        let mut ops: Vec<_> = t.ops.keys().collect();
        ops.sort();
        out.push(format!("in flight: {ops:?}"));
        match t.next_deadline() {
            Some(d) => out.push(format!("next timer: {}ms", d.as_millis())),
            None => out.push("next timer: none".into()),
        }
        out
    }
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
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/service/table/testdata");
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
