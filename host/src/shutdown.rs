//! Graceful shutdown: wait for Ctrl-C or SIGTERM (the client crate's
//! [`lockd_net::shutdown::signal`], which `lockctl` uses too).

pub use lockd_net::shutdown::signal;
