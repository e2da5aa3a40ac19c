//! What the authorisation layer and the handlers leave each other in a
//! request's or a response's extensions, beside the request's `Op`
//! ([`super::op::Op`]): in a leaf of their own, so that the handlers need not
//! import the layer that parses requests by the route table that names
//! them.

/// What an admin handler did, for the audit trail: set on its response.
#[derive(Clone, Debug, Default)]
pub(crate) struct AdminOutcome {
    pub index: Option<u64>,
    pub module_hash: Option<String>,
}

/// When the middleware took the request (its head read): the start of
/// an acquire's `receive` stage, ended by the handler once the body is
/// read and parsed.
#[derive(Clone, Copy)]
pub(crate) struct Received(pub std::time::Instant);
