//! Sessions and holding values through the lock service: what the HTTP
//! and native APIs call to open, renew, read and close a session, and to
//! publish a holding's value (an election's `proclaim`). Checked here
//! before anything is proposed, like acquires ([`super::handle`]); the
//! table's rules are in [`super::table`]'s `sessions` module.

use lockd_core::command::{HolderInfo, SessionInfo};

use super::actor::Msg;
use super::barrier;
use super::error::{
    check_len, check_value, Needs, ServiceError, MAX_OWNER_CHARS, MAX_REQUEST_ID_CHARS,
};
use super::handle::LockService;
use super::table::{Answer, Request, SessionSpec};

/// What opening a session asks for (the principal is the caller's, set by
/// the API from its credentials).
#[derive(Debug, Clone, Default)]
pub struct SessionOpen {
    pub ttl_ms: u64,
    pub principal: String,
    pub owner: String,
    pub request_id: String,
}

fn unexpected(a: Answer) -> ServiceError {
    ServiceError::Unavailable(format!(
        "the lock table answered {a}, not the answer asked for"
    ))
}

impl LockService {
    /// Open a session of `ttl_ms`. Answers its id and TTL; a retry with
    /// the same owner and request id answers the session that opened.
    pub async fn open_session(&self, open: SessionOpen) -> Result<(u64, u64), ServiceError> {
        self.check_ttl(open.ttl_ms)?;
        check_len("owner", &open.owner, MAX_OWNER_CHARS)?;
        check_len("request id", &open.request_id, MAX_REQUEST_ID_CHARS)?;
        self.check_feature("", Needs::Sessions).await?;
        let spec = SessionSpec {
            ttl_ms: open.ttl_ms,
            principal: open.principal,
            owner: open.owner,
            request_id: open.request_id,
            max_sessions: self.limits.max_sessions,
            max_holdings: self.limits.max_session_holdings,
        };
        match self
            .ask_any(|req| Request::OpenSession { req, spec })
            .await?
        {
            Answer::SessionOpened { id, ttl_ms } => Ok((id, ttl_ms)),
            other => Err(unexpected(other)),
        }
    }

    /// Renew session `id` (and so every holding in it) by its TTL, counted
    /// from before this node confirmed its leadership, as a lease
    /// keepalive is. `by`: the caller's principal (`None`: an admin, or no
    /// authentication).
    pub async fn keep_session(&self, id: u64, by: Option<&str>) -> Result<u64, ServiceError> {
        let from = self.clock.now();
        self.confirm_leading().await?;
        let by = by.map(str::to_string);
        match self
            .ask_any(|req| Request::KeepSession { req, id, from, by })
            .await?
        {
            Answer::Extended(ttl) => Ok(ttl),
            other => Err(unexpected(other)),
        }
    }

    /// Close session `id`: every holding in it is released in one entry.
    /// Answers those holdings.
    pub async fn close_session(
        &self,
        id: u64,
        by: Option<&str>,
    ) -> Result<Vec<(String, u64)>, ServiceError> {
        let by = by.map(str::to_string);
        match self
            .ask_any(|req| Request::CloseSession { req, id, by })
            .await?
        {
            Answer::SessionClosed(released) => Ok(released),
            other => Err(unexpected(other)),
        }
    }

    /// Session `id` as the applied state has it, read linearizably, with
    /// the applied index of the read.
    pub async fn session(&self, id: u64) -> Result<(u64, Option<SessionInfo>), ServiceError> {
        barrier::confirm(&self.raft, self.id).await?;
        self.sm
            .session_at(id)
            .map_err(|e| ServiceError::StateMachine(e.to_string()))
    }

    /// The leader of election `key` (its first holding, by token) and the
    /// applied index it was read at, read linearizably: a watch from one
    /// past that index misses no change of leader.
    pub async fn leader(&self, key: &str) -> Result<(u64, Option<HolderInfo>), ServiceError> {
        super::check_key(key)?;
        barrier::confirm(&self.raft, self.id).await?;
        let (at, holders) = self
            .sm
            .holders_at(key)
            .map_err(|e| ServiceError::StateMachine(e.to_string()))?;
        Ok((at, holders.into_iter().next()))
    }

    /// Replace the value of the holding `(key, token)`. `by` as for
    /// [`LockService::keep_session`].
    pub async fn proclaim(
        &self,
        key: &str,
        token: u64,
        value: String,
        by: Option<&str>,
    ) -> Result<(), ServiceError> {
        super::check_key(key)?;
        check_value(&value)?;
        self.check_feature(key, Needs::Values).await?;
        let (key, by) = (key.to_string(), by.map(str::to_string));
        match self
            .ask_any(|req| Request::Proclaim {
                req,
                key,
                token,
                value,
                by,
            })
            .await?
        {
            Answer::Proclaimed => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// The ms left of session `id` on this leader's clock, if it times it.
    pub async fn session_left(&self, id: u64) -> Option<u64> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.tx.send(Msg::SessionLeft { id, reply }).ok()?;
        rx.await.ok().flatten()
    }

    async fn ask_any(&self, request: impl FnOnce(u64) -> Request) -> Result<Answer, ServiceError> {
        self.ask(|req, reply| Msg::Ask {
            request: request(req),
            reply,
        })
        .await
    }

    fn check_ttl(&self, ttl_ms: u64) -> Result<(), ServiceError> {
        let max = self.limits.max_lease_ms;
        match ttl_ms {
            0 => Err(ServiceError::BadTtl { got: 0, max }),
            n if n > max => Err(ServiceError::BadTtl { got: n, max }),
            _ => Ok(()),
        }
    }

    /// Whether the active module has `needs`; a refusal stands only after
    /// the read barrier, as for modes ([`LockService::acquire_with`]).
    pub(super) async fn check_feature(&self, key: &str, needs: Needs) -> Result<(), ServiceError> {
        self.refusal_stands(|s| s.lacks(key, needs)).await
    }

    fn lacks(&self, key: &str, needs: Needs) -> Result<(), ServiceError> {
        let internal =
            |e: lockd_core::engine::EngineError| ServiceError::StateMachine(e.to_string());
        let f = self.sm.features().map_err(internal)?;
        let has = match needs {
            Needs::Sessions => f.sessions,
            Needs::Reentrant => f.reentrant,
            Needs::Values => f.values,
        };
        if has {
            return Ok(());
        }
        let version = self.sm.version().map_err(internal)?;
        Err(ServiceError::Unsupported {
            key: key.to_string(),
            reason: format!(
                "it has no {} (active module: {version}, world {}); upgrade to a module of world lock-sm@0.3.0",
                needs.name(),
                f.world_id
            ),
        })
    }
}
