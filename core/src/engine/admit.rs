//! What a component's bytes say of themselves, read before anything is
//! compiled: a module that imports anything, or that exports none of the
//! functions every lock world has, is refused here, so a stranger's bytes
//! cost a parse, not a compile (and never reach the module cache).
//!
//! The bytes are read with `wasmparser`, the parser wasmtime itself uses
//! (the same version), not a parser of our own: the two cannot disagree on
//! what the bytes hold. The full check of the world's types still follows
//! the compile ([`super::guest`]); this is the cheap part of it, first.

use wasmparser::{ComponentExternalKind, ComponentTypeRef, Parser, Payload, TypeBounds};

use super::error::EngineError;

/// The functions every lock world exports (worlds 0.1 to 0.4).
const EVERY_WORLD: [&str; 5] = ["apply", "snapshot", "restore", "state-hash", "version"];

/// Refuse `bytes` (a component, its magic already checked) if its own
/// imports are not empty or its exports lack a lock world's functions.
pub fn check(bytes: &[u8]) -> Result<(), EngineError> {
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    // Nested modules and components have imports and exports of their
    // own; only the outermost component's are the module's.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| EngineError::Invalid(e.to_string()))?;
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    let import = import.map_err(|e| EngineError::Invalid(e.to_string()))?;
                    // A type equal to one the component defines (a world's
                    // records) is a name, not something to be given.
                    if matches!(import.ty, ComponentTypeRef::Type(TypeBounds::Eq(_))) {
                        continue;
                    }
                    imports.push(import.name.name.to_string());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    let export = export.map_err(|e| EngineError::Invalid(e.to_string()))?;
                    if export.kind == ComponentExternalKind::Func {
                        exports.push(export.name.name.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    if !imports.is_empty() {
        return Err(EngineError::HasImports(imports));
    }
    let missing: Vec<&str> = EVERY_WORLD
        .into_iter()
        .filter(|f| !exports.iter().any(|e| e == f))
        .collect();
    if !missing.is_empty() {
        return Err(EngineError::WrongWorld(format!(
            "it does not export {} (every lock module does)",
            missing.join(", ")
        )));
    }
    Ok(())
}
