//! A node: the pieces assembled and started.
//!
//! ```text
//! data dir ─┬─ node.meta        id + engine fingerprint (checked at every start)
//!           ├─ cluster.id       the cluster's id           (cluster_id)
//!           ├─ raft/wal/        the log segments          (log_store)
//!           ├─ raft/vote        the vote                  (log_store)
//!           ├─ raft/purged      the purge point           (log_store)
//!           ├─ snapshot/current the last snapshot         (state_machine)
//!           ├─ module-cache/    compiled components       (engine::cache)
//!           └─ module-cache.key the key that authenticates them (0600)
//! ```
//!
//! `--module-cache` puts the last two elsewhere (nodes of one machine may
//! share them).
//!
//! Start order: bind the address (so a busy port fails first), check the
//! data dir against this binary's engine, open the state machine (restoring
//! the snapshot) and the log (recovering the WAL), start Raft, serve, and on
//! a pristine data dir bootstrap the initial cluster.

mod error;
mod lifecycle;
mod meta;
mod storage;

pub use error::NodeError;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

use self::storage::Storage;
use crate::api::services::Parts;
use crate::api::Services;
use crate::auth::Auth;
use crate::config::NodeConfig;
use crate::membership::Membership;
use crate::modules::submit::Upgrader;
use crate::raft::log_store::Writer;
use crate::raft::peer_client::NetworkFactory;
use crate::raft::state_machine::StateMachineStore;
use crate::raft::{Node as RaftNode, NodeId, Raft};
use crate::service::proposer::Proposer;
use crate::service::LockService;
use crate::transport::tls::TlsServer;
use lockd_core::engine::WasmEngine;
use lockd_net::tls::TlsClient;
use lockd_net::Credentials;

/// A running node.
pub struct Node {
    pub id: NodeId,
    pub config: NodeConfig,
    /// What the APIs use; shared with every connection.
    pub services: Arc<Services>,
    /// Raft and the state machine, for bootstrap, shutdown and failure.
    raft: Raft,
    sm: StateMachineStore,
    /// The rules, reloaded on SIGHUP.
    auth: Arc<Auth>,
    shutdown: watch::Sender<bool>,
    /// Every task the node started, connections included: shutdown waits
    /// for them (mini-redis's shutdown, with a tracker instead of a
    /// channel).
    tasks: TaskTracker,
    /// The lock service's tasks (its actor, the proposer, proposals in
    /// flight): stopped after Raft, which ends what they wait on.
    service_tasks: crate::service::ServiceTasks,
    /// A leader that stops hands over first.
    handoff: crate::raft::handoff::Handoff,
}

/// How long [`Node::shutdown`] waits for connections to finish what they
/// are serving (an acquire may be waiting for its key) before it leaves
/// them to be dropped with the runtime.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What the deterministic simulation replaces beneath a node; production
/// takes the default. (The network's seam is process-wide:
/// `lockd_net::socket`.)
#[derive(Clone, Default)]
pub struct Seams {
    /// Who writes the Raft log: its own thread (production), or the
    /// caller (the simulation, where a thread's timing is not under the
    /// seed).
    pub log_writer: Writer,
    /// The wasm engine, shared with other nodes of the process (the
    /// simulation's, whose nodes would otherwise each compile the same
    /// modules); `None`: the node's own, with its cache in its data dir.
    /// It must have the settings of the node's configuration.
    pub engine: Option<Arc<WasmEngine>>,
    /// The clock leases are timed on; `None`: the machine's monotonic
    /// clock (the simulation gives each node one that drifts).
    pub lease_clock: Option<Arc<dyn crate::service::clock::LeaseClock>>,
    /// Sees what the state machine applies (the simulation's record,
    /// checked against what clients were acknowledged); `None`: nothing.
    pub applied: Option<crate::watch::Observer>,
}

impl Node {
    /// Start a node and serve until [`Node::shutdown`].
    pub fn start(config: NodeConfig) -> BoxFuture<'static, Result<Arc<Node>, NodeError>> {
        Node::start_with(config, Seams::default())
    }

    /// [`Node::start`] with `seams` beneath it. Boxed here: an `async fn`'s
    /// body is compiled in every crate that polls it, the whole node again
    /// in the binary and each test crate (docs/testing.md, "CI time").
    #[inline(never)]
    pub fn start_with(
        config: NodeConfig,
        seams: Seams,
    ) -> BoxFuture<'static, Result<Arc<Node>, NodeError>> {
        Box::pin(Node::start_inner(config, seams))
    }

    async fn start_inner(config: NodeConfig, seams: Seams) -> Result<Arc<Node>, NodeError> {
        config.validate()?;
        let listener = lockd_net::socket::bind(config.listen_addr())
            .await
            .map_err(|source| NodeError::Bind {
                addr: config.listen_addr().to_string(),
                source,
            })?;
        // The node's certificate serves callers and is its own identity
        // towards its peers (Raft, forwarding, audit reads).
        let (tls_server, peer_tls) = match &config.tls {
            Some(t) => (
                Some(TlsServer::from_files(&t.cert, &t.key, &t.ca)?),
                Some(TlsClient::from_files(&t.ca, Some((&t.cert, &t.key)))?),
            ),
            None => (None, None),
        };
        let auth = Arc::new(match &config.auth_file {
            Some(path) => Auth::from_file(path)?,
            None => Auth::off(),
        });
        let as_node = Credentials {
            tls: peer_tls.clone(),
            token: None,
        };
        let dir = config.data_dir.clone();
        let Storage {
            engine,
            cluster,
            sm,
            log,
        } = storage::open(&config, seams.engine, seams.applied, seams.log_writer)?;

        let raft_config = storage::raft_config(&config)?;
        let standing = crate::raft::non_member::Standing::new();
        let silence = crate::raft::stand::Silence::new(crate::raft::prevote::Waits {
            election: Duration::from_millis(config.raft.election_timeout_ms),
            lease: Duration::from_millis(config.raft_timeouts().1),
        });
        let vouches = crate::raft::leader_vouch::Vouches::new();
        let snapshot_sends = Arc::new(crate::raft::snapshot_counts::SendCounts::default());
        let network = NetworkFactory {
            my_id: config.id,
            fingerprint: engine.fingerprint().text.clone(),
            connect_timeout: Duration::from_millis(config.raft.heartbeat_ms.max(500)),
            tls: peer_tls.clone(),
            cluster: cluster.clone(),
            standing: standing.clone(),
            stall: Duration::from_millis(config.raft.election_timeout_ms),
            retry: Duration::from_millis(config.raft.heartbeat_ms),
            snapshot_sends: snapshot_sends.clone(),
            idle: Default::default(),
        };
        let peers = network.clone();
        let voters = network.clone();
        let successors = network.clone();
        let raft = Raft::new(
            config.id,
            Arc::new(raft_config),
            network,
            log.clone(),
            sm.clone(),
        )
        .await
        .map_err(|e| NodeError::Raft(e.to_string()))?;

        let (shutdown, shutdown_rx) = watch::channel(false);
        let service_tasks = crate::service::ServiceTasks::new();
        let proposer = Proposer::start(
            raft.clone(),
            config.id,
            &service_tasks,
            sm.latency().stages.clone(),
        );
        // The longest an election can take: a new leader adds it to every
        // held lease it inherits.
        let election_max = Duration::from_millis(config.election_max_ms());
        let locks = LockService::start(
            config.id,
            raft.clone(),
            sm.clone(),
            proposer,
            election_max,
            seams
                .lease_clock
                .clone()
                .unwrap_or_else(|| Arc::new(crate::service::clock::Monotonic::start())),
            crate::service::RequestLimits {
                max_lease_ms: config.limits.max_lease_ms,
                max_wait_ms: config.limits.max_wait_ms,
                waiters: crate::service::table::WaitLimits {
                    per_key: config.limits.max_waiters_per_key,
                    total: config.limits.max_waiters,
                },
                max_requests: config.limits.max_requests,
                max_sessions: config.limits.max_sessions,
                max_session_holdings: config.limits.max_session_holdings,
            },
        );
        let gate = crate::transport::limits::Gate::new(config.conn.clone());
        let leader_changes = Arc::new(AtomicU64::new(0));
        let services = Arc::new(Services::new(Parts {
            id: config.id,
            addr: config.addr.clone(),
            raft: raft.clone(),
            sm: sm.clone(),
            log: log.clone(),
            engine: engine.clone(),
            locks,
            upgrader: Upgrader::new(config.id, raft.clone(), sm.clone(), peers),
            membership: Membership::new(
                config.id,
                raft.clone(),
                engine.fingerprint().text.clone(),
                peer_tls,
                crate::membership::PromoteGate {
                    sm: sm.clone(),
                    http: lockd_net::http::Http::secured(Duration::from_secs(5), as_node.clone()),
                    implementation: engine.fingerprint().implementation(),
                    audit_points: config.raft.promote_audit_points,
                },
                cluster.clone(),
                10 * config.raft.election_timeout_ms,
            ),
            peer_gate: crate::raft::peer_check::PeerGate::new(config.limits.max_snapshot_bytes),
            standing: standing.clone(),
            silence: silence.clone(),
            election_timeout_ms: config.raft.election_timeout_ms,
            election_max_ms: config.election_max_ms(),
            vouches: vouches.clone(),
            max_module_bytes: config.limits.max_module_bytes,
            conn: gate.clone(),
            tls_required: tls_server.is_some(),
            auth: auth.clone(),
            allowed_hosts: crate::api::hosts::AllowedHosts::new(
                [config.addr.as_str(), config.listen_addr()],
                &config.allowed_hosts,
            ),
            forwarder: crate::transport::http::Forwarder::new(as_node.clone()),
            leader_changes: leader_changes.clone(),
            snapshot_sends,
            cluster: cluster.clone(),
        }));
        let node = Arc::new(Node {
            id: config.id,
            config: config.clone(),
            services: services.clone(),
            raft: raft.clone(),
            sm: sm.clone(),
            auth: auth.clone(),
            shutdown,
            tasks: TaskTracker::new(),
            service_tasks,
            handoff: crate::raft::handoff::Handoff {
                id: config.id,
                raft: raft.clone(),
                peers: successors,
                election: Duration::from_millis(config.raft.election_timeout_ms),
            },
        });
        let span = tracing::info_span!("node", id = node.id);
        tracing::info!(parent: &span, addr = %config.addr, listen = %config.listen_addr(), data_dir = %dir.display(), fingerprint = %engine.fingerprint().short(), cluster = %cluster.get().map_or("(none yet)".into(), |c| c.to_string()), tls = tls_server.is_some(), auth = auth.is_on(), "node started");

        #[cfg(feature = "faults")]
        {
            let armed: Vec<String> = std::env::vars_os()
                .filter_map(|(k, _)| k.into_string().ok())
                .filter(|k| k.starts_with("LOCKD_FAULT_"))
                .collect();
            tracing::warn!(parent: &span, ?armed, "this build carries the test-only faults (docs/testing.md, \"Test-only faults\"); each acts only while its variable is set");
        }

        let served = services.clone();
        let tasks = &node.tasks;
        tasks.spawn(crate::transport::listener::serve(
            listener,
            gate,
            tls_server,
            move |c| crate::api::serve(served.clone(), c),
            shutdown_rx.clone(),
            tasks.clone(),
        ));

        tasks.spawn(silence.run(
            raft.clone(),
            config.id,
            log.clone(),
            voters,
            standing,
            shutdown_rx.clone(),
        ));
        tasks.spawn(vouches.run(
            raft.clone(),
            config.id,
            lockd_net::http::Http::secured(Duration::from_secs(2), as_node.clone()),
            shutdown_rx.clone(),
        ));
        tasks.spawn(lifecycle::count_leader_changes(
            raft.clone(),
            leader_changes,
            shutdown_rx.clone(),
        ));
        tasks.spawn(crate::raft::snapshot_policy::run(
            raft.clone(),
            sm.clone(),
            log,
            config.raft.snapshot_threshold,
            shutdown_rx.clone(),
        ));
        tasks.spawn(crate::modules::audit_checker::run(
            config.id,
            raft,
            sm,
            Duration::from_millis(config.raft.audit_check_ms),
            as_node,
            shutdown_rx,
        ));

        if let Some(members) = config.bootstrap_members() {
            node.bootstrap(members).await?;
        }
        Ok(node)
    }

    /// The rules callers are checked against (the auth file's, or off),
    /// for reloading them.
    pub fn auth(&self) -> &Auth {
        &self.auth
    }

    /// Tasks the node started that have not ended yet (the listener, the
    /// background tasks, connections).
    pub fn tasks_running(&self) -> usize {
        self.tasks.len() + self.service_tasks.running()
    }

    /// Raft's view of this node (role, term, leader), as it changes.
    pub fn raft_metrics(&self) -> watch::Receiver<openraft::RaftMetrics<NodeId, RaftNode>> {
        self.raft.metrics()
    }

    /// Resolves when shutdown has been requested.
    pub async fn stopped(&self) {
        let mut rx = self.shutdown.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }
}
