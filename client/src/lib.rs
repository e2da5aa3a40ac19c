//! The Rust client of lockd, and the wire types of its native protocol.
//!
//! No wasmtime here: a client needs only the protocol.
//!
//! ```no_run
//! # async fn demo() -> Result<(), lockd_client::ClientError> {
//! use std::time::Duration;
//! let client = lockd_client::Client::new(["127.0.0.1:7401", "127.0.0.1:7402", "127.0.0.1:7403"]);
//! // Wait up to 5 s for the lock, with a 10 s lease that the guard renews
//! // in the background (safe to retry: a lost answer never means a second
//! // grant).
//! let guard = client.acquire("jobs/nightly", Duration::from_secs(10), Duration::from_secs(5)).await?;
//! // Pass the fencing token to the protected resource with every write.
//! let token = guard.token();
//! assert!(guard.is_valid()); // our conservative local view of the lease
//! // Do the work unless the lock is lost first (a refused renewal, or the
//! // lease ran out without one).
//! tokio::select! {
//!     _ = guard.lost() => return Ok(()),
//!     _ = tokio::time::sleep(Duration::from_millis(10)) => {}
//! }
//! guard.release().await?;
//! # let _ = token; Ok(()) }
//! ```
//!
//! With TLS and a client certificate or token (a cluster with
//! authentication on; see docs/security.md):
//!
//! ```no_run
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::path::Path;
//! use lockd_client::{tls::TlsClient, Client, ClientOptions, Credentials, Token};
//! let tls = TlsClient::from_files(
//!     Path::new("certs/ca.pem"),
//!     Some((Path::new("certs/ci.pem"), Path::new("certs/ci.key"))),
//! )?;
//! let options = ClientOptions {
//!     credentials: Credentials {
//!         tls: Some(tls),
//!         token: std::env::var("LOCKD_TOKEN").ok().map(Token::new),
//!     },
//!     ..Default::default()
//! };
//! let client = Client::with_options(["10.0.0.1:7400", "10.0.0.2:7400"], options);
//! # let _ = client; Ok(()) }
//! ```
//!
//! # Layout
//!
//! * [`wire`] (from `lockd-net`): the connection preface, hello,
//!   envelopes and frame codec.
//! * [`proto`]: client requests, responses and errors.
//! * [`conn`]: one multiplexed connection (many requests in flight, paired
//!   by id).
//! * [`client`]: [`Client`] (endpoints, leader discovery, retries).
//! * [`guard`]: [`LockGuard`] (token, local deadline, background
//!   keepalive), never believing a lease longer than asked.
//! * [`admin`]: the HTTP/JSON admin API (membership, upgrades, shadow
//!   mode, audit points) and a GET-JSON helper with a timeout.
//! * [`audit`]: comparing the nodes' determinism-audit points.
//! * [`options`]: [`AcquireOptions`] and the calls of world 0.2 (shared
//!   locks, semaphores, retry-safe acquires, holders, listings).
//! * [`watch`]: [`Watch`], the changes under a prefix as a stream that
//!   resumes on another node when its node goes away.
//! * [`election`]: leader election on a lock: campaign, observe
//!   ([`Observe`]), with proclaim and resign.
//! * [`session`]: [`Session`] (one lease for many holdings, one keepalive),
//!   and the calls of world 0.3 (proclaim, counted release).
//! * [`id`]: random request ids and owner names.
//! * From `lockd-net`, which the node shares: [`net`] (the network seam:
//!   real TCP, or the simulation's), [`shutdown`] (Ctrl-C or SIGTERM),
//!   [`tls`] (trust, client identity, ALPN per protocol, node names),
//!   [`security`] ([`Credentials`], a bearer token, and the one
//!   [`security::connect`] every connection to a node goes through).
//! * [`signature`]: what a lock module's signature covers, and the hex
//!   forms of module keys and signatures.

pub mod admin;
pub mod client;
pub mod conn;
pub mod election;
pub mod guard;
pub mod id;
pub mod options;
pub mod session;
pub mod watch;

// Sockets, TLS, framing and the HTTP/1 client live in `lockd-net`, below
// both this crate and the node; re-exported under the names clients have
// always used.
pub use lockd_net::socket as net;
pub use lockd_net::{security, shutdown, tls, wire};

// The protocol's types live in `lockd-proto` (serde only, shared with the
// node); re-exported under the names clients have always used.
pub use lockd_proto as proto;
pub use lockd_proto::{audit, signature};

pub use client::{Client, ClientError, ClientOptions, LockGuard};
pub use election::{Leader, Observe};
pub use options::AcquireOptions;
pub use proto::{LockView, Status};
pub use security::{Credentials, Token};
pub use session::Session;
pub use watch::{Watch, WatchEvent};
