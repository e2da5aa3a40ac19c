//! How commands and outcomes print (`Display`), in world 0.3's types and
//! in world 0.1's ([`legacy`]).

use std::fmt;

use super::{legacy, Command, Mode, Outcome, Reason};

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Grant(g) => {
                write!(f, "grant {:?} lease_ms={}", g.key, g.lease_ms)?;
                if g.mode != Mode::Exclusive || g.limit != 1 {
                    write!(f, " {} limit={}", g.mode.as_str(), g.limit)?;
                }
                if !g.holder.owner.is_empty() || !g.holder.principal.is_empty() {
                    write!(f, " holder={}/{}", g.holder.principal, g.holder.owner)?;
                }
                if !g.request_id.is_empty() {
                    write!(f, " request={}", g.request_id)?;
                }
                if g.session != 0 {
                    write!(f, " session={}", g.session)?;
                }
                if g.reentrant {
                    f.write_str(" reentrant")?;
                }
                if !g.value.is_empty() {
                    write!(f, " value=({} bytes)", g.value.len())?;
                }
                Ok(())
            }
            Command::Release(r) => write!(f, "release {:?} token={}", r.key, r.token),
            Command::Expire(r) => write!(f, "expire {:?} token={}", r.key, r.token),
            Command::SetPolicy(rules) => write!(f, "set-policy ({} rules)", rules.len()),
            Command::OpenSession(o) => write!(
                f,
                "open-session ttl_ms={} holder={}/{}",
                o.ttl_ms, o.holder.principal, o.holder.owner
            ),
            Command::CloseSession(id) => write!(f, "close-session {id}"),
            Command::ExpireSession(id) => write!(f, "expire-session {id}"),
            Command::Proclaim(p) => write!(
                f,
                "proclaim {:?} token={} value=({} bytes)",
                p.key,
                p.token,
                p.value.len()
            ),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Busy => f.write_str("busy"),
            Reason::Policy(why) => write!(f, "policy: {why}"),
            Reason::Quota(why) => write!(f, "quota: {why}"),
            Reason::Unsupported(why) => write!(f, "unsupported: {why}"),
            Reason::NoSession(id) => write!(f, "no session {id}"),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Granted(g) => {
                write!(f, "granted token={} lease_ms={}", g.token, g.lease_ms)?;
                if g.repeat {
                    f.write_str(" repeat")?;
                }
                if g.count != 1 {
                    write!(f, " count={}", g.count)?;
                }
                Ok(())
            }
            Outcome::Rejected(r) => write!(f, "rejected ({r})"),
            Outcome::Released(r) if r.count > 0 => write!(f, "released count={}", r.count),
            Outcome::Released(r) => write!(f, "released freed={}", r.freed),
            Outcome::NotFound => f.write_str("not-found"),
            Outcome::Expired(e) => write!(f, "expired existed={} freed={}", e.existed, e.freed),
            Outcome::PolicySet => f.write_str("policy-set"),
            Outcome::Noop => f.write_str("noop"),
            Outcome::SessionOpened(o) => {
                write!(f, "session-opened id={} ttl_ms={}", o.id, o.ttl_ms)?;
                if o.repeat {
                    f.write_str(" repeat")?;
                }
                Ok(())
            }
            Outcome::SessionEnded(e) => write!(
                f,
                "session-ended existed={} released={} freed={}",
                e.existed,
                e.released.len(),
                e.freed.len()
            ),
            Outcome::Proclaimed => f.write_str("proclaimed"),
        }
    }
}

impl fmt::Display for legacy::Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            legacy::Command::Grant(g) => write!(f, "grant {:?} lease_ms={}", g.key, g.lease_ms),
            legacy::Command::Release(k) => write!(f, "release {k:?}"),
            legacy::Command::Expire(e) => write!(f, "expire {:?} token={}", e.key, e.token),
        }
    }
}

impl fmt::Display for legacy::Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            legacy::Outcome::Granted(token) => write!(f, "granted token={token}"),
            legacy::Outcome::GrantRejected => f.write_str("grant-rejected"),
            legacy::Outcome::Released => f.write_str("released"),
            legacy::Outcome::NotFound => f.write_str("not-found"),
            legacy::Outcome::Expired(existed) => write!(f, "expired existed={existed}"),
            legacy::Outcome::Noop => f.write_str("noop"),
        }
    }
}
