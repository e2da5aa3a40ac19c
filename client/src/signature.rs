//! Signed lock modules: what a module signature covers, and the hex forms
//! of module keys and signatures, shared by the signer (`lockctl module
//! sign`) and every node that checks a signature at apply.
//!
//! A signature is ed25519 over a domain-separated message: the bytes
//! [`SIGNATURE_CONTEXT`] followed by the module's 32-byte SHA-256 (its
//! module hash), so a module key's signature can never be mistaken for a
//! signature over anything else (another protocol's message, a bare hash).
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
