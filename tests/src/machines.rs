//! The native and the wasm build of the lock state machine behind one trait.
//!
//! Commands and outcomes are expressed in `guest-sm`'s types; the wasm
//! machine converts to and from the host's generated WIT types, which is the
//! conversion every node performs.

use std::sync::OnceLock;

use std::sync::Arc;

use guest_sm::{Command, HeldLock, LockInfo, LockTable, Outcome, TableStats};
use lockd_core::command as wit;
use lockd_core::engine::{EngineError, EngineSettings, GuestModule, WasmEngine};
use lockd_core::entry::{Entry, LogId, Payload, Request, Response, SnapshotMeta};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::Replica;
use lockd_core::snapshot::SnapshotBlob;

/// A lock state machine under test. `None` in a batch is an entry that
/// carries no lock command (Raft's blank or membership entry).
pub trait LockMachine {
    fn name(&self) -> &'static str;
    fn apply(&mut self, batch: &[Option<Command>]) -> Vec<Outcome>;
    fn get(&mut self, key: &str) -> Option<LockInfo>;
    fn locks(&mut self, after: Option<&str>, limit: u32) -> Vec<HeldLock>;
    fn stats(&mut self) -> TableStats;
    fn snapshot(&mut self) -> Vec<u8>;
    fn restore(&mut self, bytes: &[u8]) -> Result<(), String>;
    fn state_hash(&mut self) -> [u8; 32];
    /// A fresh, empty machine of the same build.
    fn fresh(&self) -> Box<dyn LockMachine>;
}

/// `guest-sm` compiled natively.
#[derive(Default)]
pub struct NativeMachine(pub LockTable);

impl LockMachine for NativeMachine {
    fn name(&self) -> &'static str {
        "native"
    }
    fn apply(&mut self, batch: &[Option<Command>]) -> Vec<Outcome> {
        batch
            .iter()
            .map(|c| c.clone().map_or(Outcome::Noop, |c| self.0.apply(c)))
            .collect()
    }
    fn get(&mut self, key: &str) -> Option<LockInfo> {
        self.0.get(key)
    }
    fn locks(&mut self, after: Option<&str>, limit: u32) -> Vec<HeldLock> {
        self.0.locks(after, limit as usize)
    }
    fn stats(&mut self) -> TableStats {
        self.0.stats()
    }
    fn snapshot(&mut self) -> Vec<u8> {
        self.0.snapshot()
    }
    fn restore(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.0.restore(bytes).map_err(|e| e.to_string())
    }
    fn state_hash(&mut self) -> [u8; 32] {
        self.0.state_hash()
    }
    fn fresh(&self) -> Box<dyn LockMachine> {
        Box::new(NativeMachine::default())
    }
}

/// The engine and the built-in module, compiled once per test binary.
pub fn builtin() -> &'static (Arc<WasmEngine>, GuestModule) {
    static BUILTIN: OnceLock<(Arc<WasmEngine>, GuestModule)> = OnceLock::new();
    BUILTIN.get_or_init(|| {
        let engine = WasmEngine::new(EngineSettings::default(), None).expect("engine");
        let module = engine
            .load(lockd_core::builtin::LOCK_SM)
            .expect("built-in module loads");
        (Arc::new(engine), module)
    })
}

/// How the wasm machines load modules: as a node does, through a
/// precompiler, which has the built-in module ready (so a snapshot restore
/// does not compile it again).
fn loader() -> Arc<Precompiler> {
    static PRECOMPILER: OnceLock<Arc<Precompiler>> = OnceLock::new();
    let p = PRECOMPILER.get_or_init(|| {
        let p = Precompiler::new(builtin().0.clone());
        p.prepare(lockd_core::builtin::LOCK_SM);
        p
    });
    p.clone()
}

/// Audit points in the wasm machine's replica: often enough that batches
/// are split at them as on a node (every 16th entry).
const AUDIT_INTERVAL: u64 = 16;

/// `guest-sm` as the wasm component, run by `lockd`'s engine through the
/// node's own [`Replica`]: commands become log entries (one per command, a
/// blank entry for `None`) and a batch is one committed range, so tests
/// drive the production apply path, batching and audit splits included.
/// Entries carry world 0.2's commands (through the engine's 0.1 adapter,
/// as on a node today) or, for [`WasmMachine::legacy`], the 0.1 commands
/// of entries written before world 0.2.
pub struct WasmMachine {
    pub replica: Replica,
    /// The index of the last entry applied.
    index: u64,
    legacy: bool,
}

impl WasmMachine {
    pub fn new() -> WasmMachine {
        let module = builtin().1.clone();
        let replica = Replica::new(0, loader(), module, AUDIT_INTERVAL).expect("instantiate");
        WasmMachine {
            replica,
            index: 0,
            legacy: false,
        }
    }

    /// A machine whose entries are in world 0.1's types.
    pub fn legacy() -> WasmMachine {
        WasmMachine {
            legacy: true,
            ..WasmMachine::new()
        }
    }

    fn entry(&mut self, command: Option<&Command>) -> Entry {
        self.index += 1;
        let log_id = LogId::new(1, 0, self.index);
        let payload = match command {
            Some(c) if self.legacy => Payload::Normal(Request::Lock(vec![to_legacy(c)])),
            Some(c) => Payload::Normal(Request::commands(vec![vec![to_wit(c)]])),
            None => Payload::Blank,
        };
        Entry { log_id, payload }
    }
}

impl Default for WasmMachine {
    fn default() -> Self {
        Self::new()
    }
}

/// A seed command in world 0.2's types. A 0.1 module's release ignores
/// the token, so any will do.
pub fn to_wit(c: &Command) -> wit::Command {
    match c {
        Command::Grant { key, lease_ms } => wit::Command::grant(key.clone(), *lease_ms),
        Command::Release { key } => wit::Command::release(key.clone(), 0),
        Command::Expire { key, token } => wit::Command::expire(key.clone(), *token),
    }
}

pub fn to_legacy(c: &Command) -> wit::legacy::Command {
    match c {
        Command::Grant { key, lease_ms } => wit::legacy::Command::Grant(wit::legacy::Grant {
            key: key.clone(),
            lease_ms: *lease_ms,
        }),
        Command::Release { key } => wit::legacy::Command::Release(key.clone()),
        Command::Expire { key, token } => wit::legacy::Command::Expire(wit::legacy::Expire {
            key: key.clone(),
            token: *token,
        }),
    }
}

/// A host outcome in the seed's terms (a rejected grant, busy or by
/// policy, is the seed's `GrantRejected`).
pub fn from_wit(o: wit::Outcome) -> Outcome {
    match o {
        wit::Outcome::Granted(g) => Outcome::Granted { token: g.token },
        wit::Outcome::Rejected(_) | wit::Outcome::PolicySet => Outcome::GrantRejected,
        wit::Outcome::Released(_) => Outcome::Released,
        wit::Outcome::NotFound => Outcome::NotFound,
        wit::Outcome::Expired(e) => Outcome::Expired { existed: e.existed },
        // The seed's commands never open sessions or set values.
        wit::Outcome::Noop
        | wit::Outcome::SessionOpened(_)
        | wit::Outcome::SessionEnded(_)
        | wit::Outcome::Proclaimed => Outcome::Noop,
    }
}

impl LockMachine for WasmMachine {
    fn name(&self) -> &'static str {
        "wasm"
    }
    fn apply(&mut self, batch: &[Option<Command>]) -> Vec<Outcome> {
        let entries: Vec<Entry> = batch.iter().map(|c| self.entry(c.as_ref())).collect();
        self.replica
            .apply(entries)
            .expect("apply")
            .into_iter()
            .map(|r| match r {
                Response::Lock(outcomes) if outcomes.iter().map(Vec::len).sum::<usize>() == 1 => {
                    from_wit(
                        outcomes
                            .into_iter()
                            .flatten()
                            .next()
                            .unwrap_or(wit::Outcome::Noop),
                    )
                }
                other => panic!("a lock entry was answered {other:?}"),
            })
            .collect()
    }
    fn get(&mut self, key: &str) -> Option<LockInfo> {
        let mut holders = self.replica.holders(key).expect("holders");
        assert!(holders.len() <= 1, "a 0.1 key has one holder at most");
        holders.pop().map(|i| LockInfo {
            token: i.token,
            lease_ms: i.lease_ms,
        })
    }
    fn locks(&mut self, after: Option<&str>, limit: u32) -> Vec<HeldLock> {
        self.replica
            .list_keys("", after, limit)
            .expect("list-keys")
            .into_iter()
            .map(|k| HeldLock {
                token: k.holders[0].token,
                lease_ms: k.holders[0].lease_ms,
                key: k.key,
            })
            .collect()
    }
    fn stats(&mut self) -> TableStats {
        let s = self.replica.counters().expect("counters");
        assert_eq!(s.keys, s.holders, "a 0.1 key has one holder");
        TableStats {
            held: s.holders,
            next_token: s.next_token,
        }
    }
    fn snapshot(&mut self) -> Vec<u8> {
        let meta = SnapshotMeta::default();
        self.replica
            .snapshot_blob(meta)
            .expect("snapshot")
            .guest_state
    }
    /// As a node installs a snapshot: a new replica from the blob, swapped
    /// in only when the restore succeeded.
    fn restore(&mut self, bytes: &[u8]) -> Result<(), String> {
        let module = &builtin().1;
        let blob = SnapshotBlob {
            meta: SnapshotMeta::default(),
            module: module.bytes().to_vec(),
            guest_state: bytes.to_vec(),
            module_since: 0,
            upgrades: Vec::new(),
            capacity: lockd_core::replica::capacity::DEFAULT_CAPACITY,
            module_keys: Default::default(),
            first_module: Some(module.hash()),
            failures: Default::default(),
            way_back: Default::default(),
            precheck: None,
        };
        match Replica::from_snapshot(0, loader(), &blob, AUDIT_INTERVAL) {
            Ok(mut installed) => {
                let hash = installed.state_hash().expect("state hash");
                self.replica.install(installed, hash);
                Ok(())
            }
            Err(EngineError::RestoreRejected(why)) => Err(why),
            Err(e) => panic!("restore failed in the engine: {e}"),
        }
    }
    fn state_hash(&mut self) -> [u8; 32] {
        self.replica.state_hash().expect("state hash")
    }
    fn fresh(&self) -> Box<dyn LockMachine> {
        Box::new(WasmMachine::new())
    }
}

/// One machine of each build.
pub fn all_machines() -> Vec<Box<dyn LockMachine>> {
    vec![
        Box::new(NativeMachine::default()),
        Box::new(WasmMachine::new()),
    ]
}
