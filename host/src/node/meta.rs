//! What a data dir records about the node that owns it (`node.meta`):
//! its id and its engine's fingerprint, checked at every start.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::NodeError;
use lockd_core::engine::EngineFingerprint;

/// What the data dir records about the node that owns it.
#[derive(Serialize, Deserialize)]
struct NodeMeta {
    id: u64,
    fingerprint: String,
}

pub(super) fn data_err(path: &Path, e: impl ToString) -> NodeError {
    NodeError::DataDir {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// Check (or record, on first start) which node and engine own `dir`.
/// `true`: this is the data dir's first start.
pub(super) fn check_meta(
    dir: &Path,
    id: u64,
    fingerprint: &EngineFingerprint,
) -> Result<bool, NodeError> {
    let path = dir.join("node.meta");
    match lockd_log::read_atomic(&path).map_err(|e| data_err(&path, e))? {
        Some(bytes) => {
            let meta: NodeMeta = postcard::from_bytes(&bytes).map_err(|e| data_err(&path, e))?;
            if meta.id != id {
                return Err(NodeError::WrongNode {
                    path: dir.display().to_string(),
                    found: meta.id,
                    want: id,
                });
            }
            let stored = EngineFingerprint {
                hash: String::new(),
                text: meta.fingerprint,
            };
            let diffs = stored.determinism_differences(fingerprint);
            if !diffs.is_empty() {
                return Err(NodeError::EngineMismatch {
                    path: dir.display().to_string(),
                    differences: diffs.join(", "),
                });
            }
            if stored.implementation() != fingerprint.implementation() {
                // A new binary on the old data dir: what guests compute is
                // the same; the compiled-module cache is keyed by the whole
                // fingerprint, so nothing compiled by the old one is used.
                tracing::warn!(
                    was = %stored.implementation(),
                    now = %fingerprint.implementation(),
                    "the data dir was written by another lockd implementation; continuing (the determinism settings match)"
                );
                record_meta(&path, id, fingerprint)?;
            }
            Ok(false)
        }
        None => record_meta(&path, id, fingerprint).map(|()| true),
    }
}

fn record_meta(path: &Path, id: u64, fingerprint: &EngineFingerprint) -> Result<(), NodeError> {
    let meta = NodeMeta {
        id,
        fingerprint: fingerprint.text.clone(),
    };
    let bytes = postcard::to_allocvec(&meta).map_err(|e| data_err(path, e))?;
    lockd_log::write_atomic(path, &bytes).map_err(|e| data_err(path, e))
}

#[cfg(test)]
mod tests {
    use super::NodeMeta;

    /// The data dir's node record is pinned by its bytes, like every other
    /// persisted format (tests/sm/golden_formats.rs; docs/architecture.md,
    /// "Persisted formats"): id 2 (a varint), then the fingerprint text.
    #[test]
    fn the_node_record_is_pinned() {
        const GOLDEN: &[u8] = b"\x02\x0ewasmtime 48; x";
        let meta = NodeMeta {
            id: 2,
            fingerprint: "wasmtime 48; x".into(),
        };
        assert_eq!(postcard::to_allocvec(&meta).expect("encode"), GOLDEN);
        let back: NodeMeta = postcard::from_bytes(GOLDEN).expect("decode");
        assert_eq!((back.id, back.fingerprint.as_str()), (2, "wasmtime 48; x"));
    }
}
