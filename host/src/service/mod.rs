//! The lock service on the leader: the only proposer of lock commands.
//!
//! # Layout
//!
//! * [`handle`]: [`LockService`], what the APIs call: checks the request,
//!   confirms leadership where the answer depends on it, and hands it to
//!   the actor.
//! * `actor`: the shell that drives the table: channels, timers, replies,
//!   proposals, read-index for refusals and loads, leadership changes.
//! * `picker`: the table's election policy, the active module's `pick`.
//! * `lease`: how long a lease lasts on the leader's clock (and the
//!   test-only faults that end leases early).
//! * `stats`: [`ServiceStats`], the counters for metrics.
//! * `barrier`: leader reads that see everything it acknowledged (read-index,
//!   then its own log applied).
//! * `reads`: [`LockService`]'s reads (holders, listings, policy data)
//!   and the policy data's change.
//! * [`table`]: the leader's lock logic as a pure table (events in,
//!   actions out), tested by scenario files; the actor drives it.
//! * `world`: the table's commands and outcomes in the replicated types.
//! * [`proposer`]: batches command groups into log entries.
//! * [`error`]: [`ServiceError`] and the key check.
//! * `tasks`: [`ServiceTasks`], the service's tasks, which shutdown waits
//!   for.

mod actor;
pub(crate) mod barrier;
pub mod clock;
pub mod error;
#[cfg(feature = "faults")]
mod fault;
mod handle;
mod lease;
mod picker;
pub mod proposer;
mod reads;
mod sessions;
mod stats;
pub mod table;
mod tasks;
mod world;

pub use error::{check_key, Acquired, ServiceError, MAX_KEY_BYTES};
pub use handle::{LockService, RequestLimits};
pub use sessions::SessionOpen;
pub use stats::ServiceStats;
pub use tasks::ServiceTasks;
