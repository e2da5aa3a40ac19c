//! The reference module of world `lockd:sm@0.3.0` (`guest-sm/world03`) run
//! by wasmtime under the node's engine settings, as [`super::wasm`] runs
//! the 0.2 module: the node's own `Config`, fuel budget and memory limit,
//! an empty linker. Its types are the logic's, which are the superset of
//! both worlds, so [`WasmV3`] is a [`ModuleMachine`] like the 0.2 builds,
//! with the session queries besides. It lives beside the 0.2 harness
//! because the 0.3 world is 0.2's with additions, and the tests compare the
//! two.

use std::sync::OnceLock;

use guest_sm_world02 as n;
use lockd_core::engine::EngineSettings;
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store, StoreLimits, StoreLimitsBuilder};

use super::machine::ModuleMachine;

mod bindings {
    wasmtime::component::bindgen!({
        world: "lock-sm",
        path: "../wit/lock-sm-0.3.wit",
    });
}

use bindings::{LockSm, LockSmPre};

struct Loaded {
    engine: Engine,
    pre: LockSmPre<StoreLimits>,
    settings: EngineSettings,
}

/// The component bytes: the 0.3 module `lockd` has built in.
pub fn module() -> &'static [u8] {
    lockd_core::builtin::LOCK_SM_0_3
}

fn reference() -> &'static Loaded {
    static LOADED: OnceLock<Loaded> = OnceLock::new();
    LOADED.get_or_init(|| {
        let settings = EngineSettings::default();
        let engine = Engine::new(&settings.wasmtime_config()).expect("the node's config");
        let component = Component::new(&engine, module()).expect("the 0.3 module compiles");
        let pre = Linker::new(&engine)
            .instantiate_pre(&component)
            .and_then(LockSmPre::new)
            .expect("the 0.3 module is of world lock-sm@0.3.0 and imports nothing");
        Loaded {
            engine,
            pre,
            settings,
        }
    })
}

/// The number of imports of the 0.3 module (it must have none).
pub fn import_count() -> usize {
    let engine = &reference().engine;
    Component::new(engine, module())
        .expect("a component")
        .component_type()
        .imports(engine)
        .count()
}

/// An instance of the reference 0.3 module.
pub struct WasmV3 {
    store: Store<StoreLimits>,
    sm: LockSm,
    fuel: u64,
}

impl WasmV3 {
    pub fn new() -> WasmV3 {
        let loaded = reference();
        let limits = StoreLimitsBuilder::new()
            .memory_size(usize::try_from(loaded.settings.memory_limit_bytes).unwrap_or(usize::MAX))
            .build();
        let mut store = Store::new(&loaded.engine, limits);
        store.limiter(|l| l);
        let sm = loaded.pre.instantiate(&mut store).expect("instantiate");
        WasmV3 {
            store,
            sm,
            fuel: loaded.settings.fuel_per_call,
        }
    }

    /// One guest call with a full fuel budget; a trap fails the test.
    fn call<R>(
        &mut self,
        name: &str,
        f: impl FnOnce(&LockSm, &mut Store<StoreLimits>) -> wasmtime::Result<R>,
    ) -> R {
        self.store.set_fuel(self.fuel).expect("fuel is on");
        match f(&self.sm, &mut self.store) {
            Ok(r) => r,
            Err(e) => panic!("the 0.3 module failed in `{name}`: {e:#}"),
        }
    }

    pub fn session(&mut self, id: u64) -> Option<n::SessionInfo> {
        let out = self.call("session", |sm, s| sm.call_session(s, id));
        out.map(session_info)
    }

    pub fn list_sessions(&mut self, after: Option<u64>, limit: u32) -> Vec<n::SessionInfo> {
        let out = self.call("list-sessions", |sm, s| {
            sm.call_list_sessions(s, after, limit)
        });
        out.into_iter().map(session_info).collect()
    }
}

impl Default for WasmV3 {
    fn default() -> Self {
        Self::new()
    }
}

impl ModuleMachine for WasmV3 {
    fn name(&self) -> &'static str {
        "wasm 0.3"
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
            sessions: f.sessions,
            reentrant: f.reentrant,
            values: f.values,
        }
    }
    fn counters(&mut self) -> n::Counters {
        let c = self.call("counters", |sm, s| sm.call_counters(s));
        n::Counters {
            keys: c.keys,
            holders: c.holders,
            next_token: c.next_token,
            policy_rules: c.policy_rules,
            sessions: c.sessions,
            next_session: c.next_session,
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
        Box::new(WasmV3::new())
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

fn holder_to_wit(h: &n::Holder) -> bindings::Holder {
    bindings::Holder {
        principal: h.principal.clone(),
        owner: h.owner.clone(),
    }
}

fn holder_from_wit(h: bindings::Holder) -> n::Holder {
    n::Holder::new(h.principal, h.owner)
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

fn lock_ref_from_wit(r: bindings::LockRef) -> n::LockRef {
    n::LockRef {
        key: r.key,
        token: r.token,
    }
}

/// A command as the host would pass it: every field of 0.3.
pub fn to_wit(c: &n::Command) -> bindings::Command {
    use bindings::Command as C;
    match c {
        n::Command::Grant(g) => C::Grant(bindings::Grant {
            key: g.key.clone(),
            holder: holder_to_wit(&g.holder),
            request_id: g.request_id.clone(),
            mode: mode_to_wit(g.mode),
            limit: g.limit,
            lease_ms: g.lease_ms,
            session: g.session,
            reentrant: g.reentrant,
            value: g.value.clone(),
        }),
        n::Command::Release(r) => C::Release(lock_ref(r)),
        n::Command::Expire(r) => C::Expire(lock_ref(r)),
        n::Command::SetPolicy(rules) => C::SetPolicy(rules.iter().map(policy_to_wit).collect()),
        n::Command::OpenSession(o) => C::OpenSession(bindings::OpenSession {
            holder: holder_to_wit(&o.holder),
            request_id: o.request_id.clone(),
            ttl_ms: o.ttl_ms,
            max_sessions: o.max_sessions,
            max_holdings: o.max_holdings,
        }),
        n::Command::CloseSession(id) => C::CloseSession(*id),
        n::Command::ExpireSession(id) => C::ExpireSession(*id),
        n::Command::Proclaim(p) => C::Proclaim(bindings::Proclaim {
            key: p.key.clone(),
            token: p.token,
            value: p.value.clone(),
        }),
    }
}

/// An outcome as the host would receive it.
pub fn from_wit(o: bindings::Outcome) -> n::Outcome {
    use bindings::{Outcome as O, Reason as R};
    match o {
        O::Granted(g) => n::Outcome::Granted {
            token: g.token,
            lease_ms: g.lease_ms,
            repeat: g.repeat,
            count: g.count,
        },
        O::Rejected(r) => n::Outcome::Rejected(match r {
            R::Busy => n::Reason::Busy,
            R::Policy(m) => n::Reason::Policy(m),
            R::Quota(m) => n::Reason::Quota(m),
            R::Unsupported(m) => n::Reason::Unsupported(m),
            R::NoSession(id) => n::Reason::NoSession(id),
        }),
        O::Released(r) => n::Outcome::Released {
            freed: r.freed,
            count: r.count,
        },
        O::NotFound => n::Outcome::NotFound,
        O::Expired(e) => n::Outcome::Expired {
            existed: e.existed,
            freed: e.freed,
        },
        O::PolicySet => n::Outcome::PolicySet,
        O::Noop => n::Outcome::Noop,
        O::SessionOpened(s) => n::Outcome::SessionOpened {
            id: s.id,
            ttl_ms: s.ttl_ms,
            repeat: s.repeat,
        },
        O::SessionEnded(e) => n::Outcome::SessionEnded {
            existed: e.existed,
            released: e.released.into_iter().map(lock_ref_from_wit).collect(),
            freed: e.freed,
        },
        O::Proclaimed => n::Outcome::Proclaimed,
    }
}

fn holder_info(h: bindings::HolderInfo) -> n::HolderInfo {
    n::HolderInfo {
        token: h.token,
        lease_ms: h.lease_ms,
        mode: mode_from_wit(h.mode),
        limit: h.limit,
        holder: h.holder.map(holder_from_wit),
        request_id: h.request_id,
        session: h.session,
        count: h.count,
        value: h.value,
    }
}

fn session_info(s: bindings::SessionInfo) -> n::SessionInfo {
    n::SessionInfo {
        id: s.id,
        holder: holder_from_wit(s.holder),
        request_id: s.request_id,
        ttl_ms: s.ttl_ms,
        max_holdings: s.max_holdings,
        holdings: s.holdings.into_iter().map(lock_ref_from_wit).collect(),
    }
}
