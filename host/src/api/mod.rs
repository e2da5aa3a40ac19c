//! What a node answers on its one address.
//!
//! # Layout
//!
//! * [`framed`]: the server side of the framed protocol — hello and
//!   fingerprint check, then Raft RPC from peers.
//! * [`http`]: the HTTP/JSON API — locks, status, membership admin, metrics.
//! * [`status`]: the node's status report, shared by HTTP and the CLI.

pub mod framed;
pub mod http;
pub mod status;
