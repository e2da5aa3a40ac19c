//! Talking to the cluster's nodes: lockctl, HTTP requests, status and
//! metrics, and waiting on a condition (a node up, a leader, convergence).

use super::*;

impl Cluster {
    /// Every node's address.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.values().map(|n| n.addr.clone()).collect()
    }

    /// A `lockctl` command pointed at every node of this cluster (as its
    /// admin when secure).
    pub fn lockctl(&self) -> Command {
        self.lockctl_as(Who::Cert("admin"))
    }

    /// A `lockctl` command presenting `who`'s credentials.
    pub fn lockctl_as(&self, who: Who) -> Command {
        let mut cmd = Command::new(lockd_bin().with_file_name("lockctl"));
        cmd.args(["--endpoints", &self.endpoints().join(",")]);
        if let Some(s) = &self.secure {
            cmd.args(s.lockctl_args(who));
        }
        cmd
    }

    pub fn addr(&self, id: u64) -> &str {
        &self.nodes[&id].addr
    }

    pub fn running(&self) -> Vec<u64> {
        self.nodes
            .values()
            .filter(|n| n.is_running())
            .map(|n| n.id)
            .collect()
    }

    fn request(
        &self,
        id: u64,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Reply, String> {
        self.http.request(self.addr(id), method, path, body)
    }

    pub fn get(&self, id: u64, path: &str) -> Result<Reply, String> {
        self.request(id, "GET", path, None)
    }

    pub fn post(&self, id: u64, path: &str, body: Value) -> Result<Reply, String> {
        self.request(id, "POST", path, Some(body))
    }

    pub fn put(&self, id: u64, path: &str, body: Value) -> Result<Reply, String> {
        self.request(id, "PUT", path, Some(body))
    }

    pub fn delete(&self, id: u64, path: &str) -> Result<Reply, String> {
        self.request(id, "DELETE", path, None)
    }

    /// POST raw bytes (a module) to node `id`.
    pub fn post_bytes(&self, id: u64, path: &str, body: &[u8]) -> Result<Reply, String> {
        self.http.post_bytes(self.addr(id), path, body)
    }

    /// Node `id`'s audit points.
    pub fn audit(&self, id: u64) -> Option<lockd_proto::AuditReport> {
        let r = self.get(id, "/v1/audit").ok()?;
        serde_json::from_value(r.body).ok()
    }

    pub fn status(&self, id: u64) -> Option<Status> {
        let r = self.get(id, "/v1/status").ok()?;
        serde_json::from_value(r.body).ok()
    }

    /// Wait until node `id` answers HTTP.
    pub fn wait_up(&self, id: u64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.status(id).is_none() {
            assert!(
                Instant::now() < deadline,
                "node {id} did not come up within {timeout:?}: {}",
                self.describe()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait until every running node whose Raft runs agrees on one
    /// leader; returns it.
    pub fn wait_leader(&self, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let statuses: Vec<Status> = self
                .running()
                .into_iter()
                .filter_map(|id| self.status(id))
                .collect();
            if statuses.len() == self.running().len() {
                if let Some(l) = statuses
                    .iter()
                    .find(|s| s.role == lockd_proto::Role::Leader)
                {
                    // A node whose Raft stopped (it cannot run the
                    // module, say) names no leader and is not asked.
                    if statuses
                        .iter()
                        .filter(|s| s.role != lockd_proto::Role::Shutdown)
                        .all(|s| s.leader == Some(l.id) && s.term == l.term)
                    {
                        return l.id;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "no agreed leader within {timeout:?}: {}",
                self.describe()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until every running node has applied the same index with the
    /// same state hash and the same module; returns that status. For a
    /// quiet cluster: under steady load use [`Cluster::wait_applied`].
    pub fn wait_converged(&self, timeout: Duration) -> Status {
        let deadline = Instant::now() + timeout;
        loop {
            let statuses: Vec<Status> = self
                .running()
                .into_iter()
                .filter_map(|id| self.status(id))
                .collect();
            if statuses.len() == self.running().len() && !statuses.is_empty() {
                let s0 = &statuses[0];
                let same = statuses.iter().all(|s| {
                    s.applied_index == s0.applied_index
                        && s.state_hash == s0.state_hash
                        && s.module_hash == s0.module_hash
                });
                if same && s0.applied_index > 0 {
                    return s0.clone();
                }
            }
            assert!(
                Instant::now() < deadline,
                "nodes did not converge within {timeout:?}: {}",
                self.describe()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until every running node has applied `index`. Under load this
    /// is the check to use, not [`Cluster::wait_converged`]: a follower
    /// learns a commit with the next append, so while entries keep coming
    /// the nodes are rarely at one index in the same moment.
    pub fn wait_applied(&self, index: u64, timeout: Duration) {
        wait_for(&format!("every node applying {index}"), timeout, || {
            self.running()
                .into_iter()
                .all(|id| self.status(id).is_some_and(|s| s.applied_index >= index))
        });
    }

    /// Node `id`'s status once its log, commit and applied indexes agree
    /// in one reading: the Raft metrics a status reports (the last log
    /// index among them) may trail what the state machine has applied for
    /// a moment, so a status read just after a write can be behind itself.
    pub fn wait_settled(&self, id: u64, timeout: Duration) -> Status {
        let mut settled = None;
        wait_for(&format!("node {id} settled"), timeout, || {
            settled = self.status(id).filter(|s| {
                s.last_log_index > 0
                    && s.commit_index == s.last_log_index
                    && s.applied_index == s.last_log_index
            });
            settled.is_some()
        });
        settled.expect("settled")
    }

    /// Wait until node `id` has applied `applied` and purged its log past
    /// `index` (it snapshotted: a node behind `index` can only catch up
    /// from it by a snapshot install).
    pub fn wait_purged_past(&self, id: u64, applied: u64, index: u64, timeout: Duration) {
        wait_for(
            &format!("node {id} applying {applied} and purging past {index}"),
            timeout,
            || {
                self.status(id).is_some_and(|st| {
                    st.applied_index >= applied && st.purged_index.unwrap_or(0) > index
                })
            },
        );
    }

    /// Try once to take `key` on node `id`.
    pub fn acquire(&self, id: u64, key: &str, lease_ms: u64) -> Result<Reply, String> {
        self.post(
            id,
            &format!("/v1/locks/{key}/acquire"),
            json!({ "lease_ms": lease_ms }),
        )
    }

    pub fn release(&self, id: u64, key: &str, token: u64) -> Result<Reply, String> {
        self.post(
            id,
            &format!("/v1/locks/{key}/release"),
            json!({ "token": token }),
        )
    }

    pub fn keepalive(&self, id: u64, key: &str, token: u64) -> Result<Reply, String> {
        self.post(
            id,
            &format!("/v1/locks/{key}/keepalive"),
            json!({ "token": token }),
        )
    }

    /// A metric's value on node `id`: the first sample that `selector`
    /// matches, `name` or `name{label="value",…}` (the sample may carry
    /// more labels, such as `node`).
    pub fn metric(&self, id: u64, selector: &str) -> Option<u64> {
        let text = self.metrics_text(id)?;
        crate::metrics::value(&text, selector).map(|v| v as u64)
    }

    /// Node `id`'s `/metrics`, as text.
    pub fn metrics_text(&self, id: u64) -> Option<String> {
        self.http.text(self.addr(id), "/metrics")
    }

    pub fn lock(&self, id: u64, key: &str) -> Result<Reply, String> {
        self.get(id, &format!("/v1/locks/{key}"))
    }

    /// Acquire on whichever node is leader now, retrying through elections
    /// until `timeout`. Returns the token.
    pub fn acquire_on_leader(&self, key: &str, lease_ms: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        loop {
            let leader = self.wait_leader(
                deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1)),
            );
            match self.acquire(leader, key, lease_ms) {
                Ok(r) if r.ok() => return r.body["token"].as_u64().expect("token"),
                Ok(r) if r.status == 409 => panic!("{key} is unexpectedly held: {r:?}"),
                other => assert!(
                    Instant::now() < deadline,
                    "acquire {key} failed until the deadline: {other:?}"
                ),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Release `token` on `key` on whichever node is leader now, retrying
    /// through elections. "Not held" is an answer only after an attempt
    /// whose outcome was unknown (that attempt may have released it).
    pub fn release_on_leader(&self, key: &str, token: u64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut unknown = false;
        loop {
            let leader = self.wait_leader(
                deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1)),
            );
            match self.release(leader, key, token) {
                Ok(r) if r.ok() => return,
                Ok(r) if r.status == 404 && unknown => return,
                Ok(r) if r.status == 404 || r.status == 409 => {
                    panic!("release of {key} (token {token}) refused: {r:?}")
                }
                other => {
                    unknown |= other.as_ref().map_or(true, |r| r.status >= 500);
                    assert!(
                        Instant::now() < deadline,
                        "release {key} failed until the deadline: {other:?}"
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One line per node: role, term, indexes, hash; and where the logs are.
    pub fn describe(&self) -> String {
        let mut out = format!("(logs in {})", self.dir.path().display());
        for id in self.nodes.keys() {
            match self.status(*id) {
                Some(s) => out.push_str(&format!(
                    "\n  node {id}: {} term {} leader {:?} commit {} applied {} hash {}",
                    s.role,
                    s.term,
                    s.leader,
                    s.commit_index,
                    s.applied_index,
                    &s.state_hash[..12.min(s.state_hash.len())]
                )),
                None => out.push_str(&format!("\n  node {id}: down")),
            }
        }
        out
    }
}
