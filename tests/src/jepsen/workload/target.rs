//! Where a run's clients connect and with which credentials, and what an
//! answer says of an operation (one table for the native protocol and
//! HTTP).

use std::time::Duration;

use lockd_client::{Client, ClientError, ClientOptions, Credentials};

use crate::jepsen::history::Ret;

/// Where the clients connect, and with which credentials (the `worker`
/// token when the cluster has TLS and authentication on).
#[derive(Clone)]
pub struct Target {
    pub endpoints: Vec<String>,
    pub credentials: Credentials,
    /// The operator's credentials (upgrades, membership, audits, status),
    /// when they differ from the workers' (an `admin` certificate).
    pub admin: Option<Credentials>,
}

impl Target {
    /// [`Target::client`] with the operator's credentials.
    pub fn admin_client(&self, retry_for: Duration, request: Duration) -> Client {
        let mut t = self.clone();
        if let Some(admin) = &self.admin {
            t.credentials = admin.clone();
        }
        t.client(retry_for, request)
    }

    /// A client that retries for `retry_for`, each request for at most
    /// `request`.
    pub fn client(&self, retry_for: Duration, request: Duration) -> Client {
        Client::with_options(
            self.endpoints.clone(),
            ClientOptions {
                retry_for,
                request_timeout: request,
                credentials: self.credentials.clone(),
                // Every renewal is the workload's own, in the history.
                keepalive: false,
                ..Default::default()
            },
        )
    }
}

pub fn ret_of(e: &ClientError) -> Ret {
    ret_of_code(e.code(), || e.to_string())
}

/// What an answer with `code` (none: no answer) says of an operation;
/// `text` is the answer's words, for a denial.
pub fn ret_of_code(code: Option<lockd_proto::ErrorCode>, text: impl FnOnce() -> String) -> Ret {
    use lockd_proto::ErrorCode as C;
    match code {
        Some(C::Held) => Ret::Held,
        // A session that is gone holds nothing any more.
        Some(C::NotHeld | C::WrongToken | C::NoSession) => Ret::Refused,
        Some(C::Refused | C::Quota | C::Unsupported | C::PolicyRefused) => Ret::Denied(text()),
        _ => Ret::Unknown,
    }
}
