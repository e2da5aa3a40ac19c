//! Jepsen-style verification: real clusters, concurrent clients, faults,
//! and checkers over the recorded history.
//!
//! A run starts a cluster of real `lockd` processes, lets clients take locks
//! and update a **fenced register** under them while a nemesis injects
//! faults, records every operation's invocation and completion, heals, and
//! then checks the history ([`check`] has one function per property):
//!
//! 1. no lost update through the fenced register ([`register`]);
//! 2. holders as the clients saw them: never more on a key than its limit,
//!    never a holder of one mode beside one of the other, so a mutex or a
//!    writer overlaps no one (each holder's window runs from the grant's
//!    answer to its own conservative deadline or release);
//! 3. tokens are unique and increase per key in real-time order;
//! 4. the lock operations of each mutex key are linearizable against a lock model
//!    with leases bounded from below and above ([`lin`], a Wing–Gong
//!    search), and no holder's release is refused before its lease could
//!    have ended;
//! 5. acknowledged grants and releases survive the faults: the keeper
//!    renews one lock through all of them and must end with the same token;
//!    ledger locks (leases longer than the run) must read, at the end,
//!    exactly as their acknowledged grants and releases left them;
//! 6. after the faults heal, every waiting client is served within a bound;
//! 7. every node ends on the same state.
//!
//! # Layout
//!
//! * [`config`]: what a run does and reports.
//! * [`history`]: operations as recorded.
//! * [`register`]: the fenced register the clients write through.
//! * [`workload`]: the clients.
//! * [`keeper`]: the lock held through every fault.
//! * [`sessions`]: the clients that hold keys in sessions (world 0.3).
//! * [`nemesis`]: the faults, recorded with their times and effects.
//! * [`lin`]: the linearizability search.
//! * [`check`]: the checkers.
//! * [`run`]: the run itself.
//! * [`rng`]: the seeded generator behind clients and nemesis.

pub mod check;
pub mod config;
pub mod history;
pub mod http_locks;
pub mod keeper;
pub mod lin;
pub mod nemesis;
pub mod register;
pub mod rng;
pub mod run;
pub mod sessions;
pub mod workload;

pub use config::{Report, RunConfig, Server};
pub use nemesis::{Fault, ALL_FAULTS, PARTITIONS};
pub use run::run;
