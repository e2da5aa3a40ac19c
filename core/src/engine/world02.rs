//! The adapter that runs world-0.3 commands on a module of world 0.2 and
//! turns its answers into 0.3 values. Pure: the guest calls are in
//! [`super::calls`].
//!
//! World 0.3 is 0.2 plus sessions, reentrant grants and values
//! (`wit/lock-sm-0.3.wit`), so the mapping is one to one for everything 0.2
//! has: a command that needs none of the additions ([`Command::needs_0_3`])
//! goes to the module unchanged, and its outcome comes back with the new
//! fields at what 0.2 means (a grant's count is 1, a release removes the
//! holding: count 0). A command that needs 0.3 is answered `unsupported`,
//! naming the module, without a guest call; leaving it out of the entry
//! changes no other outcome, since such a command never grants, releases or
//! makes a key wait on 0.2.

use super::bindings::v02;
use crate::command::{
    Command, Expired, FeatureSet, Granted, Holder, HolderInfo, KeyHolders, Mode, Outcome,
    PolicyKinds, PrefixPolicy, Reason, Released, TableCounters,
};

/// The 0.2 command that runs `cmd`, or `None` when 0.2 cannot express it
/// (answer it with [`unsupported`]).
pub(super) fn plan(cmd: &Command) -> Option<v02::Command> {
    cmd.clone().into_v02()
}

/// The answer to a command [`plan`] has no 0.2 command for, naming the 0.2
/// module `version`.
pub(super) fn unsupported(cmd: &Command, version: &str) -> Outcome {
    let what = match cmd {
        Command::Grant(g) if g.session != 0 => "sessions",
        Command::Grant(g) if g.reentrant => "reentrant grants",
        Command::Grant(_) | Command::Proclaim(_) => "holding values",
        _ => "sessions",
    };
    Outcome::Rejected(Reason::Unsupported(format!(
        "the active lock module ({version}, world lock-sm@0.2.0) has no {what}; upgrade to a module of world lock-sm@0.3.0"
    )))
}

fn mode(m: v02::Mode) -> Mode {
    match m {
        v02::Mode::Exclusive => Mode::Exclusive,
        v02::Mode::Shared => Mode::Shared,
    }
}

/// The 0.3 outcome of a 0.2 outcome.
pub(super) fn outcome(o: v02::Outcome) -> Outcome {
    match o {
        v02::Outcome::Granted(g) => Outcome::Granted(Granted {
            token: g.token,
            lease_ms: g.lease_ms,
            repeat: g.repeat,
            count: 1,
        }),
        v02::Outcome::Rejected(r) => Outcome::Rejected(match r {
            v02::Reason::Busy => Reason::Busy,
            v02::Reason::Policy(why) => Reason::Policy(why),
            v02::Reason::Quota(why) => Reason::Quota(why),
            v02::Reason::Unsupported(why) => Reason::Unsupported(why),
        }),
        v02::Outcome::Released(r) => Outcome::Released(Released {
            freed: r.freed,
            count: 0,
        }),
        v02::Outcome::NotFound => Outcome::NotFound,
        v02::Outcome::Expired(e) => Outcome::Expired(Expired {
            existed: e.existed,
            freed: e.freed,
        }),
        v02::Outcome::PolicySet => Outcome::PolicySet,
        v02::Outcome::Noop => Outcome::Noop,
    }
}

pub(super) fn holder_info(h: v02::HolderInfo) -> HolderInfo {
    HolderInfo {
        token: h.token,
        lease_ms: h.lease_ms,
        mode: mode(h.mode),
        limit: h.limit,
        holder: h.holder.map(|h| Holder {
            principal: h.principal,
            owner: h.owner,
        }),
        request_id: h.request_id,
        session: 0,
        count: 1,
        value: String::new(),
    }
}

pub(super) fn key_holders(k: v02::KeyHolders) -> KeyHolders {
    KeyHolders {
        key: k.key,
        holders: k.holders.into_iter().map(holder_info).collect(),
    }
}

pub(super) fn policy(r: v02::PrefixPolicy) -> PrefixPolicy {
    PrefixPolicy {
        prefix: r.prefix,
        reserved: r.reserved,
        max_lease_ms: r.max_lease_ms,
        max_holders: r.max_holders,
        max_held: r.max_held,
    }
}

pub(super) fn features(f: v02::FeatureSet) -> FeatureSet {
    let mut policies = PolicyKinds::empty();
    for (on, flag) in [
        (v02::PolicyKinds::RESERVED, PolicyKinds::RESERVED),
        (v02::PolicyKinds::MAX_LEASE, PolicyKinds::MAX_LEASE),
        (v02::PolicyKinds::MAX_HOLDERS, PolicyKinds::MAX_HOLDERS),
        (v02::PolicyKinds::QUOTA, PolicyKinds::QUOTA),
    ] {
        if f.policies.contains(on) {
            policies |= flag;
        }
    }
    FeatureSet {
        world_id: f.world_id,
        modes: f.modes.into_iter().map(mode).collect(),
        max_limit: f.max_limit,
        policies,
        idempotent_grants: f.idempotent_grants,
        downgrade: f.downgrade,
        sessions: false,
        reentrant: false,
        values: false,
    }
}

/// A module without sessions: none live, the first id unused.
pub(super) fn counters(c: v02::TableCounters) -> TableCounters {
    TableCounters {
        keys: c.keys,
        holders: c.holders,
        next_token: c.next_token,
        policy_rules: c.policy_rules,
        sessions: 0,
        next_session: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_0_2_has_goes_through_and_what_it_lacks_is_named() {
        let plain = Command::grant("k", 10);
        assert!(plan(&plain).is_some());
        for (cmd, named) in [
            (
                {
                    let mut c = Command::grant("k", 10);
                    if let Command::Grant(g) = &mut c {
                        g.session = 7;
                    }
                    c
                },
                "sessions",
            ),
            (
                {
                    let mut c = Command::grant("k", 10);
                    if let Command::Grant(g) = &mut c {
                        g.reentrant = true;
                        g.holder.owner = "w".into();
                    }
                    c
                },
                "reentrant",
            ),
            (Command::CloseSession(3), "sessions"),
        ] {
            assert!(plan(&cmd).is_none(), "{cmd} has no 0.2 command");
            match unsupported(&cmd, "lock-sm 0.3.0") {
                Outcome::Rejected(Reason::Unsupported(why)) => {
                    assert!(
                        why.contains(named) && why.contains("lock-sm 0.3.0"),
                        "{why}"
                    );
                }
                other => panic!("expected unsupported, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_0_2_release_removes_the_holding() {
        let o = outcome(v02::Outcome::Released(v02::Released { freed: true }));
        assert_eq!(
            o,
            Outcome::Released(Released {
                freed: true,
                count: 0
            })
        );
    }
}
