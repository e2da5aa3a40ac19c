//! One interface over the native and the wasm build of the 0.2 module, so a
//! test drives both with the same commands and compares.

use guest_sm_world02::{
    Command, Counters, Features, HolderInfo, KeyHolders, LockState, Outcome, PrefixPolicy,
};

/// A lock module of world `lock-sm@0.2.0` under test, in the module's own
/// (native) types.
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

/// `guest-sm-world02` compiled natively. Its state hash is checked against the
/// hash recomputed from scratch on every read, so every test that compares
/// hashes also checks the incremental construction.
#[derive(Default)]
pub struct NativeV2(pub LockState);

impl ModuleMachine for NativeV2 {
    fn name(&self) -> &'static str {
        "native"
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
        LockState::features()
    }
    fn counters(&mut self) -> Counters {
        self.0.counters()
    }
    fn snapshot(&mut self) -> Vec<u8> {
        self.0.snapshot()
    }
    fn restore(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.0.restore(bytes).map_err(|e| e.to_string())
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
        guest_sm_world02::VERSION.to_string()
    }
    fn fresh(&self) -> Box<dyn ModuleMachine> {
        Box::new(NativeV2::default())
    }
}

/// One machine of each build.
pub fn both() -> Vec<Box<dyn ModuleMachine>> {
    vec![
        Box::new(NativeV2::default()),
        Box::new(super::wasm::WasmV2::new()),
    ]
}
