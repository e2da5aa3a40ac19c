//! `lockctl acquire KEY --lease D [--wait D] [--hold] [--mode M] [--limit N]
//! [--owner O] [--request-id ID]`: take a lock (a slot of a semaphore, a
//! reader's share) and print its fencing token. The acquire carries a
//! request id, so lockctl retries it through a leader change without ever
//! taking a second grant (with a lock module of world 0.2). With `--hold`,
//! keep renewing it until Ctrl-C or SIGTERM (then release), or exit with
//! status 3 once it is lost.

use std::io::Write as _;
use std::time::Duration;

use anyhow::anyhow;
use lockd_client::{AcquireOptions, Client};
use serde_json::json;

use crate::output::{print, Failure};

/// How often `--hold` checks that the lock is still ours.
const HOLD_CHECK: Duration = Duration::from_millis(50);

pub async fn run(
    client: &Client,
    j: bool,
    key: &str,
    opts: AcquireOptions,
    hold: bool,
) -> Result<(), Failure> {
    let mut g = client.acquire_with(key, opts).await?;
    print(
        j,
        json!({ "key": key, "token": g.token(), "lease_ms": g.lease().as_millis() as u64 }),
        format!(
            "acquired {key} token {} lease {} ms",
            g.token(),
            g.lease().as_millis()
        ),
    );
    if !hold {
        return Ok(());
    }
    // stdout may be a pipe (block-buffered): a script reading the token
    // must get it now, not when we exit.
    let _ = std::io::stdout().flush();
    g.keep_alive();
    // Listen from now on, not only between checks, so no signal slips by.
    let stop = lockd_client::shutdown::signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => {
                g.release().await?;
                return Ok(());
            }
            _ = tokio::time::sleep(HOLD_CHECK) => {
                if !g.is_valid() {
                    return Err(Failure(
                        anyhow!("lost lock {key} (token {}): its lease ran out or it was taken", g.token()),
                        3,
                    ));
                }
            }
        }
    }
}
