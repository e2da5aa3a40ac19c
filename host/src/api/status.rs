//! The node's status report: its types, shared by HTTP and the CLI. The
//! report is read by [`super::Services::status`].

use openraft::ServerState;

pub use lockd_proto::{Member, Role, Status};

pub(crate) fn role_of(state: ServerState) -> Role {
    match state {
        ServerState::Leader => Role::Leader,
        ServerState::Follower => Role::Follower,
        ServerState::Candidate => Role::Candidate,
        ServerState::Learner => Role::Learner,
        ServerState::Shutdown => Role::Shutdown,
    }
}

/// Upgrade entries applied since start: swapped, rejected; and guest
/// instances rebuilt after a failed call.
pub(crate) struct UpgradeCounts {
    pub swapped: u64,
    pub rejected: u64,
    pub rebuilds: u64,
}
