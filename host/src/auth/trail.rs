//! The admin audit trail's memory: the most recent admin requests a node
//! served, for `/v1/status` (the log lines are written where they are
//! served, [`crate::api::authorize`]).

use std::collections::VecDeque;
use std::sync::Mutex;

use lockd_proto::AdminAction;

/// Admin actions kept for status.
pub(crate) const KEEP_ADMIN_ACTIONS: usize = 32;

/// The recent admin actions this node served, oldest first.
#[derive(Default)]
pub(crate) struct AdminLog(Mutex<VecDeque<AdminAction>>);

impl AdminLog {
    pub fn push(&self, a: AdminAction) {
        let mut q = self.0.lock().unwrap_or_else(|p| p.into_inner());
        q.push_back(a);
        while q.len() > KEEP_ADMIN_ACTIONS {
            q.pop_front();
        }
    }

    pub fn recent(&self) -> Vec<AdminAction> {
        let q = self.0.lock().unwrap_or_else(|p| p.into_inner());
        q.iter().cloned().collect()
    }
}
