//! A module's own invariants: the optional export `check-invariants`
//! (`func() -> result<_, string>`), which a module of world 0.3 or later
//! may add to its world (docs/writing-a-lock-module.md, "Your own
//! invariants").
//!
//! The host calls it on the new module right after every migration, after
//! its own checks ([`crate::invariants`], [`crate::upgrade::migrate`]): at
//! the leader's dry run, at a shadow's start and at the swap on every node.
//! An `err`, a trap or running out of the state budget refuses the swap,
//! identically everywhere, with the module's reason (cut to
//! [`MAX_REASON`] bytes: it is part of the replicated outcome). A module
//! exporting the name with another type is not loaded (like a module of
//! no known world), so it is refused at the dry run and, pushed into the
//! log, at apply alike.

use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, ComponentExportIndex, Instance, Type, TypedFunc};
use wasmtime::Store;

use super::error::EngineError;
use super::store::StoreState;

/// The export's name.
pub const EXPORT: &str = "check-invariants";

/// The export's type, as the errors name it.
const SIGNATURE: &str = "func() -> result<_, string>";

/// The most of a module's reason kept, in bytes.
pub const MAX_REASON: usize = 1024;

pub(super) type CheckFn = TypedFunc<(), (Result<(), String>,)>;

/// The export's index, when the component has one by that name; refused
/// (as a module of no known world) when it has another type.
pub(super) fn find(
    engine: &wasmtime::Engine,
    component: &Component,
) -> Result<Option<ComponentExportIndex>, EngineError> {
    let ty = component.component_type();
    let Some(export) = ty.get_export(engine, EXPORT) else {
        return Ok(None);
    };
    let typed = match &export.ty {
        ComponentItem::ComponentFunc(f) => {
            let results: Vec<Type> = f.results().collect();
            f.params().len() == 0
                && matches!(results.as_slice(),
                    [Type::Result(r)] if r.ok().is_none() && matches!(r.err(), Some(Type::String)))
        }
        _ => false,
    };
    if !typed {
        return Err(EngineError::WrongWorld(format!(
            "its export `{EXPORT}` must be `{SIGNATURE}`"
        )));
    }
    Ok(component.get_export_index(None, EXPORT))
}

/// The export bound on `instance`; an error when its type is not the one
/// above.
pub(super) fn bind(
    store: &mut Store<StoreState>,
    instance: &Instance,
    index: &ComponentExportIndex,
) -> wasmtime::Result<CheckFn> {
    instance
        .get_typed_func::<(), (Result<(), String>,)>(store, index)
        .map_err(|e| e.context(format!("`{EXPORT}` must be `{SIGNATURE}`")))
}

/// `reason` cut to at most [`MAX_REASON`] bytes, at a character boundary
/// (also a pre-check verdict's, `crate::precheck`).
pub fn cut(mut reason: String) -> String {
    if reason.len() > MAX_REASON {
        let mut end = MAX_REASON;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
        reason.push('…');
    }
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_reason_is_cut_at_a_character_boundary() {
        assert_eq!(cut("short".into()), "short");
        let long = "é".repeat(MAX_REASON);
        let got = cut(long);
        assert!(got.len() <= MAX_REASON + "…".len());
        assert!(got.ends_with('…'));
        assert_eq!(cut("x".repeat(MAX_REASON)), "x".repeat(MAX_REASON));
    }
}
