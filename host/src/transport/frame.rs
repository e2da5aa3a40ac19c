//! Frames of the framed protocol: defined in the client crate (the host
//! depends on it for the protocol, never the other way round).

pub use lockd_client::wire::*;
