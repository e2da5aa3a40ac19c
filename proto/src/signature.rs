//! Signed lock modules: what a module signature covers, and the hex forms
//! of module keys and signatures, shared by the signer (`lockctl module
//! sign`) and every node that checks a signature at apply.
//!
//! A signature is ed25519 over a domain-separated message, so a module
//! key's signature can never be mistaken for a signature over anything
//! else (another protocol's message, a bare hash). Signatures are made
//! over [`bound_message`] (version 2): the module's 32-byte SHA-256 bound
//! to a purpose, a cluster and the active module it replaces
//! ([`Binding`]). Version 1 ([`signed_message`]: [`SIGNATURE_CONTEXT`]
//! and the module hash alone) is what log entries written before version
//! 2 carry; nodes still check those entries so, when they replay them, and
//! never accept a new one.
//! No cryptography here: the node verifies with its own verify-only code,
//! the signer signs in `lockctl`. Also the answers of the admin routes of
//! the trusted module keys ([`ModuleKeys`], [`ModuleKeyReply`]).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What every signed message starts with (format version 1).
pub const SIGNATURE_CONTEXT: &[u8] = b"lockd module signature v1\n";

/// Bytes of an ed25519 public key and of a signature.
pub const KEY_BYTES: usize = 32;
pub const SIGNATURE_BYTES: usize = 64;

/// The length of [`signed_message`].
pub const SIGNED_MESSAGE_BYTES: usize = SIGNATURE_CONTEXT.len() + 32;

/// The message a module signature covers: [`SIGNATURE_CONTEXT`] then the
/// module's SHA-256.
pub fn signed_message(module_hash: &[u8; 32]) -> [u8; SIGNED_MESSAGE_BYTES] {
    let mut m = [0u8; SIGNED_MESSAGE_BYTES];
    m[..SIGNATURE_CONTEXT.len()].copy_from_slice(SIGNATURE_CONTEXT);
    m[SIGNATURE_CONTEXT.len()..].copy_from_slice(module_hash);
    m
}

/// What every bound signature's message starts with (format version 2).
pub const BOUND_CONTEXT: &[u8] = b"lockd module signature v2\n";

/// What a signature lets a module do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// Become the active module (`lockctl upgrade`).
    Upgrade,
    /// Run as the shadow (`lockctl upgrade --shadow`), and be promoted
    /// from there while it is the shadow.
    Shadow,
}

impl Purpose {
    fn tag(self) -> &'static [u8] {
        match self {
            Purpose::Upgrade => b"upgrade\n",
            Purpose::Shadow => b"shadow\n",
        }
    }
}

/// What a version-2 signature is bound to, besides the module: its
/// purpose, the cluster (the 16 bytes of its id), and the active module it
/// replaces with the log index that module became active at. The index
/// moves at every swap, so a signature serves once: not again after the
/// cluster has moved on (a replay), not on another cluster, not for the
/// other purpose, and not over another module (a downgrade).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    pub purpose: Purpose,
    pub cluster: [u8; 16],
    pub replaces: [u8; 32],
    pub since: u64,
}

/// The length of [`bound_message`] for `purpose`.
pub fn bound_message_len(purpose: Purpose) -> usize {
    BOUND_CONTEXT.len() + purpose.tag().len() + 16 + 32 + 8 + 32
}

/// The message a bound signature covers: [`BOUND_CONTEXT`], the purpose
/// (`upgrade\n` or `shadow\n`), the cluster id's 16 bytes, the replaced
/// module's SHA-256, the index it became active at (8 bytes, big-endian),
/// then the module's SHA-256.
pub fn bound_message(binding: &Binding, module_hash: &[u8; 32]) -> Vec<u8> {
    let mut m = Vec::with_capacity(bound_message_len(binding.purpose));
    m.extend_from_slice(BOUND_CONTEXT);
    m.extend_from_slice(binding.purpose.tag());
    m.extend_from_slice(&binding.cluster);
    m.extend_from_slice(&binding.replaces);
    m.extend_from_slice(&binding.since.to_be_bytes());
    m.extend_from_slice(module_hash);
    m
}

/// A cluster id's 16 bytes from its 32 hex digits.
pub fn parse_cluster(text: &str) -> Result<[u8; 16], HexError> {
    parse_hex("a cluster id", text)
}

/// Why a text is not a module key or a signature.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum HexError {
    #[error("expected {expected} hex digits ({what}), got {got} characters")]
    Length {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("{what} is not hex: {found:?} at position {at}")]
    NotHex {
        what: &'static str,
        found: char,
        at: usize,
    },
}

/// `N` bytes from exactly `2 × N` hex digits (either case); `what` names
/// the thing in the error.
pub fn parse_hex<const N: usize>(what: &'static str, text: &str) -> Result<[u8; N], HexError> {
    if text.chars().count() != 2 * N {
        return Err(HexError::Length {
            what,
            expected: 2 * N,
            got: text.chars().count(),
        });
    }
    if let Some((at, found)) = text
        .chars()
        .enumerate()
        .find(|(_, c)| !c.is_ascii_hexdigit())
    {
        return Err(HexError::NotHex { what, found, at });
    }
    let mut out = [0u8; N];
    // Length and digits were checked: decoding cannot fail now.
    hex::decode_to_slice(text, &mut out).map_err(|_| HexError::Length {
        what,
        expected: 2 * N,
        got: text.len(),
    })?;
    Ok(out)
}

/// A module key (ed25519 public key) from its 64 hex digits.
pub fn parse_key(text: &str) -> Result<[u8; KEY_BYTES], HexError> {
    parse_hex("a module key", text)
}

/// A module signature from its 128 hex digits.
pub fn parse_signature(text: &str) -> Result<[u8; SIGNATURE_BYTES], HexError> {
    parse_hex("a module signature", text)
}

/// The cluster's trusted module keys (`GET /v1/admin/module-keys`), hex,
/// in key order.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModuleKeys {
    pub keys: Vec<String>,
}

/// What a change of the trusted module keys did (kebab-case in JSON).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ModuleKeyResult {
    Trusted,
    Untrusted,
    /// The key was trusted already: nothing changed.
    AlreadyTrusted,
}

impl ModuleKeyResult {
    pub fn as_str(self) -> &'static str {
        match self {
            ModuleKeyResult::Trusted => "trusted",
            ModuleKeyResult::Untrusted => "untrusted",
            ModuleKeyResult::AlreadyTrusted => "already-trusted",
        }
    }
}

/// The answer to trusting or untrusting a module key (`POST` and `DELETE
/// /v1/admin/module-keys`), once its log entry applied.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModuleKeyReply {
    /// The log index of the entry.
    pub index: u64,
    pub result: ModuleKeyResult,
    /// The key the entry named, hex.
    pub key: String,
    /// Every trusted key after the entry, hex, in key order.
    pub keys: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_message_names_purpose_cluster_replaced_module_and_index() {
        let b = Binding {
            purpose: Purpose::Shadow,
            cluster: [1; 16],
            replaces: [2; 32],
            since: 0x0102,
        };
        let m = bound_message(&b, &[3; 32]);
        assert_eq!(m.len(), bound_message_len(Purpose::Shadow));
        let mut want = b"lockd module signature v2\nshadow\n".to_vec();
        want.extend([1; 16]);
        want.extend([2; 32]);
        want.extend([0, 0, 0, 0, 0, 0, 1, 2]);
        want.extend([3; 32]);
        assert_eq!(m, want);
        // Each part changes the message.
        for other in [
            Binding {
                purpose: Purpose::Upgrade,
                ..b
            },
            Binding {
                cluster: [9; 16],
                ..b
            },
            Binding {
                replaces: [9; 32],
                ..b
            },
            Binding { since: 0x0103, ..b },
        ] {
            assert_ne!(bound_message(&other, &[3; 32]), m);
        }
    }

    #[test]
    fn the_message_is_the_context_then_the_hash() {
        let m = signed_message(&[0xab; 32]);
        assert_eq!(&m[..26], b"lockd module signature v1\n");
        assert_eq!(&m[26..], &[0xab; 32]);
        assert_eq!(m.len(), 58);
    }

    #[test]
    fn hex_forms_parse_exactly_and_say_what_is_wrong() {
        let key = "0e0931cf156ce5f7931aa99eb2a9f2ccefb5fb2008e3e7b418b977e3da752baa";
        assert_eq!(parse_key(key).map(|k| k[0]), Ok(0x0e));
        assert_eq!(
            parse_key(&key.to_uppercase()),
            parse_key(key),
            "either case"
        );
        assert_eq!(
            parse_key(&key[1..]),
            Err(HexError::Length {
                what: "a module key",
                expected: 64,
                got: 63
            })
        );
        assert_eq!(
            parse_key(&format!("{}g", &key[1..])).map_err(|e| e.to_string()),
            Err("a module key is not hex: 'g' at position 63".into())
        );
        assert_eq!(
            parse_signature(key).map_err(|e| e.to_string()),
            Err("expected 128 hex digits (a module signature), got 64 characters".into())
        );
        // A multi-byte character counts once and is named, never sliced.
        let odd = format!("{}é", &key[..63]);
        assert!(matches!(
            parse_key(&odd),
            Err(HexError::NotHex { found: 'é', .. })
        ));
        assert_eq!(parse_signature(&"00".repeat(64)), Ok([0u8; 64]));
    }
}
