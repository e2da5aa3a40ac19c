//! Blocking work (compiling a module, migrating a state, serialising the
//! whole state) off the async workers, or, on a thread that runs the
//! deterministic simulation, inline.
//!
//! A blocking task's completion wakes its waiter from another thread, at a
//! moment no seed decides; on a current-thread runtime that changes the
//! order in which ready tasks run, and a simulated run would no longer
//! replay. The simulation switches its thread to inline work
//! ([`inline_on_this_thread`]), the same call then runs the work where it
//! is awaited, and simulated time does not move while it runs.

use std::cell::Cell;

thread_local! {
    static INLINE: Cell<bool> = const { Cell::new(false) };
}

/// Run blocking work inline on this thread from now on (`true`), or on
/// tokio's blocking pool again (`false`, the default).
pub fn inline_on_this_thread(on: bool) {
    INLINE.with(|i| i.set(on));
}

/// Run `f`: on the blocking pool, or inline on a simulation's thread.
/// `Err` says why the blocking task ended without a result (it panicked).
pub async fn run<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Result<R, String> {
    if INLINE.with(Cell::get) {
        return Ok(f());
    }
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| e.to_string())
}
