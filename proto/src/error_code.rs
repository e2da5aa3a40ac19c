//! [`ErrorCode`]: the stable, machine-readable code of every error answer
//! (HTTP's `code`, the native protocol's error trailer), which clients
//! match instead of the text. The list is in docs/api.md, "Error codes".

use serde::{Deserialize, Serialize};

macro_rules! codes {
    ($($(#[doc = $doc:literal])* $name:ident = $text:literal,)*) => {
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
    BadRequest = "bad_request",
    /// A key (or prefix) empty, too long or not UTF-8.
    InvalidKey = "invalid_key",
    /// A lease of 0 or over `--max-lease-ms`.
    InvalidLease = "invalid_lease",
    /// A wait over `--max-wait-ms`.
    InvalidWait = "invalid_wait",
    /// A limit of 0 or out of range (an acquire's, a listing's).
    InvalidLimit = "invalid_limit",
    /// An owner name or request id over its bound.
    FieldTooLong = "field_too_long",
    /// A body over the route's limit.
    BodyTooLarge = "body_too_large",
    /// A body without the Content-Type the route takes.
    BadContentType = "bad_content_type",
    /// No such route.
    NotFound = "not_found",
    /// A route that does not take this method.
    MethodNotAllowed = "method_not_allowed",
    /// No credentials, or ones the node does not accept.
    Unauthenticated = "unauthenticated",
    /// The caller's roles do not allow it (or a cross-site request).
    Forbidden = "forbidden",
    /// Still held when the wait (if any) ended.
    Held = "held",
    /// Nothing holds the key with that token.
    NotHeld = "not_held",
    /// The token is not the holder's.
    WrongToken = "wrong_token",
    /// The holding is another principal's.
    NotHolder = "not_holder",
    /// The module's policy refused the grant.
    Refused = "refused",
    /// A quota of the module's policy data is used up.
    Quota = "quota",
    /// The cluster's capacity bound is reached.
    Capacity = "capacity",
    /// The active module cannot serve the request as asked.
    Unsupported = "unsupported",
    /// The module refused the policy data.
    PolicyRefused = "policy_refused",
    /// Too many callers wait (for the key, or on the node).
    TooManyWaiters = "too_many_waiters",
    /// Too many requests or connections at once: try again shortly.
    Overloaded = "overloaded",
    /// Another node leads (`leader` names it when known).
    NotLeader = "not_leader",
    /// No quorum, leadership changing, Raft stopped: try again.
    Unavailable = "unavailable",
    /// The node did not finish in time.
    Timeout = "timeout",
    /// A bug or an unexpected state on the node.
    Internal = "internal",
    /// A membership change names an address that is not HOST:PORT.
    BadAddress = "bad_address",
    /// The node at the address is not the one named, or refuses to join.
    NodeRefused = "node_refused",
    /// The node at the address could not be reached.
    NodeUnreachable = "node_unreachable",
    /// Removing the only voter.
    LastVoter = "last_voter",
    /// Not a member.
    NotMember = "not_member",
    /// Promoting a node that is not a learner.
    NotLearner = "not_learner",
    /// A learner of another implementation not yet matched at enough
    /// audit points, or diverged.
    NotAudited = "not_audited",
    /// A learner still catching up.
    CatchingUp = "catching_up",
    /// The module is not a valid component of a supported world.
    InvalidModule = "invalid_module",
    /// A signature missing, malformed or not by a trusted key.
    BadSignature = "bad_signature",
    /// The upgrade names a module that is no longer the active one.
    StaleModule = "stale_module",
    /// The module was refused (validation, migration) before or at apply.
    ModuleRefused = "module_refused",
    /// Another upgrade or shadow is under way.
    Busy = "busy",
    /// A module key that is not 64 hex digits or not trusted, or too many.
    BadModuleKey = "bad_module_key",
    /// No shadow is running (promote, abort).
    NoShadow = "no_shadow",
    /// The shadow diverged or failed; or the module is already active.
    ShadowConflict = "shadow_conflict",
    /// A watch from an index older than the changes kept.
    Compacted = "compacted",
    /// Too many watch streams on the node.
    TooManyWatchers = "too_many_watchers",
    /// The node is shutting down.
    ShuttingDown = "shutting_down",
    /// No such session: never opened, closed, or expired.
    NoSession = "no_session",
    /// A session TTL of 0 or over `--max-lease-ms`.
    InvalidTtl = "invalid_ttl",
    /// The session is another principal's.
    NotSessionHolder = "not_session_holder",
    /// The lock module failed on this command (a trap, its fuel budget,
    /// its memory limit): refused on every node, the cluster serving on.
    /// The same command on the same state fails again; status names it.
    ModuleFailed = "module_failed",
    /// An upgrade to a module whose version is not above the active
    /// module's, or that declares none, not marked as a rollback.
    ModuleNotNewer = "module_not_newer",
    /// A rollback with no previous module to return to.
    NoPreviousModule = "no_previous_module",
    /// A voter refused the module at the quorum pre-check, or too few
    /// accepted it: nothing was swapped; the details give each voter's
    /// verdict.
    PrecheckRefused = "precheck_refused",
    /// The caller stopped sending a request's body (nothing of it arrived
    /// for 30 s): nothing was done.
    RequestTimeout = "request_timeout",
    /// The request's `Host` names none of the node's names (an IP
    /// address, `localhost`, its advertised or listen address, a name of
    /// `--allowed-hosts`), as a request of a web page whose name was made
    /// to resolve to the node (DNS rebinding) would: 421, nothing was
    /// done. Checked on every request with authentication off; with it
    /// on, on a browser's request that can change state.
    UnknownHost = "unknown_host",
    /// A long-lived stream (a watch) ended because the caller's right to
    /// it was revoked: its token or role removed by a reload, or its
    /// certificate expired.
    Revoked = "revoked",
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
