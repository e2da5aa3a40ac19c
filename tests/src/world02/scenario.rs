//! Scenario files for modules of world `lock-sm@0.2.0`
//! (`tests/scenarios-0.2/*.txt`). The file format (steps, `----`, expected
//! lines, `#` comments) is [`crate::scenario`]'s; the directives are these:
//!
//! | directive | input | output |
//! |---|---|---|
//! | `apply` | one entry a line, its commands separated by ` ; ` | one line an entry, its outcomes separated by ` ; ` |
//! | `policy` | one rule a line: `PREFIX [reserved] [max-lease=N] [max-holders=N] [quota=N]` (`""` is the empty prefix) | the outcome of one `set-policy` entry |
//! | `get-policy` | | the rules, one a line, or `(none)` |
//! | `holders KEY...` | | `KEY: free`, or one line a holding |
//! | `list PREFIX [after=KEY] [limit=N]` | | `KEY: TOKENS mode=M limit=N` a line, or `(none)` |
//! | `counters`, `features` | | one line |
//! | `restart` | | `ok`: snapshot, restore into a fresh instance, same hash |
//! | `restore TEXT` | | `ok` or `error: ...` (TEXT's bytes, or `hex:...`) |
//! | `migrate-format-1`, `migrate-format-2` | seed commands (`grant KEY LEASE`, `release KEY`, `expire KEY TOKEN`) | `ok` or `error: ...`: the commands run on the 0.1 module (format 1: `guest-sm`; format 2: `guest-sm-world01-v2`), its snapshot restored here |
//! | `downgrade` | | `error: ...`, or `ok` and the locks of a 0.1 module restored from the downgrade snapshot |
//!
//! Commands: `grant KEY LEASE [shared] [limit=N] [by=PRINCIPAL/OWNER]
//! [req=ID]` (default: exclusive, limit 1, anonymous, no request id),
//! `release KEY TOKEN`, `expire KEY TOKEN`. Outcomes: `granted token=T
//! lease=L [repeat]`, `busy`, `rejected policy|quota|unsupported: TEXT`,
//! `released freed=B`, `not-found`, `expired existed=B freed=B`,
//! `policy-set`, `noop` (and, for the 0.3 module, a ` count=N` where a
//! count is not a new holding's or a removal's, `rejected no-session: ID`,
//! `session-opened ...`, `session-ended ...`, `proclaimed`).
//!
//! [`run_file`] runs every step on every machine with
//! [`crate::scenario::run_file_with`]: each machine's output must be the
//! expected lines, and after every step all machines must have equal state
//! hashes (the native one also checks its incremental hash against a
//! recomputation). A refused `restore` must leave the hash as it was.

use std::path::Path;

use guest_sm_world02::{Command, Grant, HolderInfo, Mode, Outcome, PrefixPolicy, Reason};

use super::machine::ModuleMachine;
use crate::scenario::{bytes_arg, parse_entry, run_file_with, Step};

fn num<T: std::str::FromStr>(s: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    s.parse::<T>()
        .map_err(|e| format!("{s:?} is not a number: {e}"))
}

fn parse_grant(key: &str, lease: &str, opts: &[&str]) -> Result<Grant, String> {
    let mut g = Grant::exclusive(key, num(lease)?);
    for o in opts {
        match o.split_once('=') {
            None if *o == "shared" => g.mode = Mode::Shared,
            Some(("limit", n)) => g = g.limit(num(n)?),
            Some(("by", who)) => {
                let (principal, owner) = who.split_once('/').unwrap_or((who, ""));
                g = g.by(principal, owner);
            }
            Some(("req", id)) => g = g.request(id),
            _ => return Err(format!("unknown grant option {o:?}")),
        }
    }
    Ok(g)
}

/// One command of an `apply` line.
pub fn parse_command(text: &str) -> Result<Command, String> {
    let w: Vec<&str> = text.split_whitespace().collect();
    match w.as_slice() {
        ["grant", key, lease, opts @ ..] => Ok(Command::Grant(parse_grant(key, lease, opts)?)),
        ["release", key, token] => Ok(Command::release(*key, num(token)?)),
        ["expire", key, token] => Ok(Command::expire(*key, num(token)?)),
        _ => Err(format!("cannot parse command {text:?}")),
    }
}

fn prefix_text(p: &str) -> &str {
    if p.is_empty() {
        "\"\""
    } else {
        p
    }
}

/// One rule of a `policy` step.
pub fn parse_rule(line: &str) -> Result<PrefixPolicy, String> {
    let mut words = line.split_whitespace();
    let prefix = match words.next() {
        Some("\"\"") => "",
        Some(p) => p,
        None => return Err("empty rule".into()),
    };
    let mut rule = PrefixPolicy::new(prefix);
    for w in words {
        match w.split_once('=') {
            None if w == "reserved" => rule.reserved = true,
            Some(("max-lease", n)) => rule.max_lease_ms = Some(num(n)?),
            Some(("max-holders", n)) => rule.max_holders = Some(num(n)?),
            Some(("quota", n)) => rule.max_held = Some(num(n)?),
            _ => return Err(format!("unknown rule option {w:?}")),
        }
    }
    Ok(rule)
}

pub fn format_rule(r: &PrefixPolicy) -> String {
    let mut s = prefix_text(&r.prefix).to_string();
    if r.reserved {
        s.push_str(" reserved");
    }
    for (name, v) in [
        ("max-lease", r.max_lease_ms),
        ("max-holders", r.max_holders.map(u64::from)),
        ("quota", r.max_held),
    ] {
        if let Some(v) = v {
            s.push_str(&format!(" {name}={v}"));
        }
    }
    s
}

/// One outcome as a line. What 0.3 adds shows only where it is used (a
/// count other than a new holding's or a removal's, the session outcomes),
/// so every 0.2 outcome reads as it always has.
pub fn format_outcome(o: &Outcome) -> String {
    let count = |count: u32, usual: u32| {
        if count == usual {
            String::new()
        } else {
            format!(" count={count}")
        }
    };
    match o {
        Outcome::Granted {
            token,
            lease_ms,
            repeat,
            count: n,
        } => format!(
            "granted token={token} lease={lease_ms}{}{}",
            if *repeat { " repeat" } else { "" },
            count(*n, 1)
        ),
        Outcome::Rejected(Reason::Busy) => "busy".into(),
        Outcome::Rejected(Reason::Policy(m)) => format!("rejected policy: {m}"),
        Outcome::Rejected(Reason::Quota(m)) => format!("rejected quota: {m}"),
        Outcome::Rejected(Reason::Unsupported(m)) => format!("rejected unsupported: {m}"),
        Outcome::Rejected(Reason::NoSession(id)) => format!("rejected no-session: {id}"),
        Outcome::Released { freed, count: n } => {
            format!("released freed={freed}{}", count(*n, 0))
        }
        Outcome::NotFound => "not-found".into(),
        Outcome::Expired { existed, freed } => {
            format!("expired existed={existed} freed={freed}")
        }
        Outcome::PolicySet => "policy-set".into(),
        Outcome::Noop => "noop".into(),
        Outcome::SessionOpened { id, ttl_ms, repeat } => format!(
            "session-opened id={id} ttl={ttl_ms}{}",
            if *repeat { " repeat" } else { "" }
        ),
        Outcome::SessionEnded {
            existed,
            released,
            freed,
        } => {
            let refs: Vec<String> = released
                .iter()
                .map(|r| format!("{}/{}", r.key, r.token))
                .collect();
            format!(
                "session-ended existed={existed} released=[{}] freed=[{}]",
                refs.join(","),
                freed.join(",")
            )
        }
        Outcome::Proclaimed => "proclaimed".into(),
    }
}

fn format_holding(key: &str, h: &HolderInfo) -> String {
    let mode = format!("{:?}", h.mode).to_lowercase();
    let by = match &h.holder {
        Some(who) => format!("{}/{}", who.principal, who.owner),
        None => "?".into(),
    };
    let mut s = format!(
        "{key}: token={} lease={} mode={mode} limit={} by={by}",
        h.token, h.lease_ms, h.limit
    );
    if !h.request_id.is_empty() {
        s.push_str(&format!(" req={}", h.request_id));
    }
    s
}

/// A 0.1 module (`format` 1: `guest-sm`, 2: `guest-sm-world01-v2`) after the seed
/// commands of `lines`; its snapshot.
fn seed_snapshot(format: u8, lines: &[String]) -> Result<Vec<u8>, String> {
    let mut table = guest_sm::LockTable::new();
    for l in lines {
        if let Some(c) = parse_entry(l)? {
            table.apply(c);
        }
    }
    Ok(match format {
        1 => table.snapshot(),
        _ => guest_sm_world01_v2::V2 { table }.snapshot(),
    })
}

/// Run one step on one machine; returns the output lines.
pub fn run_step(m: &mut Box<dyn ModuleMachine>, step: &Step) -> Result<Vec<String>, String> {
    let name = m.name();
    let at = |msg: String| format!("line {} ({name}): {msg}", step.line);
    match step.directive.as_str() {
        "apply" => {
            let entries = step
                .input
                .iter()
                .map(|l| l.split(" ; ").map(parse_command).collect())
                .collect::<Result<Vec<Vec<Command>>, _>>()
                .map_err(at)?;
            let out = m.apply(&entries);
            Ok(out
                .iter()
                .map(|e| e.iter().map(format_outcome).collect::<Vec<_>>().join(" ; "))
                .collect())
        }
        "policy" => {
            let rules = step
                .input
                .iter()
                .map(|l| parse_rule(l))
                .collect::<Result<Vec<_>, _>>()
                .map_err(at)?;
            let out = m.apply(&[vec![Command::SetPolicy(rules)]]);
            Ok(out.iter().flatten().map(format_outcome).collect())
        }
        "get-policy" => {
            let rules = m.policy();
            if rules.is_empty() {
                return Ok(vec!["(none)".into()]);
            }
            Ok(rules.iter().map(format_rule).collect())
        }
        "holders" => Ok(step
            .args
            .iter()
            .flat_map(|k| {
                let hs = m.holders(k);
                if hs.is_empty() {
                    return vec![format!("{k}: free")];
                }
                hs.iter().map(|h| format_holding(k, h)).collect()
            })
            .collect()),
        "list" => list(m, step).map_err(at),
        "counters" => {
            let c = m.counters();
            Ok(vec![format!(
                "keys={} holders={} next-token={} policy-rules={}",
                c.keys, c.holders, c.next_token, c.policy_rules
            )])
        }
        "features" => {
            let f = m.features();
            let modes: Vec<String> = f
                .modes
                .iter()
                .map(|m| format!("{m:?}").to_lowercase())
                .collect();
            let p = f.policies;
            let kinds: Vec<&str> = [
                (p.reserved, "reserved"),
                (p.max_lease, "max-lease"),
                (p.max_holders, "max-holders"),
                (p.quota, "quota"),
            ]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .collect();
            Ok(vec![format!(
                "world={} modes={} max-limit={} policies={} idempotent={} downgrade={}",
                f.world_id,
                modes.join(","),
                f.max_limit,
                kinds.join(","),
                f.idempotent_grants,
                f.downgrade
            )])
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
            restore(m, &bytes).map_err(at)
        }
        "migrate-format-1" | "migrate-format-2" => {
            let format = if step.directive.ends_with('1') { 1 } else { 2 };
            let bytes = seed_snapshot(format, &step.input).map_err(at)?;
            restore(m, &bytes).map_err(at)
        }
        "downgrade" => match m.downgrade_snapshot() {
            Err(e) => Ok(vec![format!("error: {e}")]),
            Ok(bytes) => {
                let mut v1 = guest_sm::LockTable::new();
                v1.restore(&bytes)
                    .map_err(|e| at(format!("the 0.1 module refuses the downgrade: {e}")))?;
                let mut out = vec!["ok".to_string()];
                out.extend(
                    v1.locks(None, usize::MAX)
                        .iter()
                        .map(|h| format!("{} token={} lease_ms={}", h.key, h.token, h.lease_ms)),
                );
                out.push(format!("next-token={}", v1.stats().next_token));
                Ok(out)
            }
        },
        other => Err(at(format!("unknown directive {other:?}"))),
    }
}

fn restore(m: &mut Box<dyn ModuleMachine>, bytes: &[u8]) -> Result<Vec<String>, String> {
    let before = m.state_hash();
    match m.restore(bytes) {
        Ok(()) => Ok(vec!["ok".into()]),
        Err(e) if m.state_hash() != before => {
            Err(format!("a refused restore changed the state: {e}"))
        }
        Err(e) => Ok(vec![format!("error: {e}")]),
    }
}

fn list(m: &mut Box<dyn ModuleMachine>, step: &Step) -> Result<Vec<String>, String> {
    let mut args = step.args.iter();
    let prefix = match args.next().map(String::as_str) {
        Some("\"\"") | None => "",
        Some(p) => p,
    };
    let (mut after, mut limit) = (None, u32::MAX);
    for a in args {
        match a.split_once('=') {
            Some(("after", k)) => after = Some(k.to_string()),
            Some(("limit", n)) => limit = num(n)?,
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    let keys = m.list_keys(prefix, after.as_deref(), limit);
    if keys.is_empty() {
        return Ok(vec!["(none)".into()]);
    }
    Ok(keys
        .iter()
        .map(|k| {
            let tokens: Vec<String> = k.holders.iter().map(|h| h.token.to_string()).collect();
            let first = &k.holders[0];
            let mode = format!("{:?}", first.mode).to_lowercase();
            format!(
                "{}: {} mode={mode} limit={}",
                k.key,
                tokens.join(","),
                first.limit
            )
        })
        .collect())
}

/// Run a scenario file on every machine. Returns every mismatch found, each
/// naming the file, line and machine.
pub fn run_file(
    path: &Path,
    machines: &mut [Box<dyn ModuleMachine>],
) -> Result<usize, Vec<String>> {
    run_file_with(path, machines, |m| m.name(), |m| m.state_hash(), run_step)
}
