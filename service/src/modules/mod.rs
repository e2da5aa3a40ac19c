//! The host's side of lock modules: the leader validates an upgrade or a
//! shadow start and proposes it ([`submit`]) once every voter checked it
//! too ([`precheck`], its peer messages in [`peer_messages`], remembering
//! its verdicts in [`verdicts`]), every node compares its audit
//! points with its peers' in the background ([`audit_checker`]), and `lockd
//! replay` runs a stopped node's log through another module ([`replay`]).
//!
//! What every replica computes when such an entry is applied — the
//! migration, the shadow, the signature check, the audit points — is the
//! deterministic core's ([`lockd_core::upgrade`], [`lockd_core::shadow`],
//! [`lockd_core::signature`], [`lockd_core::audit`]).

pub mod audit_checker;
pub mod peer_messages;
pub mod precheck;
pub mod replay;
pub mod submit;
pub mod verdicts;
