//! The scenario commands and outcomes of sessions and values.

use std::collections::HashMap;
use std::time::Duration;

use super::{ms, num, opt, text, Event, Outcome, Request};
use crate::table::{LoadedSession, SessionSpec};

/// `open-session`, `close-session`, `keep-session`, `proclaim`.
pub(super) fn request(
    name: &str,
    a: &HashMap<String, String>,
    now: Duration,
) -> Result<Event, String> {
    let req = num(a, "r")?;
    let by = a.get("by").cloned();
    Ok(Event::Request(match name {
        "open-session" => Request::OpenSession {
            req,
            spec: SessionSpec {
                ttl_ms: num(a, "ttl")?,
                principal: a.get("principal").cloned().unwrap_or_default(),
                owner: a.get("owner").cloned().unwrap_or_default(),
                request_id: a.get("request").cloned().unwrap_or_default(),
                max_sessions: 8,
                max_holdings: 8,
            },
        },
        "close-session" => Request::CloseSession {
            req,
            id: num(a, "id")?,
            by,
        },
        "keep-session" => Request::KeepSession {
            req,
            id: num(a, "id")?,
            from: opt(a, "from")?.map(ms).unwrap_or(now),
            by,
        },
        _ => Request::Proclaim {
            req,
            key: text(a, "key")?,
            token: num(a, "token")?,
            value: text(a, "value")?,
            by,
        },
    }))
}

/// `loaded ... sessions=ID:TTL[:PRINCIPAL],...`.
pub(super) fn loaded(a: &HashMap<String, String>) -> Result<Vec<LoadedSession>, String> {
    let Some(list) = a.get("sessions") else {
        return Ok(Vec::new());
    };
    list.split(',')
        .map(|s| {
            let parts: Vec<&str> = s.split(':').collect();
            let n = |v: &str| v.parse::<u64>().map_err(|e| format!("{s}: {e}"));
            match parts[..] {
                [id, ttl] => Ok(LoadedSession {
                    id: n(id)?,
                    ttl_ms: n(ttl)?,
                    principal: String::new(),
                }),
                [id, ttl, p] => Ok(LoadedSession {
                    id: n(id)?,
                    ttl_ms: n(ttl)?,
                    principal: p.to_string(),
                }),
                _ => Err(format!("session {s:?} is not id:ttl[:principal]")),
            }
        })
        .collect()
}

/// `session-opened:ID:TTL`, `session-ended:K/T+K/T:FREED+FREED` (either
/// list may be empty).
pub(super) fn outcome(kind: &str, rest: &str) -> Result<Outcome, String> {
    let n = |v: &str| v.parse::<u64>().map_err(|e| format!("{kind}:{rest}: {e}"));
    let (a, b) = rest
        .split_once(':')
        .ok_or(format!("{kind}:{rest}: two parts, split by ':'"))?;
    if kind == "session-opened" {
        return Ok(Outcome::SessionOpened {
            id: n(a)?,
            ttl_ms: n(b)?,
        });
    }
    let released = a
        .split('+')
        .filter(|x| !x.is_empty())
        .map(|kt| {
            let (k, t) = kt.split_once('/').ok_or(format!("{kt}: K/T"))?;
            Ok((k.to_string(), n(t)?))
        })
        .collect::<Result<_, String>>()?;
    let freed = b
        .split('+')
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect();
    Ok(Outcome::SessionEnded { released, freed })
}
