//! The table's commands and outcomes in the replicated types (world
//! 0.3's; the engine adapts them to older modules), and the applied lock
//! table read back for a new leader.

use super::error::ServiceError;
use super::table::{Cmd, Held, Ident, Loaded, LoadedSession, Outcome};
use lockd_core::command::{
    Command, Grant, Holder, HolderInfo, OpenSession, Outcome as Replicated, Proclaim,
};
use lockd_replication::state_machine::StateMachineStore;

/// The commands of one group.
pub(super) fn entry(commands: &[Cmd]) -> Vec<Command> {
    commands
        .iter()
        .map(|c| match c {
            Cmd::Grant { key, spec } => Command::Grant(Grant {
                key: key.clone(),
                holder: Holder {
                    principal: spec.principal.clone(),
                    owner: spec.owner.clone(),
                },
                request_id: spec.request_id.clone(),
                mode: spec.mode,
                limit: spec.limit,
                lease_ms: spec.lease_ms,
                session: spec.session,
                reentrant: spec.reentrant,
                value: spec.value.clone(),
            }),
            Cmd::Release { key, token } => Command::release(key.clone(), *token),
            Cmd::Expire { key, token } => Command::expire(key.clone(), *token),
            Cmd::OpenSession(s) => Command::OpenSession(OpenSession {
                holder: Holder {
                    principal: s.principal.clone(),
                    owner: s.owner.clone(),
                },
                request_id: s.request_id.clone(),
                ttl_ms: s.ttl_ms,
                max_sessions: s.max_sessions,
                max_holdings: s.max_holdings,
            }),
            Cmd::CloseSession { id } => Command::CloseSession(*id),
            Cmd::ExpireSession { id } => Command::ExpireSession(*id),
            Cmd::Proclaim { key, token, value } => Command::Proclaim(Proclaim {
                key: key.clone(),
                token: *token,
                value: value.clone(),
            }),
        })
        .collect()
}

/// The outcomes of a group, as the table needs them.
pub(super) fn outcomes(outcomes: Vec<Replicated>) -> Vec<Outcome> {
    outcomes
        .into_iter()
        .map(|o| match o {
            Replicated::Granted(g) => Outcome::Granted {
                token: g.token,
                lease_ms: g.lease_ms,
                repeat: g.repeat,
                count: g.count,
            },
            Replicated::Rejected(r) => Outcome::Rejected(r),
            Replicated::Released(r) => Outcome::Released {
                freed: r.freed,
                count: r.count,
            },
            Replicated::NotFound => Outcome::NotFound,
            Replicated::Expired(e) => Outcome::Expired {
                existed: e.existed,
                freed: e.freed,
            },
            Replicated::SessionOpened(o) => Outcome::SessionOpened {
                id: o.id,
                ttl_ms: o.ttl_ms,
            },
            Replicated::SessionEnded(e) => Outcome::SessionEnded {
                released: e.released.into_iter().map(|r| (r.key, r.token)).collect(),
                freed: e.freed,
            },
            Replicated::Proclaimed => Outcome::Proclaimed,
            // The table proposes no policy commands.
            Replicated::PolicySet | Replicated::Noop => Outcome::Noop,
        })
        .collect()
}

/// Every holding and every live session, in pages, from the applied
/// state.
pub(super) fn read_all(sm: &StateMachineStore) -> Result<Loaded, ServiceError> {
    const PAGE: u32 = 4096;
    let failed = |e: lockd_core::engine::EngineError| ServiceError::StateMachine(e.to_string());
    let mut locks = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = sm.list_keys("", after.as_deref(), PAGE).map_err(failed)?;
        let Some(last) = page.last() else { break };
        after = Some(last.key.clone());
        let full = page.len() == PAGE as usize;
        for k in page {
            locks.extend(k.holders.into_iter().map(|h| held(&k.key, h)));
        }
        if !full {
            break;
        }
    }
    let mut sessions = Vec::new();
    let mut after: Option<u64> = None;
    loop {
        let page = sm.list_sessions(after, PAGE).map_err(failed)?;
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        let full = page.len() == PAGE as usize;
        sessions.extend(page.into_iter().map(|s| LoadedSession {
            id: s.id,
            ttl_ms: s.ttl_ms,
            principal: s.holder.principal,
        }));
        if !full {
            break;
        }
    }
    Ok(Loaded { locks, sessions })
}

fn held(key: &str, h: HolderInfo) -> Held {
    let (principal, owner) = h
        .holder
        .as_ref()
        .map(|x| (x.principal.clone(), x.owner.clone()))
        .unwrap_or_default();
    Held {
        key: key.to_string(),
        token: h.token,
        lease_ms: h.lease_ms,
        mode: h.mode,
        limit: h.limit,
        principal,
        owner,
        session: h.session,
        count: h.count,
        ident: match h.holder {
            Some(holder) if !h.request_id.is_empty() => Some(Ident {
                principal: holder.principal,
                owner: holder.owner,
                request_id: h.request_id,
            }),
            _ => None,
        },
    }
}
