//! The protected resource: a fenced register per key.
//!
//! It accepts a read or a write only with a token at least as high as the
//! highest it has seen, and raises that mark with every accepted access. A
//! client increments the register under its lock (read, then write the read
//! value + 1). If two clients ever both got through with an interleaved
//! read and write, an increment is lost; the checker finds it by replaying
//! the accepted writes.

use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Clone, Debug)]
pub struct Write {
    pub client: usize,
    pub token: u64,
    /// The value the client read before writing.
    pub read: u64,
    pub wrote: u64,
}

#[derive(Default)]
struct Reg {
    value: u64,
    max_token: u64,
    writes: Vec<Write>,
    rejected: u64,
}

#[derive(Default)]
pub struct FencedRegister {
    regs: Mutex<HashMap<String, Reg>>,
    /// Test-only: accept stale tokens (to show the checker can fail).
    pub unfenced: bool,
}

impl FencedRegister {
    pub fn new(unfenced: bool) -> FencedRegister {
        FencedRegister {
            regs: Mutex::new(HashMap::new()),
            unfenced,
        }
    }

    /// Read with `token`; `None` if the token is stale.
    pub fn read(&self, key: &str, token: u64) -> Option<u64> {
        let mut regs = self.regs.lock().unwrap_or_else(|p| p.into_inner());
        let r = regs.entry(key.to_string()).or_default();
        if token < r.max_token && !self.unfenced {
            r.rejected += 1;
            return None;
        }
        r.max_token = r.max_token.max(token);
        Some(r.value)
    }

    /// Write `read + 1` with `token`; false if the token is stale.
    pub fn write(&self, key: &str, client: usize, token: u64, read: u64) -> bool {
        let mut regs = self.regs.lock().unwrap_or_else(|p| p.into_inner());
        let r = regs.entry(key.to_string()).or_default();
        if token < r.max_token && !self.unfenced {
            r.rejected += 1;
            return false;
        }
        r.max_token = r.max_token.max(token);
        r.value = read + 1;
        r.writes.push(Write {
            client,
            token,
            read,
            wrote: read + 1,
        });
        true
    }

    /// Every key's accepted writes in acceptance order, and rejections.
    pub fn snapshot(&self) -> Vec<(String, Vec<Write>, u64)> {
        let regs = self.regs.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<_> = regs
            .iter()
            .map(|(k, r)| (k.clone(), r.writes.clone(), r.rejected))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}
