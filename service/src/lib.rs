//! `lockd-service`: the lock service on the leader, the only proposer of
//! lock commands, and the host's side of lock modules.
//!
//! # Layout
//!
//! The path of an acquire: the node's front doors (`lockd`'s HTTP and
//! native protocol) parse and authorise a request and call
//! [`LockService`]; its checks run, the actor's pure [`table`] decides
//! (grant, queue, refuse), the [`proposer`] batches the commands of many
//! requests into one log entry and hands it to the replication crate
//! ([`lockd_replication`]: append, replicate, commit, apply through the
//! core's replica), and the answer goes back the same way. This crate
//! imports the crates below it (`lockd-replication`, `lockd-core`,
//! `lockd-log`, `lockd-net`, `lockd-proto`), never the node.
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
//! * [`modules`]: the host's side of lock modules (upgrade and shadow
//!   submission with the voters' pre-check, whose peer messages it
//!   defines and the replication crate carries without reading, the
//!   audit checker, replay).
//! * [`blocking`]: blocking work off the async workers (inline on a
//!   deterministic simulation's thread).

mod actor;
pub(crate) mod barrier;
pub mod blocking;
pub mod clock;
pub mod error;
#[cfg(feature = "faults")]
mod fault;
mod handle;
mod lease;
pub mod modules;
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
