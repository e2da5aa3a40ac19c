//! The checkpoint of a guest instance: a state of it (the module's
//! `snapshot()` bytes, or nothing for an empty table) and a journal of
//! every batch the instance applied since, enough to rebuild the instance
//! as it is now (trap isolation, `isolate.rs`).

use std::sync::Arc;

use crate::command::{legacy, Command};
use crate::engine::{EngineError, GuestInstance, GuestModule, WasmEngine};

/// The journal may grow to the checkpoint's size, and at least this, before
/// a new checkpoint is taken.
pub const MIN_JOURNAL_BYTES: usize = 4 << 20;

/// ... and at most this, whatever size the module's snapshot has.
pub const MAX_JOURNAL_BYTES: usize = 64 << 20;

/// A journal this long means checkpoints keep failing (the module's
/// `snapshot` does): the replica stops rather than grow it further.
pub const JOURNAL_CAP: usize = 16 * MAX_JOURNAL_BYTES;

/// One batch the instance applied, as it was sent.
enum Journaled {
    Groups(Vec<Vec<Command>>),
    Legacy(Vec<legacy::Command>),
}

/// A state of the guest and the batches applied since: enough to rebuild
/// the instance as it is now.
#[derive(Default)]
pub(super) struct Checkpoint {
    /// `None`: the empty table of a new instance.
    state: Option<Arc<[u8]>>,
    journal: Vec<Journaled>,
    journal_bytes: usize,
    /// After a failed checkpoint, the next is tried only at this size.
    retry_at: usize,
}

impl Checkpoint {
    /// The instance holds `state` and nothing since.
    pub(super) fn at(state: impl Into<Arc<[u8]>>) -> Checkpoint {
        Checkpoint {
            state: Some(state.into()),
            ..Checkpoint::default()
        }
    }

    pub(super) fn record(&mut self, groups: &[Vec<Command>]) {
        self.journal_bytes += groups
            .iter()
            .flatten()
            .map(Command::wire_bytes)
            .sum::<usize>();
        self.journal.push(Journaled::Groups(groups.to_vec()));
    }

    pub(super) fn record_legacy(&mut self, commands: &[legacy::Command]) {
        self.journal_bytes += commands
            .iter()
            .map(|c| Command::from_legacy(c).wire_bytes())
            .sum::<usize>();
        self.journal.push(Journaled::Legacy(commands.to_vec()));
    }

    /// Whether a new checkpoint is due.
    pub(super) fn due(&self) -> bool {
        let size = self.state.as_ref().map_or(0, |s| s.len());
        self.journal_bytes > size.clamp(MIN_JOURNAL_BYTES, MAX_JOURNAL_BYTES)
            && self.journal_bytes >= self.retry_at
    }

    /// After a failed checkpoint: the next is tried only once the journal
    /// has grown by [`MIN_JOURNAL_BYTES`] (each try costs a snapshot and a
    /// rebuild).
    pub(super) fn back_off(&mut self) {
        self.retry_at = self.journal_bytes + MIN_JOURNAL_BYTES;
    }

    /// Whether the journal passed [`JOURNAL_CAP`].
    pub(super) fn over_cap(&self) -> bool {
        self.journal_bytes > JOURNAL_CAP
    }

    /// A new instance of `module` in the state this checkpoint describes.
    /// Replayed with the state budget: these batches were applied once.
    pub(super) fn rebuild(
        &self,
        engine: &WasmEngine,
        module: &GuestModule,
    ) -> Result<GuestInstance, EngineError> {
        let mut guest = engine.instantiate(module)?;
        if let Some(state) = &self.state {
            guest.restore(state)?;
        }
        for batch in &self.journal {
            match batch {
                Journaled::Groups(groups) => guest.state_call(|g| g.apply(groups).map(drop))?,
                Journaled::Legacy(cmds) => guest.state_call(|g| g.apply_legacy(cmds).map(drop))?,
            }
        }
        Ok(guest)
    }
}
