//! The table's commands and outcomes in the replicated types (world
//! 0.2's; the engine adapts them to a 0.1 module), and the applied lock
//! table read back for a new leader.

use super::error::ServiceError;
use super::table::{Cmd, Held, Ident, Outcome};
use crate::raft::state_machine::StateMachineStore;
use lockd_core::command::{Command, Grant, Holder, Outcome as Replicated};

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
            }),
            Cmd::Release { key, token } => Command::release(key.clone(), *token),
            Cmd::Expire { key, token } => Command::expire(key.clone(), *token),
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
            },
            Replicated::Rejected(r) => Outcome::Rejected(r),
            Replicated::Released(r) => Outcome::Released { freed: r.freed },
            Replicated::NotFound => Outcome::NotFound,
            Replicated::Expired(e) => Outcome::Expired {
                existed: e.existed,
                freed: e.freed,
            },
            Replicated::PolicySet | Replicated::Noop => Outcome::Noop,
        })
        .collect()
}

/// Every holding, in pages, from the applied state.
pub(super) fn read_all(sm: &StateMachineStore) -> Result<Vec<Held>, ServiceError> {
    const PAGE: u32 = 4096;
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = sm
            .list_keys("", after.as_deref(), PAGE)
            .map_err(|e| ServiceError::StateMachine(e.to_string()))?;
        let Some(last) = page.last() else { break };
        after = Some(last.key.clone());
        let full = page.len() == PAGE as usize;
        for k in page {
            out.extend(k.holders.into_iter().map(|h| {
                Held {
                    key: k.key.clone(),
                    token: h.token,
                    lease_ms: h.lease_ms,
                    mode: h.mode,
                    limit: h.limit,
                    principal: h
                        .holder
                        .as_ref()
                        .map(|x| x.principal.clone())
                        .unwrap_or_default(),
                    ident: match h.holder {
                        Some(holder) if !h.request_id.is_empty() => Some(Ident {
                            principal: holder.principal,
                            owner: holder.owner,
                            request_id: h.request_id,
                        }),
                        _ => None,
                    },
                }
            }));
        }
        if !full {
            break;
        }
    }
    Ok(out)
}
