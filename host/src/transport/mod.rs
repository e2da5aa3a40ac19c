//! The node's one address: framed protocol and HTTP on the same port, in
//! the clear or inside TLS.
//!
//! Every node serves peer RPC, the native client protocol and HTTP on one
//! TCP address. A connection is told apart by its first bytes: a TLS
//! handshake record (`0x16`) is accepted with the node's certificate and
//! its ALPN (`lockd-peer/1`, `lockd/1`, `http/1.1`) says the protocol; in
//! the clear, the framed protocol opens with the 4-byte preface `LKD` +
//! version and anything else is handed to the HTTP server.
//!
//! ```text
//! client/peer ─► listener (sniff) ─┬─ 0x16: TLS handshake ─┬─ lockd-peer/1, lockd/1 ─► framed
//!                                 │                       └─ http/1.1, none ───────► HTTP (axum)
//!                                 ├─ LKD…: framed: Hello/Welcome, then request/response frames
//!                                 └─ else: HTTP
//! ```
//!
//! Framed protocol: after the preface, length-delimited frames (4-byte
//! big-endian length, at most [`lockd_proto::wire::MAX_FRAME`]) whose bodies are postcard.
//! The first frame is a [`lockd_proto::wire::Hello`] (who is calling, and the engine
//! fingerprint for peers); the server answers [`lockd_proto::wire::Welcome`] or
//! [`lockd_proto::wire::Refused`] with the reason, so a wrong peer — another program, an
//! older protocol version, a node with a different wasm engine — gets a clear
//! error instead of undecodable bytes. Requests and responses then travel in
//! [`lockd_proto::wire::Envelope`]s carrying a request id.
//!
//! # Layout
//!
//! * frames (preface, hello, envelopes, encode/decode): [`lockd_proto::wire`];
//!   the codec: [`lockd_net::wire`].
//! * [`listener`]: the accept loop and the sniffing of the first bytes
//!   (`rewind` puts them back).
//! * [`limits`]: the connection caps and timeouts.
//! * the client side of a framed connection to a peer, with timeouts:
//!   `lockd_replication::peer_conn`.
//! * [`http`]: the HTTP client for peers (forwarding to the leader, audit
//!   queries).
//! * [`tls`]: the server side of TLS and what a caller's certificate
//!   proves.

pub mod http;
pub mod limits;
pub mod listener;
mod rewind;
pub mod tls;
