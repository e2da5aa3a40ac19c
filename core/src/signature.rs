//! Signed modules: the cluster's replicated set of trusted module keys, the
//! signed upgrade and shadow entries, and the one check every node makes at
//! apply. Pure: no I/O, no clock, the same answer on every node.
//!
//! # The rule
//!
//! * The trusted keys ([`TrustedKeys`], at most [`MAX_TRUSTED_KEYS`]
//!   ed25519 public keys) change only through [`KeyEntry`] log entries, and
//!   travel in snapshots.
//! * While the set is **non-empty**, an upgrade or a shadow start must carry
//!   a signature that verifies (ed25519 `verify_strict`) under one of the
//!   keys, over [`lockd_proto::signature::bound_message`]: the module's
//!   hash bound to its purpose, the cluster's id and the active module it
//!   replaces with the index that module became active at
//!   ([`TrustedKeys::check_bound`]); otherwise the entry is rejected with
//!   [`SignatureError`] on every node and the active module stays. So a
//!   signature serves once, on one cluster, for one purpose: a replay, a
//!   downgrade to an old signed module, a signature made for staging, or
//!   one made for a shadow used as an upgrade's is refused alike. The
//!   promote of a shadow carries the shadow's signature, and passes only
//!   for the module running as the shadow.
//! * Entries written before bound signatures ([`crate::upgrade::SignedUpgrade`],
//!   [`SignedShadowStart`] in `Request::SignedUpgrade` and
//!   `Request::SignedShadow`) keep their old check (the module hash alone,
//!   [`TrustedKeys::check`]) so that replaying an old log decides as it
//!   did; no node proposes such an entry any more.
//! * While the set is **empty**, no signature is required, and one that an
//!   entry carries is not checked: there is nothing to check it against.
//!   It is kept with a shadow all the same, so that a promote made after a
//!   key was trusted carries it and is checked then.
//!
//! The check comes first at apply, before the module is loaded or
//! instantiated. `verify_strict` (rather than `verify`) because it has one
//! definition of valid: it refuses small-order keys and non-canonical
//! signatures, which other ed25519 implementations may judge either way.

use std::collections::BTreeSet;
use std::fmt;

use ed25519_dalek::{Signature, VerifyingKey};
use lockd_proto::signature::{self as wire, HexError, KEY_BYTES, SIGNATURE_BYTES};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::engine::ModuleHash;

/// The most module keys a cluster trusts at once.
pub const MAX_TRUSTED_KEYS: usize = 16;

/// An ed25519 public key, as trusted by the cluster.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ModuleKey(pub [u8; KEY_BYTES]);

impl ModuleKey {
    /// Parse the 64-digit hex form.
    pub fn parse(text: &str) -> Result<ModuleKey, HexError> {
        wire::parse_key(text).map(ModuleKey)
    }

    /// The key as ed25519 can use it, or why it cannot.
    fn verifying(&self) -> Result<VerifyingKey, KeyError> {
        let key = VerifyingKey::from_bytes(&self.0).map_err(|_| KeyError::NotAKey {
            key: *self,
            why: "not a point of the curve".into(),
        })?;
        if key.is_weak() {
            // verify_strict refuses every signature under such a key.
            return Err(KeyError::NotAKey {
                key: *self,
                why: "a point of small order, under which no signature is valid".into(),
            });
        }
        Ok(key)
    }
}

impl fmt::Display for ModuleKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for ModuleKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModuleKey({self})")
    }
}

/// An ed25519 signature over a module's [`wire::signed_message`]. In the
/// log as its 64 bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ModuleSignature(pub [u8; SIGNATURE_BYTES]);

impl ModuleSignature {
    /// Parse the 128-digit hex form.
    pub fn parse(text: &str) -> Result<ModuleSignature, HexError> {
        wire::parse_signature(text).map(ModuleSignature)
    }
}

impl fmt::Display for ModuleSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for ModuleSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModuleSignature({self})")
    }
}

// serde implements arrays only up to 32 elements: a tuple of 64 bytes,
// which postcard writes as exactly 64 bytes.
impl Serialize for ModuleSignature {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(SIGNATURE_BYTES)?;
        for b in &self.0 {
            t.serialize_element(b)?;
        }
        t.end()
    }
}

impl<'de> Deserialize<'de> for ModuleSignature {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl<'de> serde::de::Visitor<'de> for Bytes {
            type Value = ModuleSignature;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{SIGNATURE_BYTES} signature bytes")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<ModuleSignature, A::Error> {
                let mut out = [0u8; SIGNATURE_BYTES];
                for (i, b) in out.iter_mut().enumerate() {
                    *b = seq
                        .next_element()?
                        .ok_or_else(|| serde::de::Error::invalid_length(i, &self))?;
                }
                Ok(ModuleSignature(out))
            }
        }
        d.deserialize_tuple(SIGNATURE_BYTES, Bytes)
    }
}

/// What a bound upgrade's signature was made for: an upgrade, or a
/// shadow start (then the entry is the promote of that shadow). In the
/// log: variant order is the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SignedFor {
    Upgrade,
    Shadow,
}

impl SignedFor {
    pub fn purpose(self) -> wire::Purpose {
        match self {
            SignedFor::Upgrade => wire::Purpose::Upgrade,
            SignedFor::Shadow => wire::Purpose::Shadow,
        }
    }
}

/// A shadow start with its module's signature.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedShadowStart {
    pub module: Vec<u8>,
    pub signature: ModuleSignature,
}

impl fmt::Debug for SignedShadowStart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SignedShadowStart {{ module: {} ({} bytes), signature: {} }}",
            ModuleHash::of(&self.module),
            self.module.len(),
            self.signature
        )
    }
}

/// The log entry that changes the trusted keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyEntry {
    Trust(ModuleKey),
    Untrust(ModuleKey),
}

/// What a [`KeyEntry`] changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyChange {
    Trusted,
    Untrusted,
    /// Trusted already: nothing changed.
    AlreadyTrusted,
}

/// Why a [`KeyEntry`] changed nothing. Part of the replicated outcome.
#[derive(Clone, Debug, Error, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyError {
    #[error("{key} is not a usable ed25519 public key: {why}")]
    NotAKey { key: ModuleKey, why: String },
    #[error("the cluster already trusts {max} module keys, the most it keeps; untrust one first")]
    Full { max: usize },
    #[error("module key {0} is not trusted")]
    NotTrusted(ModuleKey),
}

/// Why an upgrade or shadow start was refused for its signature. Part of
/// the replicated outcome: built only from the entry and the trusted set.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SignatureError {
    #[error("the module is not signed; the cluster trusts {}", keys(.trusted))]
    Unsigned { trusted: usize },
    #[error("the signature verifies under none of the {}", trusted_keys(.trusted))]
    NoKey { trusted: usize },
    /// A bound signature that verifies under no trusted key for this use:
    /// made for another cluster, another purpose, or a module or index
    /// that is not the active one now (a replay, a downgrade), or not at
    /// all by a trusted key.
    #[error("the signature verifies under none of the {} for this use: {} of cluster {}, replacing {} (active since index {}); sign the module for it (`lockctl module sign`)", trusted_keys(.trusted), purpose_name(.binding.purpose), hex::encode(.binding.cluster), hex::encode(.binding.replaces), .binding.since)]
    NotForThisUse {
        trusted: usize,
        binding: wire::Binding,
    },
    /// A promote carrying the shadow's signature, for a module that is not
    /// the shadow.
    #[error("a shadow's signature promotes only the module running as the shadow")]
    NotTheShadow,
}

fn purpose_name(p: wire::Purpose) -> &'static str {
    match p {
        wire::Purpose::Upgrade => "an upgrade",
        wire::Purpose::Shadow => "a shadow start",
    }
}

fn keys(n: &usize) -> String {
    match *n {
        1 => "1 module key".into(),
        n => format!("{n} module keys"),
    }
}

fn trusted_keys(n: &usize) -> String {
    match *n {
        1 => "1 trusted module key".into(),
        n => format!("{n} trusted module keys"),
    }
}

/// What the check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No key is trusted: no signature is required, none is checked.
    NotRequired,
    /// The signature verifies under this trusted key.
    Verified(ModuleKey),
}

/// The cluster's trusted module keys, in key order. A set decoded from
/// bytes (a snapshot) must pass [`TrustedKeys::validated`] before use.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustedKeys(BTreeSet<ModuleKey>);

impl TrustedKeys {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, key: &ModuleKey) -> bool {
        self.0.contains(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &ModuleKey> {
        self.0.iter()
    }

    /// The set, if it keeps the rules of the entries that build one (at
    /// most [`MAX_TRUSTED_KEYS`], each usable).
    pub fn validated(self) -> Result<TrustedKeys, String> {
        if self.0.len() > MAX_TRUSTED_KEYS {
            return Err(format!(
                "{} module keys, more than the {MAX_TRUSTED_KEYS} a cluster trusts",
                self.0.len()
            ));
        }
        for k in &self.0 {
            k.verifying().map_err(|e| e.to_string())?;
        }
        Ok(self)
    }

    /// The keys in hex, in key order (what status shows).
    pub fn hex(&self) -> Vec<String> {
        self.0.iter().map(ModuleKey::to_string).collect()
    }

    /// Apply a key entry: the same result on every node. An error changes
    /// nothing.
    pub fn apply(&mut self, entry: &KeyEntry) -> Result<KeyChange, KeyError> {
        match entry {
            KeyEntry::Trust(key) => {
                key.verifying()?;
                if self.0.contains(key) {
                    return Ok(KeyChange::AlreadyTrusted);
                }
                if self.0.len() >= MAX_TRUSTED_KEYS {
                    return Err(KeyError::Full {
                        max: MAX_TRUSTED_KEYS,
                    });
                }
                self.0.insert(*key);
                Ok(KeyChange::Trusted)
            }
            KeyEntry::Untrust(key) => {
                if self.0.remove(key) {
                    Ok(KeyChange::Untrusted)
                } else {
                    Err(KeyError::NotTrusted(*key))
                }
            }
        }
    }

    /// May the module with hash `module` become active (or start as a
    /// shadow), carrying `signature`?
    pub fn check(
        &self,
        module: &ModuleHash,
        signature: Option<&ModuleSignature>,
    ) -> Result<Verdict, SignatureError> {
        self.verify(&wire::signed_message(&module.0), signature, |trusted| {
            SignatureError::NoKey { trusted }
        })
    }

    /// May the module with hash `module` be used as `binding` says (its
    /// purpose, on this cluster, over the active module since its index),
    /// carrying a version-2 `signature`?
    pub fn check_bound(
        &self,
        module: &ModuleHash,
        binding: &wire::Binding,
        signature: Option<&ModuleSignature>,
    ) -> Result<Verdict, SignatureError> {
        self.verify(
            &wire::bound_message(binding, &module.0),
            signature,
            |trusted| SignatureError::NotForThisUse {
                trusted,
                binding: *binding,
            },
        )
    }

    /// The verdict on `signature` over `message`: not required while no
    /// key is trusted; else the trusted key it verifies under, or
    /// `refused(how many keys are trusted)`.
    fn verify(
        &self,
        message: &[u8],
        signature: Option<&ModuleSignature>,
        refused: impl FnOnce(usize) -> SignatureError,
    ) -> Result<Verdict, SignatureError> {
        if self.0.is_empty() {
            return Ok(Verdict::NotRequired);
        }
        let trusted = self.0.len();
        let signature = signature.ok_or(SignatureError::Unsigned { trusted })?;
        let sig = Signature::from_bytes(&signature.0);
        self.0
            .iter()
            .find(|k| {
                // Every stored key passed `verifying` when it was trusted.
                k.verifying()
                    .is_ok_and(|vk| vk.verify_strict(message, &sig).is_ok())
            })
            .map(|k| Verdict::Verified(*k))
            .ok_or_else(|| refused(trusted))
    }
}

#[cfg(test)]
mod tests;
