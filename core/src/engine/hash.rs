//! [`ModuleHash`]: a lock module's identity.

use std::fmt;

use sha2::{Digest, Sha256};

/// SHA-256 of a module's component bytes: the module's identity in the log,
/// in snapshots, in the cache and in status output.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ModuleHash(pub [u8; 32]);

impl ModuleHash {
    pub fn of(bytes: &[u8]) -> ModuleHash {
        ModuleHash(Sha256::digest(bytes).into())
    }

    /// Parse the 64-digit hex form.
    pub fn parse(hex_digits: &str) -> Option<ModuleHash> {
        let bytes = hex::decode(hex_digits.trim()).ok()?;
        <[u8; 32]>::try_from(bytes.as_slice()).ok().map(ModuleHash)
    }
}

impl fmt::Display for ModuleHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for ModuleHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModuleHash({self})")
    }
}
