//! The leader table's [`PickOrder`]: the active module's `pick`, run on an
//! instance of its own ([`lockd_core::engine::Picker`]: it sees no lock
//! state, and its failures harm nothing). A module of an older world keeps
//! FIFO.
//!
//! It never waits for the state lock behind an apply: the module is
//! taken when the lock is free at once, else the one seen last is used
//! (only the first pick after an upgrade may meet the module it replaced).

use lockd_core::command::Holder;
use lockd_core::engine::{Candidate, GuestModule, Picker, World};

use super::table::PickOrder;
use lockd_replication::state_machine::StateMachineStore;

pub(super) struct ModulePick {
    sm: StateMachineStore,
    module: Option<GuestModule>,
    picker: Picker,
}

impl ModulePick {
    pub(super) fn new(sm: StateMachineStore) -> ModulePick {
        ModulePick {
            sm,
            module: None,
            picker: Picker::default(),
        }
    }
}

impl PickOrder for ModulePick {
    fn asks(&mut self) -> bool {
        let seen = self.module.as_ref().map(GuestModule::hash);
        match self.sm.try_module_unless(seen) {
            Some(Some(newer)) => self.module = Some(newer),
            Some(None) => {}
            None if self.module.is_none() => self.module = Some(self.sm.module()),
            None => {}
        }
        self.module
            .as_ref()
            .is_some_and(|m| m.world() == World::V04)
    }

    fn pick(
        &mut self,
        key: &str,
        leaving: Option<&Holder>,
        candidates: &[Candidate],
    ) -> Option<usize> {
        let module = self.module.as_ref()?;
        self.picker
            .pick(self.sm.engine(), module, key, leaving, candidates)
    }
}
