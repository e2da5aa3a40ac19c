//! The apply calls of a [`GuestInstance`], in world 0.3's types whatever
//! the module's world: a 0.3 module is called directly, a 0.2 module
//! through the adapter in [`super::world02`], a 0.1 module through the one
//! in [`super::world01`]. The read-only calls are in [`super::queries`].

use wasmtime::Store;

use super::bindings::{v01, v02, v03};
use super::error::EngineError;
use super::guest::{Bound, GuestInstance, World};
use super::store::StoreState;
use super::{world01, world02};
use crate::command::{Command, Outcome};

pub(super) type Call<'a, B, R> =
    Box<dyn FnOnce(&B, &mut Store<StoreState>) -> wasmtime::Result<R> + 'a>;

impl GuestInstance {
    /// A call of a world-0.3 export.
    pub(super) fn v03<R>(
        &mut self,
        name: &'static str,
        f: Call<'_, v03::LockSm, R>,
    ) -> Result<R, EngineError> {
        self.call(name, |b, s| match b {
            Bound::V03(sm, _) => f(sm, s),
            _ => Err(wasmtime::Error::msg("not a module of world 0.3")),
        })
    }

    /// A call of a world-0.2 export.
    pub(super) fn v02<R>(
        &mut self,
        name: &'static str,
        f: Call<'_, v02::LockSm, R>,
    ) -> Result<R, EngineError> {
        self.call(name, |b, s| match b {
            Bound::V02(sm) => f(sm, s),
            _ => Err(wasmtime::Error::msg("not a module of world 0.2")),
        })
    }

    /// A call of a world-0.1 export.
    pub(super) fn v01<R>(
        &mut self,
        name: &'static str,
        f: Call<'_, v01::LockSm, R>,
    ) -> Result<R, EngineError> {
        self.call(name, |b, s| match b {
            Bound::V01(sm) => f(sm, s),
            _ => Err(wasmtime::Error::msg("not a module of world 0.1")),
        })
    }

    /// Apply a committed range of entries: one list of outcomes per entry,
    /// one outcome per command, in order.
    pub fn apply(&mut self, entries: &[Vec<Command>]) -> Result<Vec<Vec<Outcome>>, EngineError> {
        match self.world() {
            World::V03 | World::V04 => {
                let out = self.v03("apply", Box::new(|sm, s| sm.call_apply(s, entries)))?;
                self.check_shape(entries, out)
            }
            World::V02 => self.apply02(entries),
            World::V01 => self.apply01(entries),
        }
    }

    /// One list of outcomes per entry and one outcome per command, or the
    /// instance is poisoned.
    fn check_shape<C, O>(
        &mut self,
        entries: &[Vec<C>],
        out: Vec<Vec<O>>,
    ) -> Result<Vec<Vec<O>>, EngineError> {
        let shape_ok =
            out.len() == entries.len() && out.iter().zip(entries).all(|(o, e)| o.len() == e.len());
        if !shape_ok {
            let want = entries.iter().map(Vec::len).sum();
            let got = out.iter().map(Vec::len).sum();
            return Err(self.poison(EngineError::OutcomeCount { want, got }));
        }
        Ok(out)
    }

    /// Entries on a 0.2 module: what 0.2 can run in one guest call, the
    /// rest answered by the adapter.
    fn apply02(&mut self, entries: &[Vec<Command>]) -> Result<Vec<Vec<Outcome>>, EngineError> {
        let mut planned: Vec<Vec<v02::Command>> = Vec::with_capacity(entries.len());
        let mut answers: Vec<Vec<Option<Outcome>>> = Vec::with_capacity(entries.len());
        for entry in entries {
            let mut run = Vec::with_capacity(entry.len());
            let mut slots = Vec::with_capacity(entry.len());
            for cmd in entry {
                match world02::plan(cmd) {
                    Some(c) => {
                        run.push(c);
                        slots.push(None);
                    }
                    // Rare: the version is asked only then.
                    None => slots.push(Some(world02::unsupported(cmd, &self.version()?))),
                }
            }
            planned.push(run);
            answers.push(slots);
        }
        let out = self.v02("apply", Box::new(|sm, s| sm.call_apply(s, &planned)))?;
        let out = self.check_shape(&planned, out)?;
        Ok(answers
            .into_iter()
            .zip(out)
            .map(|(slots, ran)| {
                let mut ran = ran.into_iter().map(world02::outcome);
                slots
                    .into_iter()
                    .map(|s| s.or_else(|| ran.next()).unwrap_or(Outcome::Noop))
                    .collect()
            })
            .collect())
    }

    /// Entries on a 0.1 module: one guest call for every command it can
    /// run, the rest answered by the adapter.
    fn apply01(&mut self, entries: &[Vec<Command>]) -> Result<Vec<Vec<Outcome>>, EngineError> {
        let mut out: Vec<Vec<Option<Outcome>>> = Vec::with_capacity(entries.len());
        let mut batch = Vec::new();
        // (entry, position, lease asked) of each command in `batch`.
        let mut places = Vec::new();
        for (e, entry) in entries.iter().enumerate() {
            let mut slots = Vec::with_capacity(entry.len());
            for (i, cmd) in entry.iter().enumerate() {
                match world01::plan(cmd) {
                    Some(c) => {
                        let lease = match cmd {
                            Command::Grant(g) => g.lease_ms,
                            _ => 0,
                        };
                        batch.push(c);
                        places.push((e, i, lease));
                        slots.push(None);
                    }
                    // Rare: the version is asked only then.
                    None => slots.push(Some(world01::unsupported(cmd, &self.version()?))),
                }
            }
            out.push(slots);
        }
        let outcomes = self.legacy_batch(&batch)?;
        let run: Vec<(v01::Command, v01::Outcome)> = batch.into_iter().zip(outcomes).collect();
        for (at, (e, i, lease)) in places.into_iter().enumerate() {
            let o = run[at].1;
            let held = match o {
                v01::Outcome::GrantRejected => match world01::held_at(&run, at) {
                    Some(h) => h,
                    None => {
                        let key = world01::key_of(&run[at].0).to_string();
                        self.v01("get", Box::new(move |sm, s| sm.call_get(s, &key)))?
                            .is_some()
                    }
                },
                _ => false,
            };
            out[e][i] = Some(world01::outcome(o, lease, held));
        }
        Ok(out
            .into_iter()
            .map(|e| e.into_iter().map(|o| o.unwrap_or(Outcome::Noop)).collect())
            .collect())
    }

    /// A batch of 0.1 commands on a 0.1 module, checked for one outcome
    /// per command.
    fn legacy_batch(&mut self, batch: &[v01::Command]) -> Result<Vec<v01::Outcome>, EngineError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let out = self.v01("apply", Box::new(|sm, s| sm.call_apply(s, batch)))?;
        if out.len() != batch.len() {
            let err = EngineError::OutcomeCount {
                want: batch.len(),
                got: out.len(),
            };
            return Err(self.poison(err));
        }
        Ok(out)
    }

    /// The commands of a log entry written in world 0.1's types (before
    /// world 0.2 existed), applied as they were then. On a 0.2 module a
    /// `Release { key }` releases the key's holder, looked up first, so
    /// these go one call per command (logs that old are short).
    pub fn apply_legacy(&mut self, batch: &[v01::Command]) -> Result<Vec<Outcome>, EngineError> {
        let as_run = |batch: Vec<Command>| vec![batch];
        match self.world() {
            World::V01 => {
                let entry: Vec<Command> = batch.iter().map(Command::from_legacy).collect();
                Ok(self.apply(&as_run(entry))?.pop().unwrap_or_default())
            }
            World::V02 | World::V03 | World::V04 => {
                let mut out = Vec::with_capacity(batch.len());
                for c in batch {
                    let cmd = match c {
                        v01::Command::Release(key) => match self.holders(key)?.first() {
                            Some(h) => Command::release(key.clone(), h.token),
                            None => {
                                out.push(Outcome::NotFound);
                                continue;
                            }
                        },
                        other => Command::from_legacy(other),
                    };
                    let mut o = self.apply(&as_run(vec![cmd]))?;
                    out.extend(o.pop().unwrap_or_default());
                }
                Ok(out)
            }
        }
    }
}
