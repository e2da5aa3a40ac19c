//! One interface over the native and the wasm build of the 0.2 module (and
//! of the 0.3 module: the logic's types are the superset of both worlds),
//! so a test drives both builds with the same commands and compares.

use guest_sm_world02::{
    Command, Counters, Features, HolderInfo, KeyHolders, LockState, Outcome, PrefixPolicy,
    SessionInfo,
};

/// A lock module of world `lock-sm@0.2.0` (or `@0.3.0`) under test, in the
/// module's own (native) types.
pub trait ModuleMachine {
    fn name(&self) -> &'static str;
    /// Apply a committed range: one list of outcomes per entry.
    fn apply(&mut self, entries: &[Vec<Command>]) -> Vec<Vec<Outcome>>;
    fn holders(&mut self, key: &str) -> Vec<HolderInfo>;
    fn list_keys(&mut self, prefix: &str, after: Option<&str>, limit: u32) -> Vec<KeyHolders>;
    fn policy(&mut self) -> Vec<PrefixPolicy>;
    fn features(&mut self) -> Features;
    fn counters(&mut self) -> Counters;
    fn snapshot(&mut self) -> Vec<u8>;
    fn restore(&mut self, bytes: &[u8]) -> Result<(), String>;
    fn downgrade_snapshot(&mut self) -> Result<Vec<u8>, String>;
    fn state_hash(&mut self) -> [u8; 32];
    fn version(&mut self) -> String;
    /// A fresh, empty machine of the same build.
    fn fresh(&self) -> Box<dyn ModuleMachine>;
}

/// A build of the lock logic compiled natively: what differs between the
/// 0.2 and the 0.3 module (the logic and its types are the same).
pub trait NativeBuild: Default + 'static {
    const NAME: &'static str;
    const VERSION: &'static str;
    fn features() -> Features;
    /// Restore the module's snapshot formats (0.2 reads 1 to 3, 0.3 also 4).
    fn restore(state: &mut LockState, bytes: &[u8]) -> Result<(), String>;
}

/// `guest-sm-world02`'s build.
#[derive(Default)]
pub struct World02;

impl NativeBuild for World02 {
    const NAME: &'static str = "native";
    const VERSION: &'static str = guest_sm_world02::VERSION;
    fn features() -> Features {
        guest_sm_world02::features()
    }
    fn restore(state: &mut LockState, bytes: &[u8]) -> Result<(), String> {
        guest_sm_world02::restore(state, bytes).map_err(|e| e.to_string())
    }
}

/// `guest-sm-world03`'s build: every snapshot format, 0.3's features.
#[derive(Default)]
pub struct World03;

impl NativeBuild for World03 {
    const NAME: &'static str = "native 0.3";
    const VERSION: &'static str = guest_sm_world03::VERSION;
    fn features() -> Features {
        guest_sm_world03::features()
    }
    fn restore(state: &mut LockState, bytes: &[u8]) -> Result<(), String> {
        state.restore(bytes).map_err(|e| e.to_string())
    }
}

/// A module compiled natively. Its state hash is checked against the hash
/// recomputed from scratch on every read, so every test that compares
/// hashes also checks the incremental construction.
#[derive(Default)]
pub struct Native<B: NativeBuild>(pub LockState, std::marker::PhantomData<B>);

/// `guest-sm-world02` compiled natively.
pub type NativeV2 = Native<World02>;
/// `guest-sm-world03` compiled natively, with the session queries besides.
pub type NativeV3 = Native<World03>;

impl NativeV3 {
    pub fn session(&mut self, id: u64) -> Option<SessionInfo> {
        self.0.session(id)
    }
    pub fn list_sessions(&mut self, after: Option<u64>, limit: u32) -> Vec<SessionInfo> {
        self.0.list_sessions(after, limit)
    }
}

impl<B: NativeBuild> ModuleMachine for Native<B> {
    fn name(&self) -> &'static str {
        B::NAME
    }
    fn apply(&mut self, entries: &[Vec<Command>]) -> Vec<Vec<Outcome>> {
        self.0.apply_entries(entries.to_vec())
    }
    fn holders(&mut self, key: &str) -> Vec<HolderInfo> {
        self.0.holders(key)
    }
    fn list_keys(&mut self, prefix: &str, after: Option<&str>, limit: u32) -> Vec<KeyHolders> {
        self.0.list_keys(prefix, after, limit)
    }
    fn policy(&mut self) -> Vec<PrefixPolicy> {
        self.0.policy()
    }
    fn features(&mut self) -> Features {
        B::features()
    }
    fn counters(&mut self) -> Counters {
        self.0.counters()
    }
    fn snapshot(&mut self) -> Vec<u8> {
        self.0.snapshot()
    }
    fn restore(&mut self, bytes: &[u8]) -> Result<(), String> {
        B::restore(&mut self.0, bytes)
    }
    fn downgrade_snapshot(&mut self) -> Result<Vec<u8>, String> {
        self.0.downgrade_snapshot().map_err(|e| e.to_string())
    }
    fn state_hash(&mut self) -> [u8; 32] {
        let hash = self.0.state_hash();
        assert_eq!(
            hash,
            self.0.recomputed_hash(),
            "the incremental state hash differs from the one computed from scratch"
        );
        hash
    }
    fn version(&mut self) -> String {
        B::VERSION.to_string()
    }
    fn fresh(&self) -> Box<dyn ModuleMachine> {
        Box::new(Native::<B>::default())
    }
}

/// One machine of each build.
pub fn both() -> Vec<Box<dyn ModuleMachine>> {
    vec![
        Box::new(NativeV2::default()),
        Box::new(super::wasm::WasmV2::new()),
    ]
}
