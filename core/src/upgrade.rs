//! Hot upgrade: the lock module is replaced through the log, identically on
//! every node, while the cluster keeps serving.
//!
//! An upgrade is a log entry like any other ([`crate::entry::Request::Upgrade`]),
//! carrying the new component's bytes and the hash of the module it
//! replaces. When it is applied, every node runs the same steps at the same
//! index, in [`migrate`]:
//!
//! 0. while the cluster trusts module keys, the entry must carry a
//!    signature by one of them ([`crate::signature`]);
//! 1. the `replaces` hash must name the active module (else: stale);
//! 2. load the component (compiled when the entry was *appended*, see
//!    [`crate::precompile`], so apply does not wait for the compiler);
//! 3. old module's `snapshot()` → new instance's `restore()`; from a module
//!    of world 0.2 to one of world 0.1 (a downgrade) the old module's
//!    `downgrade-snapshot()` instead, which refuses a state that 0.1 cannot
//!    represent (shared holders, semaphores), and so does the upgrade;
//! 4. the migration must keep every holding and must not move the token
//!    counter back (`counters()` before and after): fencing tokens never
//!    repeat;
//! 5. swap.
//!
//! Every step is deterministic (same bytes, same state, same fuel and memory
//! limits), so a failure at any step — invalid bytes, an import, a trap, fuel
//! or memory exhausted in `restore`, a refused snapshot — rejects the upgrade
//! on every node with the same reason, and the old module keeps serving.
//! The leader runs the same steps as a dry run before it proposes
//! (in the host), so a bad module is usually refused before it reaches the
//! log; the apply-time checks are what make it safe when it does.
//!
//! # Related
//!
//! * this module: the entries ([`UpgradeEntry`], [`ShadowEntry`], [`Genesis`]),
//!   their deterministic outcomes and records, and [`migrate`], the one
//!   migration path used by apply, the leader's dry run, shadow start and
//!   `lockd replay`.
//! * [`crate::precompile`]: compiles a module when its entry is appended.
//! * [`crate::shadow`]: a candidate module fed the committed stream beside
//!   the active one, with outcome and state-hash differences counted.
//! * [`crate::audit`]: the (index, state hash) points every node records.
//! * [`crate::signature`]: signed modules: the trusted module keys, the
//!   signed entries and the check every node makes before anything else.
//! * In the host: the leader's side (validate, then propose), the audit
//!   checker that compares with the peers, and `lockd replay`.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::command::TableCounters;
use crate::engine::{EngineError, GuestInstance, GuestModule, ModuleHash, WasmEngine, World};
use crate::signature::{ModuleSignature, SignedFor};

/// The first module of a new cluster, recorded in its log by its first
/// leader (docs/lock-modules.md, "The first module"): every replica
/// starts from the same fixed module at index 0 and swaps to this one
/// here, so a cluster keeps the logic it started with whatever a later
/// binary's built-in module is.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Genesis {
    /// The component's bytes.
    pub module: Vec<u8>,
}

impl std::fmt::Debug for Genesis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Genesis")
            .field("module", &ModuleHash::of(&self.module))
            .finish()
    }
}

/// The upgrade log entry.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpgradeEntry {
    /// The new component's bytes.
    pub module: Vec<u8>,
    /// The module this one replaces; a different active module means the
    /// entry is stale and is rejected.
    pub replaces: ModuleHash,
}

/// An upgrade entry with its module's signature.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedUpgrade {
    pub upgrade: UpgradeEntry,
    pub signature: ModuleSignature,
}

/// An upgrade carrying a version-2 signature, bound to its purpose, the
/// cluster and the module it replaces ([`lockd_proto::signature::Binding`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundUpgrade {
    pub upgrade: UpgradeEntry,
    pub signature: ModuleSignature,
    pub signed_for: SignedFor,
}

impl std::fmt::Debug for UpgradeEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "UpgradeEntry {{ module: {} ({} bytes), replaces: {} }}",
            ModuleHash::of(&self.module),
            self.module.len(),
            self.replaces
        )
    }
}

/// The shadow-mode log entries: starting a candidate at an index makes every
/// node start it from the same state.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShadowEntry {
    Start { module: Vec<u8> },
    Stop,
}

impl std::fmt::Debug for ShadowEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShadowEntry::Start { module } => write!(
                f,
                "ShadowEntry::Start {{ module: {} ({} bytes) }}",
                ModuleHash::of(module),
                module.len()
            ),
            ShadowEntry::Stop => f.write_str("ShadowEntry::Stop"),
        }
    }
}

/// What an upgrade entry did. Deterministic: every node computes the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpgradeOutcome {
    Swapped {
        module: ModuleHash,
        replaced: ModuleHash,
        version: String,
    },
    Rejected {
        module: ModuleHash,
        replaces: ModuleHash,
        reason: String,
    },
}

/// What a shadow entry did. Deterministic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShadowOutcome {
    Started { module: ModuleHash, version: String },
    Failed { module: ModuleHash, reason: String },
    Stopped { module: Option<ModuleHash> },
}

/// What applying one upgrade entry did on a node: one type for snapshots
/// and status, [`lockd_proto::UpgradeRecord`]. Snapshots encode it with
/// postcard, which writes neither field names nor serde's renames, only
/// the fields in order and an enum's variant index: the record as the
/// server's own type wrote it (`result` 0 swapped, 1 rejected, the first
/// two of [`UpgradeResult`]), byte for byte (`tests/golden/snapshot_*.hex`
/// pin it). Status shows it in JSON with its kebab-case names, as before.
/// A replica records only swapped or rejected results.
pub use lockd_proto::{UpgradeRecord, UpgradeResult};

/// Why a migration to a new module failed. The text is part of the
/// replicated outcome, so it is built only from deterministic inputs.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum MigrateError {
    /// Refused for its signature (see [`crate::signature`]), before anything else.
    #[error(transparent)]
    Signature(crate::signature::SignatureError),
    #[error("stale upgrade: it replaces module {replaces}, but the active module is {active}")]
    Stale {
        replaces: ModuleHash,
        active: ModuleHash,
    },
    #[error("the new module cannot be loaded: {0}")]
    Load(EngineError),
    #[error("the active module could not take a snapshot: {0}")]
    OldSnapshot(EngineError),
    #[error("the new module is of world {to}, which cannot represent the current state: {reason}")]
    Downgrade { to: World, reason: String },
    #[error("the new module failed to restore the current state: {0}")]
    Restore(EngineError),
    #[error("the new module failed after restore: {0}")]
    After(EngineError),
    #[error("the migration would drop held locks: {before} held before, {after} after")]
    LostLocks { before: u64, after: u64 },
    #[error("the migration would move the token counter back from {before} to {after}; fencing tokens must never repeat")]
    TokensBack { before: u64, after: u64 },
    #[error("the migration would end sessions: {before} live before, {after} after")]
    LostSessions { before: u64, after: u64 },
    #[error("the migration would move the session counter back from {before} to {after}; session ids must never repeat")]
    SessionsBack { before: u64, after: u64 },
    #[error("the active module's holdings could not be listed: {0}")]
    OldHoldings(String),
    #[error("the new module's holdings could not be listed: {0}")]
    NewHoldings(String),
    #[error("the migration would change the holding of {key:?} with token {token}: it {what}")]
    HoldingChanged {
        key: String,
        token: u64,
        what: String,
    },
    #[error("the new module's own check-invariants refused the migrated state: {0}")]
    OwnCheck(String),
    #[error("the new module's own check-invariants failed: {0}")]
    OwnCheckFailed(EngineError),
    #[error("the new module declares no version (its version is {version:?}, not `name/MAJOR.MINOR.PATCH`); only a swap marked as a rollback lets it in")]
    Unversioned { version: String },
    #[error("the new module's version {new} is not above the active module's {active}; a swap to an older or equal version must be marked as a rollback")]
    NotNewer { active: String, new: String },
    #[error("there is no previous module to return to (the active module is the cluster's first, came by a rollback, or by an upgrade written before versions)")]
    NoPrevious,
    #[error("stale rollback: it returns to module {to}, but the previous module is {previous}")]
    NotThePrevious {
        to: ModuleHash,
        previous: ModuleHash,
    },
}

/// What [`capture`] read of the active module besides its state: the
/// counters and every holding, which [`migrate`] checks the new module
/// against ([`crate::invariants`]).
#[derive(Debug, Clone)]
pub struct Before {
    pub world: World,

    pub counters: TableCounters,
    pub holdings: Vec<crate::command::KeyHolders>,
}

/// The new module, running, with the old state migrated into it.
pub struct Migrated {
    pub instance: GuestInstance,
    pub version: String,
    /// The state it was restored from: a rebuild of the instance starts
    /// there (see `crate::replica`, "Trap isolation").
    pub state: Vec<u8>,
}

/// Start `module` from `state` (what [`capture`] took for its world, with
/// the counters `before`) and check the result. The one migration path:
/// apply, the leader's dry run, shadow start and replay all use it.
pub fn migrate(
    engine: &WasmEngine,
    module: &GuestModule,
    state: &[u8],
    seen: &Before,
) -> Result<Migrated, MigrateError> {
    let before = &seen.counters;
    let mut instance = engine.instantiate(module).map_err(MigrateError::Restore)?;
    instance.restore(state).map_err(MigrateError::Restore)?;
    let after = instance.counters().map_err(MigrateError::After)?;
    if after.holders != before.holders {
        return Err(MigrateError::LostLocks {
            before: before.holders,
            after: after.holders,
        });
    }
    if after.next_token < before.next_token {
        return Err(MigrateError::TokensBack {
            before: before.next_token,
            after: after.next_token,
        });
    }
    // A 0.1 or 0.2 module reports no sessions and the first id unused, so
    // these hold trivially unless a 0.3 state is involved.
    if after.sessions != before.sessions {
        return Err(MigrateError::LostSessions {
            before: before.sessions,
            after: after.sessions,
        });
    }
    if after.next_session < before.next_session {
        return Err(MigrateError::SessionsBack {
            before: before.next_session,
            after: after.next_session,
        });
    }
    // Holding by holding: what counts cannot see (a new token, another
    // holder).
    let now = crate::invariants::all_holdings(&mut instance, after.holders)
        .map_err(MigrateError::NewHoldings)?;
    let changed = crate::invariants::first_change(&seen.holdings, seen.world, &now, module.world());
    if let Some((key, token, what)) = changed {
        return Err(MigrateError::HoldingChanged { key, token, what });
    }
    // Then the module's own rules, if it exports any.
    match instance.state_call(|i| i.check_invariants()) {
        Ok(None | Some(Ok(()))) => {}
        Ok(Some(Err(reason))) => return Err(MigrateError::OwnCheck(reason)),
        Err(e) => return Err(MigrateError::OwnCheckFailed(e)),
    }
    let version = instance.version().map_err(MigrateError::After)?;
    Ok(Migrated {
        instance,
        version,
        state: state.to_vec(),
    })
}

/// Switch to a loaded module: capture the active instance's state and
/// [`migrate`] it into `loaded`. The steps an upgrade apply, a shadow start
/// and replay share.
pub fn switch_to(
    engine: &WasmEngine,
    loaded: Result<GuestModule, EngineError>,
    active: &mut GuestInstance,
) -> Result<(GuestModule, Migrated), MigrateError> {
    let module = loaded.map_err(MigrateError::Load)?;
    let (state, before) = capture(active, module.world())?;
    let migrated = migrate(engine, &module, &state, &before)?;
    Ok((module, migrated))
}

/// Apply an upgrade entry's checks and switch: `replaces` must name the
/// active module; `load` turns the entry's bytes into a module (the
/// precompiled one on a node, a plain load in replay).
pub fn apply_upgrade(
    engine: &WasmEngine,
    entry: &UpgradeEntry,
    active_hash: ModuleHash,
    active: &mut GuestInstance,
    load: impl FnOnce(&[u8]) -> Result<GuestModule, EngineError>,
) -> Result<(GuestModule, Migrated), MigrateError> {
    if entry.replaces != active_hash {
        return Err(MigrateError::Stale {
            replaces: entry.replaces,
            active: active_hash,
        });
    }
    switch_to(engine, load(&entry.module), active)
}

/// The active module's state, as a module of world `to` can read it, and
/// what the new module must keep of it ([`Before`]): the input to
/// [`migrate`].
pub fn capture(active: &mut GuestInstance, to: World) -> Result<(Vec<u8>, Before), MigrateError> {
    let state = match (active.world(), to) {
        // A 0.3 state goes to 0.2 in its own snapshot: format 3 while no
        // 0.3 feature was used, which 0.2 reads; format 4 otherwise, which
        // 0.2 refuses, naming it (the upgrade is refused, nothing changes).
        (World::V02 | World::V03 | World::V04, World::V01) => active
            .downgrade_snapshot()
            .map_err(MigrateError::OldSnapshot)?
            .map_err(|reason| MigrateError::Downgrade { to, reason })?,
        _ => active.snapshot().map_err(MigrateError::OldSnapshot)?,
    };
    let counters = active.counters().map_err(MigrateError::OldSnapshot)?;
    let holdings = crate::invariants::all_holdings(active, counters.holders)
        .map_err(MigrateError::OldHoldings)?;
    Ok((
        state,
        Before {
            world: active.world(),
            counters,
            holdings,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Postcard writes no names: the status type writes the record as the
    /// server's own record type did before it, `result` by index.
    #[test]
    fn a_record_encodes_as_snapshots_wrote_it() {
        let mut record = UpgradeRecord {
            index: 7,
            replaces: "a".into(),
            module_hash: "b".into(),
            result: UpgradeResult::Rejected,
            version: None,
            reason: Some("r".into()),
            swap_us: 3,
        };
        let bytes = postcard::to_allocvec(&record).unwrap();
        assert_eq!(bytes, [7, 1, b'a', 1, b'b', 1, 0, 1, 1, b'r', 3]);
        record.result = UpgradeResult::Swapped;
        (record.version, record.reason) = (Some("v".into()), None);
        let bytes = postcard::to_allocvec(&record).unwrap();
        assert_eq!(bytes, [7, 1, b'a', 1, b'b', 0, 1, 1, b'v', 0, 3]);
        assert_eq!(
            postcard::from_bytes::<UpgradeRecord>(&bytes).unwrap(),
            record
        );
    }
}
