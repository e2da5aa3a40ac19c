//! `lockd` built with the test-only `fault-diverge` feature, under its own
//! name so it can never be mistaken for (or overwrite) the real binary.
//! `tests/audit_divergence.rs` builds it to plant a state divergence on one
//! node and check that the determinism audit names that node.

#[path = "lockd.rs"]
mod lockd_main;

fn main() -> anyhow::Result<()> {
    lockd_main::main()
}
