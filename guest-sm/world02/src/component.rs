//! The WebAssembly export layer (wasm builds only): `wit-bindgen` generates
//! the types of world `lockd:sm@0.2.0` and its `Guest` trait; [`Exports`]
//! implements it by converting WIT values to the logic's types and calling
//! the one [`LockState`] this instance owns. The logic is 0.3's superset:
//! a 0.2 grant reaches it with the 0.3 fields at their defaults (no
//! session, not reentrant, no value), and what 0.3 adds to answers (counts,
//! sessions, values) is dropped; on 0.2 input the counts are 1 (granted)
//! and 0 (released) and nothing else of 0.3 arises.

use std::cell::RefCell;

use lock_logic as n;
use lock_logic::{LockState, World};

wit_bindgen::generate!({
    world: "lock-sm",
    path: "../../wit/lock-sm-0.2.wit",
});

#[global_allocator]
static ALLOC: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

thread_local! {
    // wasm32-unknown-unknown is single-threaded: one instance, one state.
    static STATE: RefCell<LockState> = RefCell::new(LockState::new());
}

fn with<R>(f: impl FnOnce(&mut LockState) -> R) -> R {
    STATE.with(|s| f(&mut s.borrow_mut()))
}

impl From<Mode> for n::Mode {
    fn from(m: Mode) -> n::Mode {
        match m {
            Mode::Exclusive => n::Mode::Exclusive,
            Mode::Shared => n::Mode::Shared,
        }
    }
}

impl From<n::Mode> for Mode {
    fn from(m: n::Mode) -> Mode {
        match m {
            n::Mode::Exclusive => Mode::Exclusive,
            n::Mode::Shared => Mode::Shared,
        }
    }
}

impl From<Holder> for n::Holder {
    fn from(h: Holder) -> n::Holder {
        n::Holder::new(h.principal, h.owner)
    }
}

impl From<n::Holder> for Holder {
    fn from(h: n::Holder) -> Holder {
        Holder {
            principal: h.principal,
            owner: h.owner,
        }
    }
}

impl From<PrefixPolicy> for n::PrefixPolicy {
    fn from(p: PrefixPolicy) -> n::PrefixPolicy {
        n::PrefixPolicy {
            prefix: p.prefix,
            reserved: p.reserved,
            max_lease_ms: p.max_lease_ms,
            max_holders: p.max_holders,
            max_held: p.max_held,
        }
    }
}

impl From<n::PrefixPolicy> for PrefixPolicy {
    fn from(p: n::PrefixPolicy) -> PrefixPolicy {
        PrefixPolicy {
            prefix: p.prefix,
            reserved: p.reserved,
            max_lease_ms: p.max_lease_ms,
            max_holders: p.max_holders,
            max_held: p.max_held,
        }
    }
}

impl From<Command> for n::Command {
    fn from(c: Command) -> n::Command {
        match c {
            Command::Grant(g) => n::Command::Grant(n::Grant {
                key: g.key,
                holder: g.holder.into(),
                request_id: g.request_id,
                mode: g.mode.into(),
                limit: g.limit,
                lease_ms: g.lease_ms,
                session: 0,
                reentrant: false,
                value: String::new(),
            }),
            Command::Release(r) => n::Command::release(r.key, r.token),
            Command::Expire(r) => n::Command::expire(r.key, r.token),
            Command::SetPolicy(rules) => {
                n::Command::SetPolicy(rules.into_iter().map(Into::into).collect())
            }
        }
    }
}

/// An answer 0.2 has no form for. None arises from a 0.2 command (they
/// carry no session, reentry, value or session command); should one ever,
/// it is refused in words rather than misreported as something else.
fn not_0_2(what: &str) -> Outcome {
    Outcome::Rejected(Reason::Unsupported(format!(
        "{what} has no form in world lock-sm@0.2.0"
    )))
}

impl From<n::Outcome> for Outcome {
    fn from(o: n::Outcome) -> Outcome {
        match o {
            n::Outcome::Granted {
                token,
                lease_ms,
                repeat,
                count: _,
            } => Outcome::Granted(Granted {
                token,
                lease_ms,
                repeat,
            }),
            n::Outcome::Rejected(r) => Outcome::Rejected(match r {
                n::Reason::Busy => Reason::Busy,
                n::Reason::Policy(m) => Reason::Policy(m),
                n::Reason::Quota(m) => Reason::Quota(m),
                n::Reason::Unsupported(m) => Reason::Unsupported(m),
                n::Reason::NoSession(id) => {
                    Reason::Unsupported(format!("session {id} does not exist"))
                }
            }),
            n::Outcome::Released { freed, count: _ } => Outcome::Released(Released { freed }),
            n::Outcome::NotFound => Outcome::NotFound,
            n::Outcome::Expired { existed, freed } => Outcome::Expired(Expired { existed, freed }),
            n::Outcome::PolicySet => Outcome::PolicySet,
            n::Outcome::Noop => Outcome::Noop,
            n::Outcome::SessionOpened { .. } => not_0_2("an opened session"),
            n::Outcome::SessionEnded { .. } => not_0_2("an ended session"),
            n::Outcome::Proclaimed => not_0_2("a proclaimed value"),
        }
    }
}

impl From<n::HolderInfo> for HolderInfo {
    fn from(h: n::HolderInfo) -> HolderInfo {
        HolderInfo {
            token: h.token,
            lease_ms: h.lease_ms,
            mode: h.mode.into(),
            limit: h.limit,
            holder: h.holder.map(Into::into),
            request_id: h.request_id,
        }
    }
}

fn holders(list: Vec<n::HolderInfo>) -> Vec<HolderInfo> {
    list.into_iter().map(Into::into).collect()
}

/// The lock state as the component's exports.
pub struct Exports;

impl Guest for Exports {
    fn apply(entries: Vec<Entry>) -> Vec<Vec<Outcome>> {
        with(|s| {
            entries
                .into_iter()
                .map(|e| {
                    let e = e.into_iter().map(Into::into).collect();
                    s.apply_entry(e).into_iter().map(Into::into).collect()
                })
                .collect()
        })
    }

    fn holders(key: String) -> Vec<HolderInfo> {
        with(|s| holders(s.holders(&key)))
    }

    fn list_keys(prefix: String, after: Option<String>, limit: u32) -> Vec<KeyHolders> {
        with(|s| {
            s.list_keys(&prefix, after.as_deref(), limit)
                .into_iter()
                .map(|k| KeyHolders {
                    key: k.key,
                    holders: holders(k.holders),
                })
                .collect()
        })
    }

    fn policy() -> Vec<PrefixPolicy> {
        with(|s| s.policy().into_iter().map(Into::into).collect())
    }

    fn features() -> FeatureSet {
        let f = crate::features();
        let mut policies = PolicyKinds::empty();
        for (on, flag) in [
            (f.policies.reserved, PolicyKinds::RESERVED),
            (f.policies.max_lease, PolicyKinds::MAX_LEASE),
            (f.policies.max_holders, PolicyKinds::MAX_HOLDERS),
            (f.policies.quota, PolicyKinds::QUOTA),
        ] {
            if on {
                policies = policies | flag;
            }
        }
        FeatureSet {
            world_id: f.world_id,
            modes: f.modes.into_iter().map(Into::into).collect(),
            max_limit: f.max_limit,
            policies,
            idempotent_grants: f.idempotent_grants,
            downgrade: f.downgrade,
        }
    }

    fn counters() -> TableCounters {
        with(|s| {
            let c = s.counters();
            TableCounters {
                keys: c.keys,
                holders: c.holders,
                next_token: c.next_token,
                policy_rules: c.policy_rules,
            }
        })
    }

    fn snapshot() -> Vec<u8> {
        with(|s| s.snapshot())
    }

    fn restore(bytes: Vec<u8>) -> Result<(), String> {
        with(|s| s.restore_as(World::V02, &bytes).map_err(|e| e.to_string()))
    }

    fn downgrade_snapshot() -> Result<Vec<u8>, String> {
        with(|s| s.downgrade_snapshot().map_err(|e| e.to_string()))
    }

    fn state_hash() -> Vec<u8> {
        with(|s| s.state_hash().to_vec())
    }

    fn version() -> String {
        crate::VERSION.to_string()
    }
}

export!(Exports);
