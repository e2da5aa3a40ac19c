//! A component of world `lockd:sm@0.2.0` run by wasmtime under the node's
//! engine settings.
//!
//! The node does not run 0.2 modules yet, so this harness stands in for its
//! engine: the wasmtime `Config` is the node's own
//! ([`EngineSettings::wasmtime_config`], not a copy), every call gets the
//! node's fuel budget, the store's memory limit is the node's, and the
//! linker is empty (a module that imports anything does not instantiate).
//! A trap or running out of fuel fails the test.

use std::sync::OnceLock;

use guest_sm_world02 as n;
use lockd_core::engine::EngineSettings;
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store, StoreLimits, StoreLimitsBuilder};

use super::machine::ModuleMachine;

mod bindings {
    wasmtime::component::bindgen!({
        world: "lock-sm",
        path: "../wit/lock-sm-0.2.wit",
    });
}

use bindings::{LockSm, LockSmPre};

struct Loaded {
    engine: Engine,
    pre: LockSmPre<StoreLimits>,
    settings: EngineSettings,
}

/// Compile `bytes` under the node's settings; errors name what is wrong.
fn load(bytes: &[u8]) -> Result<Loaded, String> {
    let settings = EngineSettings::default();
    let engine = Engine::new(&settings.wasmtime_config()).map_err(|e| format!("{e:#}"))?;
    let component = Component::new(&engine, bytes).map_err(|e| format!("{e:#}"))?;
    let imports: Vec<String> = component
        .component_type()
        .imports(&engine)
        .map(|(name, _)| name.to_string())
        .collect();
    if !imports.is_empty() {
        return Err(format!("the module imports {imports:?}"));
    }
    let linker = Linker::new(&engine);
    let pre = linker
        .instantiate_pre(&component)
        .and_then(LockSmPre::new)
        .map_err(|e| format!("not of world lock-sm@0.2.0: {e:#}"))?;
    Ok(Loaded {
        engine,
        pre,
        settings,
    })
}

/// The reference module, compiled once per test binary.
fn reference() -> &'static Loaded {
    static LOADED: OnceLock<Loaded> = OnceLock::new();
    LOADED.get_or_init(|| load(crate::fixtures::LOCK_SM_WORLD02).expect("the 0.2 module loads"))
}

/// The number of imports of a component (the 0.2 module must have none).
pub fn import_count(bytes: &[u8]) -> usize {
    let engine = &reference().engine;
    Component::new(engine, bytes)
        .expect("a component")
        .component_type()
        .imports(engine)
        .count()
}

/// An instance of the reference 0.2 module.
pub struct WasmV2 {
    store: Store<StoreLimits>,
    sm: LockSm,
    fuel: u64,
    last_fuel_used: u64,
}

impl WasmV2 {
    pub fn new() -> WasmV2 {
        let loaded = reference();
        let limits = StoreLimitsBuilder::new()
            .memory_size(usize::try_from(loaded.settings.memory_limit_bytes).unwrap_or(usize::MAX))
            .build();
        let mut store = Store::new(&loaded.engine, limits);
        store.limiter(|l| l);
        store
            .set_fuel(loaded.settings.fuel_per_call)
            .expect("fuel is on");
        let sm = loaded.pre.instantiate(&mut store).expect("instantiate");
        WasmV2 {
            store,
            sm,
            fuel: loaded.settings.fuel_per_call,
            last_fuel_used: 0,
        }
    }

    /// Fuel the last call consumed: a deterministic measure of its cost.
    pub fn last_fuel_used(&self) -> u64 {
        self.last_fuel_used
    }

    /// One guest call with a full fuel budget; a trap fails the test.
    fn call<R>(
        &mut self,
        name: &str,
        f: impl FnOnce(&LockSm, &mut Store<StoreLimits>) -> wasmtime::Result<R>,
    ) -> R {
        self.store.set_fuel(self.fuel).expect("fuel is on");
        match f(&self.sm, &mut self.store) {
            Ok(r) => {
                self.last_fuel_used = self.fuel - self.store.get_fuel().unwrap_or(0);
                r
            }
            Err(e) => panic!("the 0.2 module failed in `{name}`: {e:#}"),
        }
    }
}

impl Default for WasmV2 {
    fn default() -> Self {
        Self::new()
    }
}

impl ModuleMachine for WasmV2 {
    fn name(&self) -> &'static str {
        "wasm"
    }
    fn apply(&mut self, entries: &[Vec<n::Command>]) -> Vec<Vec<n::Outcome>> {
        let wit: Vec<Vec<bindings::Command>> = entries
            .iter()
            .map(|e| e.iter().map(to_wit).collect())
            .collect();
        let out = self.call("apply", |sm, s| sm.call_apply(s, &wit));
        out.into_iter()
            .map(|e| e.into_iter().map(from_wit).collect())
            .collect()
    }
    fn holders(&mut self, key: &str) -> Vec<n::HolderInfo> {
        let out = self.call("holders", |sm, s| sm.call_holders(s, key));
        out.into_iter().map(holder_info).collect()
    }
    fn list_keys(&mut self, prefix: &str, after: Option<&str>, limit: u32) -> Vec<n::KeyHolders> {
        let out = self.call("list-keys", |sm, s| {
            sm.call_list_keys(s, prefix, after, limit)
        });
        out.into_iter()
            .map(|k| n::KeyHolders {
                key: k.key,
                holders: k.holders.into_iter().map(holder_info).collect(),
            })
            .collect()
    }
    fn policy(&mut self) -> Vec<n::PrefixPolicy> {
        let out = self.call("policy", |sm, s| sm.call_policy(s));
        out.into_iter().map(policy_from_wit).collect()
    }
    fn features(&mut self) -> n::Features {
        let f = self.call("features", |sm, s| sm.call_features(s));
        use bindings::PolicyKinds as K;
        n::Features {
            world_id: f.world_id,
            modes: f.modes.into_iter().map(mode_from_wit).collect(),
            max_limit: f.max_limit,
            policies: n::PolicyKinds {
                reserved: f.policies.contains(K::RESERVED),
                max_lease: f.policies.contains(K::MAX_LEASE),
                max_holders: f.policies.contains(K::MAX_HOLDERS),
                quota: f.policies.contains(K::QUOTA),
            },
            idempotent_grants: f.idempotent_grants,
            downgrade: f.downgrade,
            // World 0.2 has none of 0.3's additions.
            sessions: false,
            reentrant: false,
            values: false,
        }
    }
    fn counters(&mut self) -> n::Counters {
        let c = self.call("counters", |sm, s| sm.call_counters(s));
        n::Counters {
            keys: c.keys,
            holders: c.holders,
            next_token: c.next_token,
            policy_rules: c.policy_rules,
            // What a state that never had a session counts (world 0.2 has
            // no sessions).
            sessions: 0,
            next_session: 1,
        }
    }
    fn snapshot(&mut self) -> Vec<u8> {
        self.call("snapshot", |sm, s| sm.call_snapshot(s))
    }
    fn restore(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.call("restore", |sm, s| sm.call_restore(s, bytes))
    }
    fn downgrade_snapshot(&mut self) -> Result<Vec<u8>, String> {
        self.call("downgrade-snapshot", |sm, s| sm.call_downgrade_snapshot(s))
    }
    fn state_hash(&mut self) -> [u8; 32] {
        let h = self.call("state-hash", |sm, s| sm.call_state_hash(s));
        h.try_into().expect("a 32-byte state hash")
    }
    fn version(&mut self) -> String {
        self.call("version", |sm, s| sm.call_version(s))
    }
    fn fresh(&self) -> Box<dyn ModuleMachine> {
        Box::new(WasmV2::new())
    }
}

fn mode_to_wit(m: n::Mode) -> bindings::Mode {
    match m {
        n::Mode::Exclusive => bindings::Mode::Exclusive,
        n::Mode::Shared => bindings::Mode::Shared,
    }
}

fn mode_from_wit(m: bindings::Mode) -> n::Mode {
    match m {
        bindings::Mode::Exclusive => n::Mode::Exclusive,
        bindings::Mode::Shared => n::Mode::Shared,
    }
}

fn policy_to_wit(p: &n::PrefixPolicy) -> bindings::PrefixPolicy {
    bindings::PrefixPolicy {
        prefix: p.prefix.clone(),
        reserved: p.reserved,
        max_lease_ms: p.max_lease_ms,
        max_holders: p.max_holders,
        max_held: p.max_held,
    }
}

fn policy_from_wit(p: bindings::PrefixPolicy) -> n::PrefixPolicy {
    n::PrefixPolicy {
        prefix: p.prefix,
        reserved: p.reserved,
        max_lease_ms: p.max_lease_ms,
        max_holders: p.max_holders,
        max_held: p.max_held,
    }
}

fn lock_ref(r: &n::LockRef) -> bindings::LockRef {
    bindings::LockRef {
        key: r.key.clone(),
        token: r.token,
    }
}

/// A command as the host would pass it. Only 0.2's commands have a form
/// here: a test that sends 0.3's to a 0.2 module is wrong, and fails.
pub fn to_wit(c: &n::Command) -> bindings::Command {
    match c {
        n::Command::Grant(g) if g.session != 0 || g.reentrant || !g.value.is_empty() => {
            panic!("a grant with 0.3 fields has no form in world 0.2: {g:?}")
        }
        n::Command::Grant(g) => bindings::Command::Grant(bindings::Grant {
            key: g.key.clone(),
            holder: bindings::Holder {
                principal: g.holder.principal.clone(),
                owner: g.holder.owner.clone(),
            },
            request_id: g.request_id.clone(),
            mode: mode_to_wit(g.mode),
            limit: g.limit,
            lease_ms: g.lease_ms,
        }),
        n::Command::Release(r) => bindings::Command::Release(lock_ref(r)),
        n::Command::Expire(r) => bindings::Command::Expire(lock_ref(r)),
        n::Command::SetPolicy(rules) => {
            bindings::Command::SetPolicy(rules.iter().map(policy_to_wit).collect())
        }
        other @ (n::Command::OpenSession(_)
        | n::Command::CloseSession(_)
        | n::Command::ExpireSession(_)
        | n::Command::Proclaim(_)) => {
            panic!("a 0.3 command has no form in world 0.2: {other:?}")
        }
    }
}

/// An outcome as the host would receive it.
pub fn from_wit(o: bindings::Outcome) -> n::Outcome {
    use bindings::{Outcome as O, Reason as R};
    match o {
        // World 0.2 has no counts: a holding is held once, and a release
        // removes it.
        O::Granted(g) => n::Outcome::Granted {
            token: g.token,
            lease_ms: g.lease_ms,
            repeat: g.repeat,
            count: 1,
        },
        O::Rejected(r) => n::Outcome::Rejected(match r {
            R::Busy => n::Reason::Busy,
            R::Policy(m) => n::Reason::Policy(m),
            R::Quota(m) => n::Reason::Quota(m),
            R::Unsupported(m) => n::Reason::Unsupported(m),
        }),
        O::Released(r) => n::Outcome::Released {
            freed: r.freed,
            count: 0,
        },
        O::NotFound => n::Outcome::NotFound,
        O::Expired(e) => n::Outcome::Expired {
            existed: e.existed,
            freed: e.freed,
        },
        O::PolicySet => n::Outcome::PolicySet,
        O::Noop => n::Outcome::Noop,
    }
}

fn holder_info(h: bindings::HolderInfo) -> n::HolderInfo {
    n::HolderInfo {
        token: h.token,
        lease_ms: h.lease_ms,
        mode: mode_from_wit(h.mode),
        limit: h.limit,
        holder: h.holder.map(|h| n::Holder::new(h.principal, h.owner)),
        request_id: h.request_id,
        session: 0,
        count: 1,
        value: String::new(),
    }
}
