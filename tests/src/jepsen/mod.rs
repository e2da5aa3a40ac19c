//! Jepsen-style verification: real clusters, concurrent clients, faults,
//! and checkers over the recorded history.
//!
//! A run starts a cluster of real `lockd` processes, lets clients take locks
//! and update a **fenced register** under them while a nemesis injects
//! faults, records every operation's invocation and completion, heals, and
//! then checks the history:
//!
//! 1. no lost update through the fenced register ([`register`]), and no two
//!    clients believing they hold one key at once (each holder's window runs
//!    from the grant's answer to its own conservative deadline or release);
//! 2. tokens are unique and increase per key in real-time order;
//! 3. the lock operations of each key are linearizable against a lock model
//!    with leases ([`lin`], a Wing–Gong search), and no holder's release is
//!    refused before its lease could have ended;
//! 4. acknowledged grants and releases survive the faults (final state);
//! 5. after the faults heal, every waiting client is served within a bound.
//!
//! # Layout
//!
//! * [`history`]: operations as recorded.
//! * [`register`]: the fenced register the clients write through.
//! * [`lin`]: the linearizability search.
//! * [`check`]: the checkers.
//! * [`run`]: workload, nemesis, and the run itself.

pub mod check;
pub mod history;
pub mod lin;
pub mod register;
pub mod run;
