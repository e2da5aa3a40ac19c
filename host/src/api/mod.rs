//! What a node answers on its one address.
//!
//! # Layout
//!
//! * [`framed`]: the server side of the framed protocol — hello and
//!   fingerprint check, then Raft RPC from peers.
//! * [`admin`]: hot upgrade, shadow mode and audit routes.
//! * [`forward`]: lock requests reaching a follower go on to the leader.
//! * [`http`]: the HTTP/JSON API — locks, status, membership admin, metrics.
//! * [`status`]: the node's status report, shared by HTTP and the CLI.

pub mod admin;
pub mod forward;
pub mod framed;
pub mod http;
pub mod status;
