//! `lockd-proto`: what lockd's clients and nodes say to each other, and
//! nothing else — serde types, no I/O.
//!
//! # Layout
//!
//! * `request` (re-exported here): the native client protocol (requests,
//!   responses, errors). Keys travel as bytes so that a key that is not
//!   UTF-8 reaches the node and gets its precise error, instead of failing
//!   to decode as a frame.
//! * `status` (re-exported here): the answers of the HTTP API and of the
//!   native status request: status, members, capacity, audit points;
//!   `upgrade_status` (re-exported here) the upgrades and the shadow;
//!   `module_status` (re-exported here) what it reports of its modules
//!   beyond the active one (the way back, failures, the pre-check).
//! * `error_code` (re-exported here): [`ErrorCode`], the stable code of
//!   every error answer.
//! * `watch` (re-exported here): the watch stream on the native protocol.
//! * [`duration`]: the one parser of durations typed by people (`1m30s`,
//!   `1.5s`, or milliseconds), for lockctl and the node's settings.
//! * [`wire`]: the framed protocol's preface, hello and envelopes.
//! * [`signature`]: what a module signature covers, and the hex forms of
//!   module keys and signatures.
//! * [`audit`]: comparing the determinism-audit reports of several nodes.
//!
//! # Versions
//!
//! Frames are postcard, which reads fields by position: a field missing
//! at the end is an error, not a default, and `#[serde(default)]` would
//! only make the JSON form and the frame form disagree. So no type here
//! carries it (`tests/sm/no_serde_default.rs` checks), and a field or a
//! variant is only ever appended together with a new protocol version
//! ([`wire::VERSION`]). What nodes persist (log entries, snapshots) is not
//! here: the server owns those formats (`lockd-core`).

pub mod audit;
pub mod duration;
mod error_code;
mod module_status;
mod request;
pub mod signature;
mod status;
mod upgrade_status;
mod watch;
pub mod wire;

pub use error_code::ErrorCode;
pub use module_status::*;
pub use request::*;
pub use status::*;
pub use upgrade_status::*;
pub use watch::*;
