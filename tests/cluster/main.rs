//! Process-level tests: clusters of real `lockd` processes on loopback
//! (`lockd_tests::cluster`), driven over HTTP, the native protocol and
//! `lockctl`, killed, paused, restarted, corrupted and upgraded.
//!
//! One test binary, one module per scenario file (so `lockd` and wasmtime
//! are linked once, not once per file). Tests run side by side on
//! `RUST_TEST_THREADS` threads (the number of cores by default; four
//! under `scripts/test.sh`): every
//! cluster gets its own temporary directory and ports no other test in the
//! process is given (`free_port`), and nothing here sets environment
//! variables of the test process. A test that measures a time window or
//! loads the whole machine takes it alone first
//! (`lockd_tests::turns::alone`, with the reason beside each call), so no
//! other cluster runs beside it. `cargo test --release --test cluster --
//! <name>` runs one.

mod api_contract;
mod api_generated;
mod audit_divergence;
mod bad_input_http;
mod bad_input_native;
mod client_pause;
mod clock_jump;
mod cluster_first_module;
mod cluster_full_restart;
mod cluster_leader_failover;
mod cluster_membership;
mod cluster_replication;
mod cluster_snapshot_catchup;
mod cluster_snapshot_slow_link;
mod config_layers;
mod election;
mod election_policy;
mod engine_mismatch;
mod forward_hung_leader;
mod guest_isolated;
mod limits_capacity;
mod limits_connections;
mod limits_entries;
mod limits_unauthenticated;
mod limits_waiters;
mod lock_expiry;
mod lock_failover;
mod lock_idempotent;
mod lock_keepalive;
mod lock_lost;
mod lock_phantom;
mod lock_reentrant;
mod lock_reload_race;
mod lock_restart_read;
mod lock_sessions;
mod lock_shared;
mod lock_waiters;
mod lockctl_cli;
mod lockctl_lock;
mod log_recovery;
mod members_bad_input;
mod members_no_quorum;
mod native_client;
mod ops_observe;
mod ops_recovery;
mod peer_hostile;
mod precheck_asks;
mod prevote_flood;
mod raft_handoff;
mod security_hosts;
mod security_roles;
mod security_routes;
mod security_tls;
mod storage_fatal;
mod transport_handshake;
mod upgrade_binary;
mod upgrade_catchup;
mod upgrade_hostile;
mod upgrade_live;
mod upgrade_precheck;
mod upgrade_replay;
mod upgrade_rollback;
mod upgrade_shadow;
mod upgrade_signed;
mod watch_revoked;
mod watch_stream;
mod world02_live;
