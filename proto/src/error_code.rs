//! [`ErrorCode`]: the stable, machine-readable code of every error answer
//! (HTTP's `code`, the native protocol's error trailer), which clients
//! match instead of the text. The list is in docs/api.md, "Error codes".

use serde::{Deserialize, Serialize};

macro_rules! codes {
    ($($(#[doc = $doc:literal])* $name:ident = $text:literal => $status:literal,)*) => {
        /// A stable error code. New codes are appended; a client meeting
        /// one it does not know falls back on the HTTP status or the
        /// native error's kind.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub enum ErrorCode {
            $($(#[doc = $doc])* $name,)*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name,)*];

            /// The code as it travels (`snake_case`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$name => $text,)*
                }
            }

            /// What the code means (its doc comment), for the docs.
            pub fn describe(self) -> &'static str {
                match self {
                    $(ErrorCode::$name => concat!($($doc, " ",)*).trim_ascii(),)*
                }
            }

            /// The HTTP status of an answer with this code. One code, one
            /// status, with one exception: `bad_module_key` is 422 for a
            /// key that is not usable, 409 when the trusted keys are full
            /// and 404 for removing a key that is not trusted (the node's
            /// upgrade errors say which).
            pub fn http_status(self) -> u16 {
                match self {
                    $(ErrorCode::$name => $status,)*
                }
            }

            /// The code named `s`, if this build knows it.
            pub fn parse(s: &str) -> Option<ErrorCode> {
                match s {
                    $($text => Some(ErrorCode::$name),)*
                    _ => None,
                }
            }
        }
    };
}

codes! {
    /// Malformed input not covered by a more precise code (a body that is
    /// not the route's JSON, a bad query or path).
    BadRequest = "bad_request" => 400,
    /// A key (or prefix) empty, too long or not UTF-8.
    InvalidKey = "invalid_key" => 400,
    /// A lease of 0 or over `--max-lease-ms`.
    InvalidLease = "invalid_lease" => 400,
    /// A wait over `--max-wait-ms`.
    InvalidWait = "invalid_wait" => 400,
    /// A limit of 0 or out of range (an acquire's, a listing's).
    InvalidLimit = "invalid_limit" => 400,
    /// An owner name or request id over its bound.
    FieldTooLong = "field_too_long" => 400,
    /// A body over the route's limit.
    BodyTooLarge = "body_too_large" => 413,
    /// A body without the Content-Type the route takes.
    BadContentType = "bad_content_type" => 415,
    /// No such route.
    NotFound = "not_found" => 404,
    /// A route that does not take this method.
    MethodNotAllowed = "method_not_allowed" => 405,
    /// No credentials, or ones the node does not accept.
    Unauthenticated = "unauthenticated" => 401,
    /// The caller's roles do not allow it (or a cross-site request).
    Forbidden = "forbidden" => 403,
    /// Still held when the wait (if any) ended.
    Held = "held" => 409,
    /// Nothing holds the key with that token.
    NotHeld = "not_held" => 404,
    /// The token is not the holder's.
    WrongToken = "wrong_token" => 409,
    /// The holding is another principal's.
    NotHolder = "not_holder" => 403,
    /// The module's policy refused the grant.
    Refused = "refused" => 403,
    /// A quota of the module's policy data is used up.
    Quota = "quota" => 429,
    /// The cluster's capacity bound is reached.
    Capacity = "capacity" => 507,
    /// The active module cannot serve the request as asked.
    Unsupported = "unsupported" => 422,
    /// The module refused the policy data.
    PolicyRefused = "policy_refused" => 422,
    /// Too many callers wait (for the key, or on the node).
    TooManyWaiters = "too_many_waiters" => 429,
    /// Too many requests or connections at once: try again shortly.
    Overloaded = "overloaded" => 503,
    /// Another node leads (`leader` names it when known).
    NotLeader = "not_leader" => 503,
    /// No quorum, leadership changing, Raft stopped: try again.
    Unavailable = "unavailable" => 503,
    /// The node did not finish in time.
    Timeout = "timeout" => 504,
    /// A bug or an unexpected state on the node.
    Internal = "internal" => 500,
    /// A membership change names an address that is not HOST:PORT.
    BadAddress = "bad_address" => 400,
    /// The node at the address is not the one named, or refuses to join.
    NodeRefused = "node_refused" => 422,
    /// The node at the address could not be reached.
    NodeUnreachable = "node_unreachable" => 502,
    /// Removing the only voter.
    LastVoter = "last_voter" => 409,
    /// Not a member.
    NotMember = "not_member" => 404,
    /// Promoting a node that is not a learner.
    NotLearner = "not_learner" => 409,
    /// A learner of another implementation not yet matched at enough
    /// audit points, or diverged.
    NotAudited = "not_audited" => 409,
    /// A learner still catching up.
    CatchingUp = "catching_up" => 504,
    /// The module is not a valid component of a supported world.
    InvalidModule = "invalid_module" => 400,
    /// A signature missing, malformed or not by a trusted key.
    BadSignature = "bad_signature" => 403,
    /// The upgrade names a module that is no longer the active one.
    StaleModule = "stale_module" => 409,
    /// The module was refused (validation, migration) before or at apply.
    ModuleRefused = "module_refused" => 422,
    /// Another upgrade or shadow is under way.
    Busy = "busy" => 503,
    /// A module key that is not 64 hex digits or not trusted, or too many.
    BadModuleKey = "bad_module_key" => 422,
    /// No shadow is running (promote, abort).
    NoShadow = "no_shadow" => 404,
    /// The shadow diverged or failed; or the module is already active.
    ShadowConflict = "shadow_conflict" => 409,
    /// A watch from an index older than the changes kept.
    Compacted = "compacted" => 410,
    /// Too many watch streams on the node.
    TooManyWatchers = "too_many_watchers" => 429,
    /// The node is shutting down.
    ShuttingDown = "shutting_down" => 503,
    /// No such session: never opened, closed, or expired.
    NoSession = "no_session" => 404,
    /// A session TTL of 0 or over `--max-lease-ms`.
    InvalidTtl = "invalid_ttl" => 400,
    /// The session is another principal's.
    NotSessionHolder = "not_session_holder" => 403,
    /// The lock module failed on this command (a trap, its fuel budget,
    /// its memory limit): refused on every node, the cluster serving on.
    /// The same command on the same state fails again; status names it.
    ModuleFailed = "module_failed" => 500,
    /// An upgrade to a module whose version is not above the active
    /// module's, or that declares none, not marked as a rollback.
    ModuleNotNewer = "module_not_newer" => 409,
    /// A rollback with no previous module to return to.
    NoPreviousModule = "no_previous_module" => 404,
    /// A voter refused the module at the quorum pre-check, or too few
    /// accepted it: nothing was swapped; the details give each voter's
    /// verdict.
    PrecheckRefused = "precheck_refused" => 409,
    /// The caller stopped sending a request's body (nothing of it arrived
    /// for 30 s): nothing was done.
    RequestTimeout = "request_timeout" => 408,
    /// The request's `Host` names none of the node's names (an IP
    /// address, `localhost`, its advertised or listen address, a name of
    /// `--allowed-hosts`), as a request of a web page whose name was made
    /// to resolve to the node (DNS rebinding) would: 421, nothing was
    /// done. Checked on every request with authentication off; with it
    /// on, on a browser's request that can change state.
    UnknownHost = "unknown_host" => 421,
    /// A long-lived stream (a watch) ended because the caller's right to
    /// it was revoked: its token or role removed by a reload, or its
    /// certificate expired.
    Revoked = "revoked" => 403,
}

impl ErrorCode {
    /// Whether a caller should try again shortly (HTTP adds
    /// `Retry-After: 1`): a bound reached for now, not a refusal.
    pub fn retry_soon(self) -> bool {
        matches!(
            self,
            ErrorCode::Overloaded
                | ErrorCode::TooManyWaiters
                | ErrorCode::TooManyWatchers
                | ErrorCode::Busy
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_reads_back_and_serialises_as_its_text() {
        for c in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(c.as_str()), Some(*c));
            let json = serde_json::to_string(c).expect("json");
            assert_eq!(json, format!("\"{}\"", c.as_str()));
        }
        assert_eq!(ErrorCode::parse("no_such_code"), None);
        let mut seen = std::collections::HashSet::new();
        assert!(
            ErrorCode::ALL.iter().all(|c| seen.insert(c.as_str())),
            "a code twice"
        );
    }
}
