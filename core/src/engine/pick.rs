//! `pick` (world 0.4): the module's election policy, which a leader asks
//! when a key frees and several candidates wait (`wit/lock-sm-0.4.wit`).
//!
//! A leader never asks the instance that applies entries: [`Picker`] keeps
//! an instance of its own, of the same module, that has applied nothing,
//! so `pick` decides from its arguments alone and the same arguments get
//! the same answer on any leader. A failure there (a trap, fuel, memory)
//! can harm nothing: the answer is "the first candidate", as with a module
//! of an older world, and the instance is made anew for the next pick. The
//! answer is never replicated; what commits is the grant the leader then
//! proposes.

use super::bindings::v04;
use super::error::EngineError;
use super::guest::{Bound, GuestInstance, GuestModule, World};
use super::hash::ModuleHash;
use super::wasm::WasmEngine;
use crate::command::{Holder, Mode};

/// The fuel one `pick` may burn (the reference module's pick of 64
/// candidates takes a small fraction of it): the leader's lock table waits
/// for the answer, so a module that loops costs it milliseconds, not the
/// seconds of an `apply`'s budget.
pub const PICK_FUEL: u64 = 20_000_000;

/// A waiting candidate for a key that frees, as `pick` sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub holder: Holder,
    pub mode: Mode,
    /// 0 unless the candidate asked for one; higher asks to go earlier.
    pub priority: u32,
}

fn holder(h: &Holder) -> v04::Holder {
    v04::Holder {
        principal: h.principal.clone(),
        owner: h.owner.clone(),
    }
}

impl GuestInstance {
    /// The module's `pick`: the index of the candidate that goes first, or
    /// `None` for the first one (always, from a module of an older world).
    /// An index out of range counts as `None`.
    pub fn pick(
        &mut self,
        key: &str,
        leaving: Option<&Holder>,
        candidates: &[Candidate],
    ) -> Result<Option<usize>, EngineError> {
        if self.world() != World::V04 {
            return Ok(None);
        }
        let leaving = leaving.map(holder);
        let list: Vec<v04::Candidate> = candidates
            .iter()
            .map(|c| v04::Candidate {
                holder: holder(&c.holder),
                mode: match c.mode {
                    Mode::Exclusive => v04::Mode::Exclusive,
                    Mode::Shared => v04::Mode::Shared,
                },
                priority: c.priority,
            })
            .collect();
        let picked = self.call("pick", |b, s| match b {
            Bound::V03(_, Some(p)) => p.call_pick(s, key, leaving.as_ref(), &list),
            _ => Err(wasmtime::Error::msg("not a module of world 0.4")),
        })?;
        Ok(picked
            .and_then(|i| usize::try_from(i).ok())
            .filter(|i| *i < candidates.len()))
    }
}

/// A leader's `pick` instance (see the module docs), with a budget of
/// [`PICK_FUEL`] per call.
#[derive(Default)]
pub struct Picker {
    instance: Option<(ModuleHash, GuestInstance)>,
    /// Picks that failed in the module (answered "the first").
    pub failures: u64,
}

impl Picker {
    /// Ask `module` (the active one) which of `candidates` goes first:
    /// `None` for the first, from a module of an older world, or when the
    /// call failed (counted in [`Picker::failures`]).
    pub fn pick(
        &mut self,
        engine: &WasmEngine,
        module: &GuestModule,
        key: &str,
        leaving: Option<&Holder>,
        candidates: &[Candidate],
    ) -> Option<usize> {
        if module.world() != World::V04 || candidates.len() < 2 {
            return None;
        }
        if self.instance.as_ref().map(|(h, _)| *h) != Some(module.hash()) {
            self.instance = None;
            match engine.instantiate(module) {
                Ok(mut i) => {
                    i.cap_fuel(PICK_FUEL);
                    self.instance = Some((module.hash(), i));
                }
                Err(e) => {
                    self.failed(&e);
                    return None;
                }
            }
        }
        let (_, instance) = self.instance.as_mut()?;
        match instance.pick(key, leaving, candidates) {
            Ok(i) => i,
            Err(e) => {
                // A failed call poisons the instance: the next pick gets
                // a new one.
                self.instance = None;
                self.failed(&e);
                None
            }
        }
    }

    fn failed(&mut self, e: &EngineError) {
        self.failures += 1;
        tracing::warn!(error = %e, "the module's pick failed; the first candidate goes first");
    }
}
