//! The ZooKeeper driver: the loop of [`crate::drive`] over the
//! `zookeeper-client` crate, one ZooKeeper session per client (as each
//! etcd client has its own lease).
//!
//! The lock is the crate's own recipe, [`zk::Client::lock`] with
//! [`zk::LockPrefix::new_curator`]: Apache Curator's `InterProcessMutex`
//! (an ephemeral sequential znode `{dir}/_c_{uuid}-lock-{seq}`, held when
//! it is the lowest; otherwise a watch on its predecessor), including
//! Curator's recovery of a znode whose create lost its connection. The
//! lock's directory is the key (`/bench/own/{client}/{generation}`, or
//! `/bench/contended`), made on first use.
//!
//! The release deletes the znode and waits for the answer, like lockd's
//! release and etcd's Unlock. The crate's guard would instead delete it
//! in the background when dropped; dropping it after our delete would send
//! a second delete, and ZooKeeper logs (and fsyncs) even a failed delete as
//! an error transaction. So the guard is forgotten once the delete has
//! answered: that leaks its path string (some 60 bytes a cycle), nothing
//! else — the guard borrows the client and owns no other resource.

use std::time::{Duration, Instant};

use zookeeper_client as zk;

use crate::plan::{done, ClientRun, Keys, Plan, Progress};

/// The session timeout each client asks for: lockd's lease in this
/// benchmark (the server's `maxSessionTimeout` allows it).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one acquire may take before it counts as failed.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// A new session on the ensemble `endpoints` (`host:port` each).
pub async fn connect(endpoints: &[String]) -> Result<zk::Client, String> {
    let cluster = endpoints.join(",");
    let connect = zk::Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .with_server_version(3, 8, 0)
        .connect(&cluster);
    match tokio::time::timeout(SESSION_TIMEOUT, connect).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no session within {SESSION_TIMEOUT:?}")),
    }
}

/// Take the lock on `dir` and release it: one cycle. `Err((error, log))`
/// when it failed, `log` telling whether to keep it with its time.
async fn cycle(
    client: &zk::Client,
    dir: &str,
    r: &mut ClientRun,
    progress: &Progress,
) -> Result<(), (String, bool)> {
    let prefix = zk::LockPrefix::new_curator(dir, "lock-").map_err(|e| (e.to_string(), true))?;
    let parents = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let options = zk::LockOptions::new(zk::Acls::anyone_all())
        .with_ancestor_options(parents)
        .map_err(|e| (e.to_string(), true))?;
    let start = Instant::now();
    let lock = match tokio::time::timeout(ACQUIRE_TIMEOUT, client.lock(prefix, b"", options)).await
    {
        Ok(Ok(lock)) => lock,
        Ok(Err(e)) => return Err((format!("lock: {e}"), true)),
        Err(_) => return Err(("lock timed out after 10 s".into(), false)),
    };
    r.acquired(start, progress);
    match client.delete(lock.lock_path(), None).await {
        Ok(()) => {
            // Deleted: the guard's own (background) delete would only fail,
            // as a logged transaction. See the module's documentation.
            std::mem::forget(lock);
            r.cycles += 1;
            Ok(())
        }
        // The guard, dropped, tries again in the background.
        Err(e) => Err((format!("unlock: {e}"), false)),
    }
}

pub async fn client_loop(endpoints: Vec<String>, mut plan: Plan) -> ClientRun {
    let mut r = ClientRun::default();
    let mut keys = Keys::new(plan.i, plan.contended);
    let mut dir = format!("/{}", keys.current());
    let mut client = None;
    while !done(plan.until, &plan.stop) {
        let Some(c) = client.as_ref() else {
            let connected = connect(&endpoints).await;
            // The clock starts once every client has tried its first.
            plan.begin().await;
            match connected {
                Ok(c) => client = Some(c),
                Err(e) => {
                    r.fail(format!("session: {e}"), true);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            continue;
        };
        // Any failure: a new session (closing the old one deletes its
        // znodes) and a new key, as the etcd driver does.
        if let Err((error, log)) = cycle(c, &dir, &mut r, &plan.progress).await {
            r.fail(error, log);
            client = None;
            dir = format!("/{}", keys.next());
        }
    }
    r
}
