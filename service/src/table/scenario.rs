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
//! * `loaded term=T [locks=key:token:lease[:shared|exclusive:LIMIT[:OWNER:REQUEST[:PRINCIPAL[:SESSION:COUNT]]]],...]
//!   [sessions=ID:TTL[:PRINCIPAL],...] [error=TEXT]`
//! * `acquire r=R key=K lease=MS [wait=MS] [mode=shared]
//!   [limit=N|default:N] [owner=O] [request=ID] [principal=P] [session=ID]
//!   [reentrant] [value=V] [priority=N]`
//! * sessions: `open-session r=R ttl=MS [owner=O] [principal=P]`,
//!   `close-session r=R id=ID [by=P]`, `keep-session r=R id=ID [from=MS]
//!   [by=P]`, `proclaim r=R key=K token=T value=V [by=P]`
//!   (`default:N`: no limit given, N the service's fallback), `release r=R key=K token=T
//!   [by=P]`, `extend r=R key=K token=T [from=MS] [by=P]` (`by`: the
//!   caller's principal; absent: an admin, or no authentication),
//!   `gone r=R`, `undelivered key=K token=T`
//! * `commit id=P out=O,...` with outcomes `granted:T`, `repeat:T`,
//!   `entered:T:COUNT` (a reentrant grant), `busy`, `policy`, `quota`,
//!   `unsupported`, `no-session`, `released`, `released-full` (freed
//!   false), `released-count:N` (N left), `expired`, `expired-none`,
//!   `not-found`, `noop`, `session-opened:ID:TTL`,
//!   `session-ended:K/T+K/T:FREED+FREED`, `proclaimed`; `fail id=P
//!   [error=TEXT]`
//! * `tick [+MS]`: advance the clock, then deliver a tick; `advance +MS`:
//!   advance it without a tick (a timer that has not fired yet)
//! * `state`, `stats`: print the table (not an event)
//! * `limits per_key=N total=M`: set the bounds on waiters (not an event;
//!   the node's configuration)
//! * `picker module|fifo`: who picks the waiter that goes first when a
//!   key frees: the built-in module of world 0.4 (`pick`), or nobody
//!   (FIFO, the default; not an event)

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::{Action, Cmd, Event, Held, Ident, Outcome, Reject, Request, Spec, Table, WaitLimits};
use crate::error::ServiceError;
use lockd_core::command::Mode;

mod files;
mod picker;
mod sessions;
mod values;
use files::args;
use values::{held, limit, mode, outcome};

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
                    None => Ok(super::Loaded {
                        locks: a
                            .get("locks")
                            .map(|l| l.split(',').map(held).collect())
                            .unwrap_or(Ok(Vec::new()))?,
                        sessions: sessions::loaded(&a)?,
                    }),
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
                        session: opt(&a, "session")?.unwrap_or(0),
                        reentrant: a.contains_key("reentrant"),
                        value: a.get("value").cloned().unwrap_or_default(),
                        priority: opt(&a, "priority")?.unwrap_or(0) as u32,
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
            "open-session" | "close-session" | "keep-session" | "proclaim" => {
                sessions::request(&name, &a, self.now)?
            }
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
            "picker" => {
                let name = a.keys().next().ok_or("picker: module or fifo?")?;
                self.table.picker.0 = picker::order(name)?;
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
                let _ = match h.session {
                    // Its deadline is its session's.
                    0 => write!(
                        line,
                        " held token={token} lease={} until={}ms",
                        h.lease_ms,
                        h.deadline.as_millis()
                    ),
                    _ => write!(line, " held token={token} lease={}", h.lease_ms),
                };
                if h.mode != Mode::Exclusive || h.limit != 1 {
                    let _ = write!(line, " {}/{}", h.mode.as_str(), h.limit);
                }
                if h.session != 0 {
                    let _ = write!(line, " session={}", h.session);
                }
                if h.count != 1 {
                    let _ = write!(line, " count={}", h.count);
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
        for (id, s) in &t.sessions {
            let held: Vec<String> = s.holdings.iter().map(|(k, t)| format!("{k}/{t}")).collect();
            out.push(format!(
                "session {id}: ttl={} until={}ms{} holdings=[{}]",
                s.ttl_ms,
                s.deadline.as_millis(),
                if s.ending { " ending" } else { "" },
                held.join(" ")
            ));
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
