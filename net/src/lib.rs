//! `lockd-net`: what a lockd node and its clients both need to reach each
//! other, below both. The node serves with it and calls its peers with it;
//! `lockd-client` builds the client on it; neither reaches into the other.
//!
//! # Layout
//!
//! * [`socket`]: the network seam: every socket opened or accepted goes
//!   through one [`socket::Net`] (real TCP, or the simulation's).
//! * [`tls`]: TLS on the calling side (trust, client identity, one rustls
//!   config per ALPN protocol, node names).
//! * [`security`]: [`Credentials`] (TLS settings and a bearer token) and the
//!   one [`security::connect`] every connection to a node goes through.
//! * [`wire`]: the native protocol's frame codec and the calling side of
//!   its opening handshake (the frame types are `lockd_proto::wire`).
//! * [`http`]: an HTTP/1 client for single nodes (reads with a timeout,
//!   JSON posts, the bearer token where it may go) and [`http::AdminError`].
//! * [`shutdown`]: waiting for Ctrl-C or SIGTERM.
//!
//! A connection to a node, from either side: `security::connect` → a
//! `socket::Net` stream → TLS with the ALPN of its protocol → the native
//! protocol's handshake (`wire`) or HTTP/1 (`http`).
//!
//! May import: `lockd-proto` and the outside crates; nothing of the node
//! or the client.

pub mod http;
pub mod security;
pub mod shutdown;
pub mod socket;
pub mod tls;
pub mod wire;

pub use security::{Credentials, Token};
