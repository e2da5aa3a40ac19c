//! The adapter that runs world-0.3 commands on a module of world 0.1 and
//! turns its answers into 0.3 outcomes. Pure: the guest calls are in
//! [`super::calls`].
//!
//! The exclusive case maps onto the seed's commands exactly
//! (docs/architecture.md, "The lock commands (world 0.1)"):
//!
//! | 0.3 command | 0.1 command | 0.1 outcome → 0.3 outcome |
//! |---|---|---|
//! | grant, exclusive, limit 1 | `Grant { key, lease_ms }` | `Granted(t)` → granted `t` with the lease asked for; `GrantRejected` → `busy` if the key was held at that point, else `policy` |
//! | release `(key, token)` | `Release { key }` | `Released` → released, freed; `NotFound` → not-found |
//! | expire `(key, token)` | `Expire { key, token }` | `Expired(e)` → expired, existed = freed = `e` |
//!
//! What 0.1 cannot express (shared mode, a limit other than 1, policy data,
//! and what 0.3 adds: sessions, reentrant grants, values)
//! is answered `unsupported`, naming the module's version, without a guest
//! call. A release names its token, which 0.1's release does not check: the
//! leader's table proposes a release only for the token that holds the key
//! with no other proposal for that key in flight, so the two agree. Holder,
//! request id and owner cannot be stored by a 0.1 module: grants are not
//! idempotent there, and holders show as unknown.

use super::bindings::v01;
use crate::command::{
    Command, Expired, FeatureSet, Granted, HolderInfo, Mode, Outcome, PolicyKinds, Reason,
    Released, TableCounters,
};

/// The 0.1 command that runs `cmd`, or `None` when 0.1 cannot express it
/// (answer it with [`unsupported`], no guest call).
pub(super) fn plan(cmd: &Command) -> Option<v01::Command> {
    match cmd {
        _ if cmd.needs_0_3() => None,
        Command::Grant(g) if g.mode == Mode::Exclusive && g.limit == 1 => {
            Some(v01::Command::Grant(v01::Grant {
                key: g.key.clone(),
                lease_ms: g.lease_ms,
            }))
        }
        Command::Release(r) => Some(v01::Command::Release(r.key.clone())),
        Command::Expire(r) => Some(v01::Command::Expire(v01::Expire {
            key: r.key.clone(),
            token: r.token,
        })),
        Command::Grant(_)
        | Command::SetPolicy(_)
        | Command::OpenSession(_)
        | Command::CloseSession(_)
        | Command::ExpireSession(_)
        | Command::Proclaim(_) => None,
    }
}

/// The answer to a command [`plan`] has no 0.1 command for, naming the
/// 0.1 module `version`.
pub(super) fn unsupported(cmd: &Command, version: &str) -> Outcome {
    let why = match cmd {
        _ if cmd.needs_0_3() => format!(
            "the active lock module ({version}, world lock-sm@0.1.0) has no sessions, reentrant grants or holding values; upgrade to a module of world lock-sm@0.3.0"
        ),
        Command::Grant(g) => format!(
            "the active lock module ({version}, world lock-sm@0.1.0) grants only exclusive locks of limit 1, not {} of limit {}; upgrade to a module of world lock-sm@0.2.0",
            g.mode.as_str(),
            g.limit
        ),
        _ => format!("the active lock module ({version}, world lock-sm@0.1.0) keeps no policy data"),
    };
    Outcome::Rejected(Reason::Unsupported(why))
}

/// The 0.3 outcome of a 0.1 outcome. `held` says whether the key was held
/// when a rejected grant was applied (see [`held_at`]); `lease_ms` is the
/// lease the grant asked for.
pub(super) fn outcome(o: v01::Outcome, lease_ms: u64, held: bool) -> Outcome {
    match o {
        v01::Outcome::Granted(token) => Outcome::Granted(Granted {
            token,
            lease_ms,
            repeat: false,
            count: 1,
        }),
        v01::Outcome::GrantRejected if held => Outcome::Rejected(Reason::Busy),
        v01::Outcome::GrantRejected => {
            Outcome::Rejected(Reason::Policy("refused by the active lock module".into()))
        }
        v01::Outcome::Released => Outcome::Released(Released {
            freed: true,
            count: 0,
        }),
        v01::Outcome::NotFound => Outcome::NotFound,
        v01::Outcome::Expired(existed) => Outcome::Expired(Expired {
            existed,
            freed: existed,
        }),
        v01::Outcome::Noop => Outcome::Noop,
    }
}

/// Whether the key of the rejected grant at `at` was held when it was
/// applied, read from the commands after it in the same call: the first
/// one on the same key that reveals the state before it (a grant that
/// succeeded: free; a release that released or an expire that removed:
/// held; a release that found nothing: free). Nothing else changes a key,
/// so with none of those the state is the state after the call: `None`,
/// ask the guest.
pub(super) fn held_at(run: &[(v01::Command, v01::Outcome)], at: usize) -> Option<bool> {
    let key = run.get(at).map(|(c, _)| key_of(c))?;
    run.iter()
        .skip(at + 1)
        .filter(|(c, _)| key_of(c) == key)
        .find_map(|(_, o)| match o {
            v01::Outcome::Granted(_) | v01::Outcome::NotFound => Some(false),
            v01::Outcome::Released | v01::Outcome::Expired(true) => Some(true),
            _ => None,
        })
}

pub(super) fn key_of(c: &v01::Command) -> &str {
    match c {
        v01::Command::Grant(g) => &g.key,
        v01::Command::Release(k) => k,
        v01::Command::Expire(e) => &e.key,
    }
}

/// A 0.1 holding as a 0.3 query shows it: holder unknown.
pub(super) fn holder_info(token: u64, lease_ms: u64) -> HolderInfo {
    HolderInfo {
        token,
        lease_ms,
        mode: Mode::Exclusive,
        limit: 1,
        holder: None,
        request_id: String::new(),
        session: 0,
        count: 1,
        value: String::new(),
    }
}

/// What a 0.1 module supports.
pub(super) fn features() -> FeatureSet {
    FeatureSet {
        world_id: super::World::V01.id().to_string(),
        modes: vec![Mode::Exclusive],
        max_limit: 1,
        policies: PolicyKinds::empty(),
        idempotent_grants: false,
        downgrade: false,
        sessions: false,
        reentrant: false,
        values: false,
    }
}

pub(super) fn counters(s: &v01::TableStats) -> TableCounters {
    TableCounters {
        keys: s.held,
        holders: s.held,
        next_token: s.next_token,
        policy_rules: 0,
        sessions: 0,
        next_session: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(key: &str) -> v01::Command {
        v01::Command::Grant(v01::Grant {
            key: key.into(),
            lease_ms: 1,
        })
    }

    #[test]
    fn a_rejected_grant_is_busy_when_a_later_command_shows_the_key_held() {
        let run = vec![
            (grant("a"), v01::Outcome::GrantRejected),
            (grant("b"), v01::Outcome::Granted(3)),
            (v01::Command::Release("a".into()), v01::Outcome::Released),
        ];
        assert_eq!(held_at(&run, 0), Some(true));
    }

    #[test]
    fn a_rejected_grant_on_a_key_a_later_grant_takes_is_policy() {
        let run = vec![
            (grant("a"), v01::Outcome::GrantRejected),
            (grant("a"), v01::Outcome::GrantRejected),
            (grant("a"), v01::Outcome::Granted(4)),
        ];
        assert_eq!(held_at(&run, 0), Some(false));
        assert_eq!(held_at(&run, 1), Some(false));
    }

    #[test]
    fn without_later_evidence_the_guest_is_asked() {
        let run = vec![
            (grant("a"), v01::Outcome::GrantRejected),
            (
                v01::Command::Expire(v01::Expire {
                    key: "a".into(),
                    token: 9,
                }),
                v01::Outcome::Expired(false),
            ),
            (grant("b"), v01::Outcome::Granted(3)),
        ];
        assert_eq!(held_at(&run, 0), None);
    }

    #[test]
    fn unsupported_options_name_the_module() {
        let mut cmd = Command::grant("k", 10);
        if let Command::Grant(g) = &mut cmd {
            g.mode = Mode::Shared;
        }
        assert!(plan(&cmd).is_none(), "a shared grant has no 0.1 command");
        match unsupported(&cmd, "lock-sm 9.9") {
            Outcome::Rejected(Reason::Unsupported(why)) => {
                assert!(why.contains("lock-sm 9.9"), "{why}");
                assert!(why.contains("shared"), "{why}");
            }
            other => panic!("expected unsupported, got {other:?}"),
        }
    }
}
