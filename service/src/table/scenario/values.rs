//! The scripts' values: lock modes, held locks (`loaded`), and commit
//! outcomes, each parsed from its text.

use super::*;

pub(super) fn mode(m: &str) -> Result<Mode, String> {
    match m {
        "exclusive" => Ok(Mode::Exclusive),
        "shared" => Ok(Mode::Shared),
        other => Err(format!("unknown mode {other:?}")),
    }
}

/// An acquire's `limit=`: `N`, or `default:N` (no limit given; N the
/// fallback): the spec's limit before resolving, and its `adopt`.
pub(super) fn limit(l: &str) -> Result<(u32, Option<u32>), String> {
    let n = |v: &str| v.parse::<u32>().map_err(|e| format!("limit {l:?}: {e}"));
    match l.strip_prefix("default:") {
        Some(fallback) => Ok((n(fallback)?, Some(n(fallback)?))),
        None => Ok((n(l)?, None)),
    }
}

pub(super) fn held(s: &str) -> Result<Held, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let n = |v: &str| v.parse::<u64>().map_err(|e| format!("{s}: {e}"));
    let (key, token, lease, how, who, principal, within) = match parts[..] {
        [k, t, l] => (k, t, l, None, None, "", None),
        [k, t, l, m, n] => (k, t, l, Some((m, n)), None, "", None),
        [k, t, l, m, n, o, r] => (k, t, l, Some((m, n)), Some((o, r)), "", None),
        [k, t, l, m, n, o, r, p] => (k, t, l, Some((m, n)), Some((o, r)), p, None),
        [k, t, l, m, n, o, r, p, se, c] => {
            (k, t, l, Some((m, n)), Some((o, r)), p, Some((se, c)))
        }
        _ => {
            return Err(format!(
                "lock {s:?} is not key:token:lease[:mode:limit[:owner:request[:principal[:session:count]]]]"
            ))
        }
    };
    let (session, count) = match within {
        Some((se, c)) => (n(se)?, n(c)? as u32),
        None => (0, 1),
    };
    let (mode, limit) = match how {
        Some((m, l)) => (mode(m)?, n(l)? as u32),
        None => (Mode::Exclusive, 1),
    };
    Ok(Held {
        key: key.to_string(),
        token: n(token)?,
        lease_ms: n(lease)?,
        mode,
        limit,
        ident: who
            .filter(|(_, request)| !request.is_empty())
            .map(|(owner, request)| Ident {
                principal: principal.to_string(),
                owner: owner.to_string(),
                request_id: request.to_string(),
            }),
        principal: principal.to_string(),
        owner: who.map(|(o, _)| o.to_string()).unwrap_or_default(),
        session,
        count,
    })
}

pub(super) fn outcome(o: &str, leases: &mut Vec<u64>) -> Result<Outcome, String> {
    let grant_lease = |leases: &mut Vec<u64>| leases.pop().unwrap_or(0);
    Ok(match o.split_once(':') {
        Some((g @ ("granted" | "repeat"), t)) => Outcome::Granted {
            token: t.parse().map_err(|e| format!("{o}: {e}"))?,
            lease_ms: grant_lease(leases),
            repeat: g == "repeat",
            count: 1,
        },
        Some(("entered", rest)) => {
            let (t, c) = rest
                .split_once(':')
                .ok_or(format!("{o}: entered:T:COUNT"))?;
            Outcome::Granted {
                token: t.parse().map_err(|e| format!("{o}: {e}"))?,
                lease_ms: grant_lease(leases),
                repeat: false,
                count: c.parse().map_err(|e| format!("{o}: {e}"))?,
            }
        }
        Some(("released-count", c)) => Outcome::Released {
            freed: false,
            count: c.parse().map_err(|e| format!("{o}: {e}"))?,
        },
        Some((k @ ("session-opened" | "session-ended"), rest)) => {
            super::sessions::outcome(k, rest)?
        }
        Some(_) => return Err(format!("unknown outcome {o:?}")),
        None => match o {
            "busy" | "policy" | "quota" | "unsupported" | "no-session" => {
                grant_lease(leases);
                Outcome::Rejected(match o {
                    "busy" => Reject::Busy,
                    "policy" => Reject::Policy("reserved prefix".into()),
                    "quota" => Reject::Quota("at most 2 held under q/".into()),
                    "no-session" => Reject::NoSession(0),
                    _ => Reject::Unsupported("limit 3 unlike the holders' 2".into()),
                })
            }
            "released" => Outcome::Released {
                freed: true,
                count: 0,
            },
            "released-full" => Outcome::Released {
                freed: false,
                count: 0,
            },
            "proclaimed" => Outcome::Proclaimed,
            "expired" => Outcome::Expired {
                existed: true,
                freed: true,
            },
            "expired-none" => Outcome::Expired {
                existed: false,
                freed: false,
            },
            "not-found" => Outcome::NotFound,
            "noop" => Outcome::Noop,
            _ => return Err(format!("unknown outcome {o:?}")),
        },
    })
}
