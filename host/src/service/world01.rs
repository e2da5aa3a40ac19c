//! The table's commands and outcomes on a module of world `lock-sm@0.1`
//! (SPEC §2, exactly): `Release { key, token }` becomes `Release { key }`;
//! a `GrantRejected` of a key the state machine shows free is the module's
//! policy, otherwise the key is busy; a release frees the key; an expire
//! frees it when a lock existed.

use super::error::ServiceError;
use super::table::{Cmd, Held, Outcome, Reject};
use crate::command::{Command, Outcome as Outcome01};
use crate::raft::state_machine::StateMachineStore;

/// The commands of one log entry.
pub(super) fn entry(commands: &[Cmd]) -> Vec<Command> {
    commands
        .iter()
        .map(|c| match c {
            Cmd::Grant { key, lease_ms } => Command::grant(key.clone(), *lease_ms),
            Cmd::Release { key, .. } => Command::release(key.clone()),
            Cmd::Expire { key, token } => Command::expire(key.clone(), *token),
        })
        .collect()
}

/// The outcomes of `commands`, as the table needs them.
pub(super) fn outcomes(
    sm: &StateMachineStore,
    commands: &[Cmd],
    outcomes: Vec<Outcome01>,
) -> Vec<Outcome> {
    commands
        .iter()
        .zip(outcomes)
        .map(|(cmd, o)| match (cmd, o) {
            (Cmd::Grant { lease_ms, .. }, Outcome01::Granted(token)) => Outcome::Granted {
                token,
                lease_ms: *lease_ms,
            },
            (Cmd::Grant { key, .. }, Outcome01::GrantRejected)
                if sm.get(key).ok() == Some(None) =>
            {
                Outcome::Rejected(Reject::Policy("refused by the active module".into()))
            }
            (_, Outcome01::GrantRejected) => Outcome::Rejected(Reject::Busy),
            (_, Outcome01::Granted(token)) => Outcome::Granted { token, lease_ms: 0 },
            (_, Outcome01::Released) => Outcome::Released { freed: true },
            (_, Outcome01::NotFound) => Outcome::NotFound,
            (_, Outcome01::Expired(existed)) => Outcome::Expired {
                existed,
                freed: existed,
            },
            (_, Outcome01::Noop) => Outcome::Noop,
        })
        .collect()
}

/// Every held lock, in pages, from the applied state.
pub(super) fn read_all(sm: &StateMachineStore) -> Result<Vec<Held>, ServiceError> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = sm
            .locks(after.as_deref(), 4096)
            .map_err(|e| ServiceError::StateMachine(e.to_string()))?;
        let Some(last) = page.last() else { break };
        after = Some(last.key.clone());
        let full = page.len() == 4096;
        out.extend(page.into_iter().map(|h| Held {
            key: h.key,
            token: h.token,
            lease_ms: h.lease_ms,
        }));
        if !full {
            break;
        }
    }
    Ok(out)
}
