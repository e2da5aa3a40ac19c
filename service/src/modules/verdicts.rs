//! The last pre-check verdicts a voter gave, so that a leader asking
//! again (a retry, or the same module after a refusal elsewhere) is not
//! compiled and migrated again (`modules::precheck`).

use lockd_core::engine::ModuleHash;

use super::peer_messages::PrecheckAnswer;

/// Verdicts remembered, so that the same ask is not compiled and
/// migrated again.
const REMEMBERED: usize = 8;

/// What a verdict depends on: the module, whether it is a rollback (no
/// version order), and the module it would replace.
pub(super) type VerdictKey = (ModuleHash, bool, ModuleHash);

/// The last verdicts this voter gave (see [`REMEMBERED`]).
#[derive(Default)]
pub struct Verdicts(std::sync::Mutex<std::collections::VecDeque<(VerdictKey, PrecheckAnswer)>>);

impl Verdicts {
    pub(super) fn get(&self, key: &VerdictKey) -> Option<PrecheckAnswer> {
        let v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        v.iter().find(|(k, _)| k == key).map(|(_, a)| a.clone())
    }

    pub(super) fn put(&self, key: VerdictKey, answer: PrecheckAnswer) {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        v.retain(|(k, _)| *k != key);
        v.push_back((key, answer));
        while v.len() > REMEMBERED {
            v.pop_front();
        }
    }
}
