//! `lockd` built with the test-only fault features, under its own name so
//! it can never be mistaken for (or overwrite) the real binary. Each fault
//! acts only when its environment variable is set on the node: a planted
//! state divergence (`fault-diverge`, for the determinism audit test), a
//! held-back answer (`fault-stale-done`, the reload-race test), and leases
//! that end early (`fault-early-expiry`, `fault-double-grant`, the broken
//! variants the fault-injection checkers must catch), and a leader that
//! dies between a grant's commit and its answer (`fault-die-before-answer`,
//! the idempotent-acquire test).

#[path = "lockd/main.rs"]
mod lockd_main;

fn main() -> anyhow::Result<()> {
    lockd_main::main()
}
