//! The lock service on the leader: the only proposer of lock commands.
//!
//! # Layout
//!
//! * [`handle`]: [`LockService`], what the APIs call: checks the request,
//!   confirms leadership where the answer depends on it, and hands it to
//!   the actor.
//! * `actor`: the leader's lock actor: its state (holders, lease deadlines,
//!   FIFO waiters), its message loop, and leadership changes.
//! * `requests`: acquire, release and extend, as the actor handles them.
//! * `handoff`: committed proposals (answers, handoff to the next waiter,
//!   phantom release) and timers (lease expiry, wait limits).
//! * `lease`: how long a lease lasts on the leader's clock (and the
//!   test-only faults that end leases early).
//! * `read`: leader reads that see everything it acknowledged (read-index,
//!   then its own log applied).
//! * [`table`]: the leader's lock logic as a pure table (events in,
//!   actions out), tested by scenario files; the actor drives it.
//! * [`proposer`]: batches command groups into log entries.
//! * [`error`]: [`ServiceError`] and the key check.

mod actor;
pub mod error;
#[cfg(feature = "fault-stale-done")]
mod fault;
mod handle;
mod handoff;
mod lease;
pub mod proposer;
mod read;
mod requests;
pub mod table;

pub use actor::ServiceStats;
pub use error::{check_key, Acquired, ServiceError, MAX_KEY_BYTES};
pub use handle::LockService;
