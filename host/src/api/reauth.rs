//! Long-lived streams re-authorised while they run: a watch is authorised
//! when it starts and then checked again once a second, by the same rules
//! as a new request (the auth file as reloaded, the caller's certificate
//! valid now), so a token or role removed by a reload, or a certificate
//! that expires, ends the stream with a `revoked` cut within a second
//! (docs/security.md, "Revocation").

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// How often a stream's caller is checked again.
const EVERY: Duration = Duration::from_secs(1);

/// The check: `Err` says why the caller may no longer do what it does.
#[derive(Clone)]
pub struct Reauth(pub Arc<dyn Fn() -> Result<(), String> + Send + Sync>);

/// When a stream checks its caller next.
pub struct Due(Instant);

impl Due {
    pub fn new() -> Due {
        Due(Instant::now() + EVERY)
    }
}

impl Default for Due {
    fn default() -> Self {
        Due::new()
    }
}

impl Reauth {
    /// Returns (why) once the check fails; checked at `due`, then every
    /// [`EVERY`] (kept in `due` across calls, so a busy stream is
    /// checked as often as a quiet one).
    pub async fn revoked(&self, due: &mut Due) -> String {
        loop {
            tokio::time::sleep_until(due.0).await;
            due.0 = Instant::now() + EVERY;
            if let Err(why) = (self.0)() {
                return why;
            }
        }
    }
}
