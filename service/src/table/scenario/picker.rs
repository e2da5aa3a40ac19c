//! `picker module`: from then on the table asks the built-in module of
//! world 0.4 (the real component, run by wasmtime as on a leader) which
//! waiter goes first when a key frees; `picker fifo` stops asking.

use lockd_core::command::Holder;
use lockd_core::engine::{Candidate, EngineSettings, GuestModule, Picker, WasmEngine};

use super::super::PickOrder;

struct BuiltinPick {
    engine: WasmEngine,
    module: GuestModule,
    picker: Picker,
}

impl PickOrder for BuiltinPick {
    fn pick(
        &mut self,
        key: &str,
        leaving: Option<&Holder>,
        candidates: &[Candidate],
    ) -> Option<usize> {
        let picked = self
            .picker
            .pick(&self.engine, &self.module, key, leaving, candidates);
        // A failure would read as FIFO: a scenario must not pass by it.
        assert_eq!(self.picker.failures, 0, "the module's pick failed");
        picked
    }
}

/// The order `picker NAME` sets: `module` or `fifo`.
pub(super) fn order(name: &str) -> Result<Option<Box<dyn PickOrder>>, String> {
    match name {
        "fifo" => Ok(None),
        "module" => {
            let engine = WasmEngine::new(EngineSettings::default(), None)
                .map_err(|e| format!("engine: {e}"))?;
            let module = engine
                .load(lockd_core::builtin::LOCK_SM_0_4)
                .map_err(|e| format!("the 0.4 module: {e}"))?;
            Ok(Some(Box::new(BuiltinPick {
                engine,
                module,
                picker: Picker::default(),
            })))
        }
        other => Err(format!("picker {other:?}: module or fifo")),
    }
}
