//! What every subcommand shares: printing (human text or `--json`) and the
//! exit status of a failure.
//!
//! Exit status 2 means "the lock is held / not yours" and 1 any other
//! error, so scripts can tell "busy" from "broken"; 3 (a lock lost while
//! held) is set by `acquire --hold` itself; 4 means "not allowed" (no or
//! unknown credentials, or roles that do not allow it).

use anyhow::anyhow;
use lockd_client::admin::AdminError;
use lockd_client::proto::ErrorCode;
use lockd_client::ClientError;

/// An error and the exit status it ends lockctl with.
pub struct Failure(pub anyhow::Error, pub i32);

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure(e, 1)
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        let code = match e.code() {
            Some(ErrorCode::Held | ErrorCode::NotHeld | ErrorCode::WrongToken) => 2,
            Some(ErrorCode::Unauthenticated | ErrorCode::Forbidden | ErrorCode::NotHolder) => {
                NOT_ALLOWED
            }
            _ => 1,
        };
        Failure(anyhow!(e), code)
    }
}

/// The exit status of a request the node would not allow.
pub const NOT_ALLOWED: i32 = 4;

impl From<AdminError> for Failure {
    fn from(e: AdminError) -> Self {
        let code = match &e {
            AdminError::Refused { status, .. } | AdminError::Status { status, .. }
                if *status == 401 || *status == 403 =>
            {
                NOT_ALLOWED
            }
            _ => 1,
        };
        Failure(anyhow!(e), code)
    }
}

/// Print `value` with `--json`, `human` otherwise.
pub fn print(json_out: bool, value: serde_json::Value, human: String) {
    if json_out {
        println!("{value}");
    } else {
        println!("{human}");
    }
}

/// The first 16 characters of a hash a node reported (char-safe: the text
/// may be an error message instead of hex).
pub fn short(s: &str) -> &str {
    s.char_indices().nth(16).map_or(s, |(i, _)| &s[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_cuts_at_sixteen_characters_not_bytes() {
        assert_eq!(short("0123456789abcdef0123"), "0123456789abcdef");
        assert_eq!(short("abc"), "abc");
        assert_eq!(short("ééééééééééééééééé"), "éééééééééééééééé");
    }

    #[test]
    fn only_a_busy_or_foreign_lock_is_status_2() {
        let held: Failure =
            ClientError::from(lockd_client::proto::WireError::Held("k".into())).into();
        assert_eq!(held.1, 2);
        let gone: Failure = ClientError::Unknown("reset".into()).into();
        assert_eq!(gone.1, 1);
        let admin: Failure = AdminError::NoLeader.into();
        assert_eq!(
            (admin.1, admin.0.to_string()),
            (1, "no endpoint knows a leader".into())
        );
    }
}
