//! `lockctl lock KEY [--lease 10s] [--wait 10m] [--grace 10s] -- CMD ARGS…`:
//! run a command while holding a lock, as `etcdctl lock` and `consul lock`
//! do; `lockctl lock KEY KEY… [--session]` holds several in one session;
//! `lockctl elect NAME VALUE -- CMD` holds an election's leadership.
//!
//! * With several keys (or `--session`) one session of TTL `--lease` is
//!   opened and the keys are taken in it in the order given; one
//!   keepalive renews them all, the session's close releases them all in
//!   one entry, and CMD also sees `LOCKD_SESSION` and
//!   `LOCKD_FENCING_TOKENS` (`key=token,…`). A key that cannot be taken
//!   closes the session (the others are released) before CMD runs.
//! * An election (`elect`) is the lock of key NAME taken with the value
//!   VALUE: CMD also sees `LOCKD_ELECTION` and `LOCKD_LEADER_EPOCH` (the
//!   leadership's fencing token); its end resigns.
//!
//! * The lock is taken first (waiting up to `--wait`; still held after
//!   it: status 2 and CMD never runs).
//! * CMD runs with `LOCKD_LOCK_KEY`, `LOCKD_FENCING_TOKEN` (to hand to
//!   whatever the lock protects) and `LOCKD_LEASE_MS` in its environment,
//!   its stdin, stdout and stderr lockctl's own. The names of earlier
//!   releases, `LOCKD_KEY` and `LOCKD_TOKEN`, are set too for one more
//!   release; they are also the names lockctl reads its TLS key file and
//!   bearer token from, so a lockctl inside CMD ignores them when they
//!   hold the outer lock's key and token.
//! * The lease is renewed every third of it while CMD runs.
//! * When CMD ends, the lock is released and CMD's status is lockctl's
//!   (128 + the signal's number when a signal ended it, as shells say).
//! * When the lock is lost (a renewal refused, or the lease's end passed
//!   without one, e.g. lockctl was paused), CMD gets SIGTERM, then
//!   SIGKILL after `--grace`, and lockctl exits with status 3, whatever
//!   CMD's own: the work ran, or was cut short, without the lock.
//! * SIGINT or SIGTERM to lockctl is passed to CMD as SIGTERM (SIGKILL
//!   after `--grace`); then the lock is released and CMD's status is
//!   lockctl's.
//! * CMD that cannot be started: 127 when not found, 126 otherwise (as
//!   shells say), after releasing the lock.

use std::process::ExitStatus;
use std::time::Duration;

use anyhow::anyhow;
use lockd_client::{AcquireOptions, Client, ClientError, LockGuard, Session};
use tokio::process::{Child, Command};

use crate::output::Failure;

/// How often the lock's validity is checked while CMD runs.
const CHECK: Duration = Duration::from_millis(50);

/// The names CMD finds the lock in.
pub const ENV_LOCK_KEY: &str = "LOCKD_LOCK_KEY";
pub const ENV_FENCING_TOKEN: &str = "LOCKD_FENCING_TOKEN";

/// The status lockctl exits with when the lock was lost.
pub const LOST: i32 = 3;

pub struct Run {
    /// At least one.
    pub keys: Vec<String>,
    /// Hold the keys in one session of TTL `opts.lease`.
    pub session: bool,
    pub opts: AcquireOptions,
    pub grace: Duration,
    pub command: Vec<String>,
    /// An election's leadership (`keys` is its one name).
    pub election: bool,
}

/// What is held while CMD runs: one lock on its own lease, or a session
/// and the locks in it.
enum Held {
    One(LockGuard),
    Session(Session, Vec<LockGuard>),
}

impl Held {
    fn is_valid(&self) -> bool {
        match self {
            Held::One(g) => g.is_valid(),
            Held::Session(s, _) => s.is_valid(),
        }
    }

    fn guards(&self) -> &[LockGuard] {
        match self {
            Held::One(g) => std::slice::from_ref(g),
            Held::Session(_, gs) => gs,
        }
    }

    fn describe(&self) -> String {
        let locks: Vec<String> = self
            .guards()
            .iter()
            .map(|g| format!("{} (token {})", g.key(), g.token()))
            .collect();
        match self {
            Held::One(_) => format!("lock {}", locks.join(", ")),
            Held::Session(s, _) => format!("session {} with {}", s.id(), locks.join(", ")),
        }
    }

    async fn release(self) -> Result<(), ClientError> {
        match self {
            Held::One(g) => g.release().await,
            Held::Session(s, _) => s.close().await.map(|_| ()),
        }
    }
}

/// Take every key of `r`.
async fn take(client: &Client, r: &Run) -> Result<Held, Failure> {
    let Some(first) = r.keys.first() else {
        return Err(anyhow!("no key to lock").into());
    };
    if !r.session {
        let mut g = client.acquire_with(first, r.opts.clone()).await?;
        g.keep_alive();
        return Ok(Held::One(g));
    }
    let mut s = client.open_session(r.opts.lease).await?;
    s.keep_alive();
    let mut guards = Vec::with_capacity(r.keys.len());
    for k in &r.keys {
        match s.acquire(k, r.opts.clone()).await {
            Ok(g) => guards.push(g),
            Err(e) => {
                let _ = s.close().await;
                return Err(e.into());
            }
        }
    }
    Ok(Held::Session(s, guards))
}

pub async fn run(client: &Client, r: Run) -> Result<(), Failure> {
    let Some((program, args)) = r.command.split_first() else {
        return Err(anyhow!("no command to run: `lockctl lock KEY -- CMD ARGS…`").into());
    };
    let held = take(client, &r).await?;
    let g = &held.guards()[0];
    let key = g.key().to_string();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env(ENV_LOCK_KEY, &key)
        .env(ENV_FENCING_TOKEN, g.token().to_string())
        // Deprecated names, for one release (see the module's docs).
        .env("LOCKD_KEY", &key)
        .env("LOCKD_TOKEN", g.token().to_string())
        .env("LOCKD_LEASE_MS", g.lease().as_millis().to_string());
    if let Held::Session(s, gs) = &held {
        let tokens: Vec<String> = gs
            .iter()
            .map(|g| format!("{}={}", g.key(), g.token()))
            .collect();
        cmd.env("LOCKD_SESSION", s.id().to_string())
            .env("LOCKD_FENCING_TOKENS", tokens.join(","));
    }
    if r.election {
        cmd.env("LOCKD_ELECTION", &key)
            .env("LOCKD_LEADER_EPOCH", g.token().to_string());
    }
    let spawned = cmd.spawn();
    let g = held;
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            let released = g.release().await;
            return Err(Failure(
                anyhow!("cannot run {program:?}: {e}{}", release_note(released)),
                code,
            ));
        }
    };
    let stop = lockd_client::shutdown::signal();
    tokio::pin!(stop);
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = &mut stop => {
                let status = end(&mut child, r.grace).await;
                return finish(g, status).await;
            }
            _ = tokio::time::sleep(CHECK) => {
                if !g.is_valid() {
                    let _ = end(&mut child, r.grace).await;
                    return Err(lost(&g));
                }
            }
        }
    };
    if !g.is_valid() {
        return Err(lost(&g));
    }
    finish(g, status).await
}

fn lost(held: &Held) -> Failure {
    Failure(
        anyhow!(
            "lost {} while the command ran: its lease ran out or it was taken; the command was stopped",
            held.describe()
        ),
        LOST,
    )
}

fn release_note(r: Result<(), ClientError>) -> String {
    match r {
        Ok(()) => String::new(),
        Err(e) => format!(" (and the lock's release failed: {e}; its lease will end it)"),
    }
}

/// Release the lock(s), then exit as CMD did.
async fn finish(g: Held, status: std::io::Result<ExitStatus>) -> Result<(), Failure> {
    let what = g.describe();
    let released = g.release().await;
    let status = status.map_err(|e| anyhow!("cannot wait for the command: {e}"))?;
    if let Err(e) = released {
        eprintln!(
            "lockctl: the command ended but releasing {what} failed: {e}; its lease will end it"
        );
    }
    match code_of(status) {
        0 => Ok(()),
        // CMD's status is lockctl's, with nothing added: CMD said what
        // went wrong, if anything did.
        code => std::process::exit(code),
    }
}

/// CMD's status as a shell reports it.
fn code_of(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    }
}

/// SIGTERM, then SIGKILL if CMD has not ended within `grace`.
async fn end(child: &mut Child, grace: Duration) -> std::io::Result<ExitStatus> {
    if let Some(pid) = child.id() {
        // The pid is our own child's, not yet reaped: it cannot have been
        // reused.
        let pid = libc::pid_t::try_from(pid).map_err(std::io::Error::other)?;
        // SAFETY: kill(2) with a valid signal number has no memory effects.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            child.start_kill()?;
            child.wait().await
        }
    }
}
