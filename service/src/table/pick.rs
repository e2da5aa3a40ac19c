//! The election policy's hook: when a key that nobody holds has two or
//! more callers waiting, the table asks its [`PickOrder`] which of them
//! goes first and moves that one to the head of the queue; the batch
//! behind a release is then taken from the head as always. On a leader
//! the order is the active module's `pick` (world 0.4; an older module
//! keeps FIFO), on a table without one (most scenario files) FIFO.
//!
//! The answer is a leader's choice, not replicated: what commits is the
//! grant proposed for the caller picked, which the module then judges like
//! any other. So a pick can never make replicas disagree.

use std::fmt;

use lockd_core::command::Holder;
use lockd_core::engine::Candidate;

use super::{Table, MAX_BEHIND};

/// Which waiting candidate goes first (see the module docs).
pub trait PickOrder: Send {
    /// Whether to ask at all (a module of an older world has no
    /// election policy): the candidates are not even listed otherwise.
    fn asks(&mut self) -> bool {
        true
    }

    /// The index into `candidates` (waiting for `key`, oldest first) of
    /// the one to go first, `None` for the first. `leaving` is the holder
    /// whose lease just ran out, when the key frees by an expiry.
    fn pick(
        &mut self,
        key: &str,
        leaving: Option<&Holder>,
        candidates: &[Candidate],
    ) -> Option<usize>;
}

/// The table's [`PickOrder`], if it has one.
#[derive(Default)]
pub(super) struct Picker(pub Option<Box<dyn PickOrder>>);

impl fmt::Debug for Picker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Picker(set)"
        } else {
            "Picker(fifo)"
        })
    }
}

impl Table {
    /// Ask `order` which waiter goes first whenever a key frees.
    pub(crate) fn set_picker(&mut self, order: Box<dyn PickOrder>) {
        self.picker.0 = Some(order);
    }

    /// Move the waiter the [`PickOrder`] picks for `key` to the head of its
    /// queue, when nobody holds the key and two or more wait (at most
    /// [`MAX_BEHIND`] of them are offered).
    pub(super) fn pick_head(&mut self, key: &str, leaving: Option<Holder>) {
        let Some(order) = self.picker.0.as_mut() else {
            return;
        };
        let Some(k) = self.keys.get_mut(key) else {
            return;
        };
        if !k.holders.is_empty() || k.waiters.len() < 2 || !order.asks() {
            return;
        }
        let candidates: Vec<Candidate> = k
            .waiters
            .iter()
            .take(MAX_BEHIND)
            .map(|w| Candidate {
                holder: Holder {
                    principal: w.spec.principal.clone(),
                    owner: w.spec.owner.clone(),
                },
                mode: w.spec.mode,
                priority: w.spec.priority,
            })
            .collect();
        let Some(i) = order.pick(key, leaving.as_ref(), &candidates) else {
            return;
        };
        if i == 0 || i >= candidates.len() {
            return;
        }
        if let Some(w) = k.waiters.remove(i) {
            self.counters.picked += 1;
            k.waiters.push_front(w);
        }
    }
}
