//! Module keys and signatures as files, without I/O: the PEM texts of a new
//! key pair, reading them back, signing a module, and the `.sig` format.
//!
//! * a private key is PKCS#8 PEM (`BEGIN PRIVATE KEY`), exactly as
//!   `openssl genpkey -algorithm ed25519` writes it (the seed only, no
//!   public key inside); one with the public key inside (PKCS#8 v2) is read
//!   too;
//! * a public key is SPKI PEM (`BEGIN PUBLIC KEY`), as `openssl pkey
//!   -pubout` writes it, or its 32 bytes as 64 hex digits;
//! * a signature file is the 64-byte ed25519 signature as 128 hex digits
//!   and a newline, over [`lockd_client::signature::signed_message`] of the
//!   module's SHA-256.

use anyhow::{anyhow, Result};
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::pkcs8::{KeypairBytes, PublicKeyBytes};
use ed25519_dalek::{Signer, SigningKey};
use lockd_client::signature::{self, KEY_BYTES, SIGNATURE_BYTES};
use sha2::{Digest, Sha256};

/// A new key pair's files.
pub struct KeyPair {
    /// PKCS#8 PEM; wiped from memory when dropped.
    pub private_pem: zeroize::Zeroizing<String>,
    pub public_pem: String,
    pub public: [u8; KEY_BYTES],
}

/// The key pair of the 32-byte `seed` (from the OS's random source, for a
/// new key).
pub fn key_pair(seed: &[u8; 32]) -> Result<KeyPair> {
    let signing = SigningKey::from_bytes(seed);
    // The seed alone, as openssl writes it (PKCS#8 v1, 48 bytes of DER).
    let private_pem = KeypairBytes {
        secret_key: *seed,
        public_key: None,
    }
    .to_pkcs8_pem(LineEnding::LF)
    .map_err(|e| anyhow!("cannot encode the private key: {e}"))?;
    let verifying = signing.verifying_key();
    let public_pem = verifying
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| anyhow!("cannot encode the public key: {e}"))?;
    Ok(KeyPair {
        private_pem,
        public_pem,
        public: verifying.to_bytes(),
    })
}

/// The signing key in a private key file's text; `name` names the file in
/// errors.
pub fn read_private(name: &str, text: &str) -> Result<SigningKey> {
    if text.contains("BEGIN PUBLIC KEY") {
        return Err(anyhow!(
            "{name} is a public key; signing needs the private key (NAME.key)"
        ));
    }
    SigningKey::from_pkcs8_pem(text).map_err(|e| {
        anyhow!("{name} is not an ed25519 private key in PKCS#8 PEM (as `openssl genpkey -algorithm ed25519` writes): {e}")
    })
}

/// The public key in a public key file's text (SPKI PEM, or 64 hex digits).
pub fn read_public(name: &str, text: &str) -> Result<[u8; KEY_BYTES]> {
    let trimmed = text.trim();
    if !trimmed.starts_with("-----") {
        return signature::parse_key(trimmed).map_err(|e| anyhow!("{name}: {e}"));
    }
    if trimmed.contains("PRIVATE KEY") {
        return Err(anyhow!(
            "{name} is a private key: trust its public key (NAME.pub), and keep this file where only the signer reads it"
        ));
    }
    // Decoded as bytes, not as a verifying key: whether the point is a
    // usable key is the cluster's rule, and its refusal says why.
    PublicKeyBytes::from_public_key_pem(trimmed)
        .map(|k| k.to_bytes())
        .map_err(|e| {
            anyhow!("{name} is not an ed25519 public key in SPKI PEM (as `openssl pkey -pubout` writes) or 64 hex digits: {e}")
        })
}

/// The module hash (SHA-256) of `module` and the signature `key` makes of
/// it, bound to `binding` (see [`signature::bound_message`]).
pub fn sign(
    key: &SigningKey,
    module: &[u8],
    binding: &signature::Binding,
) -> ([u8; 32], [u8; SIGNATURE_BYTES]) {
    let hash: [u8; 32] = Sha256::digest(module).into();
    let sig = key.sign(&signature::bound_message(binding, &hash));
    (hash, sig.to_bytes())
}

/// The text of a signature file.
pub fn signature_text(sig: &[u8; SIGNATURE_BYTES]) -> String {
    format!("{}\n", hex::encode(sig))
}

/// The signature in a signature file's text (surrounding white space is
/// ignored).
pub fn read_signature(name: &str, text: &str) -> Result<[u8; SIGNATURE_BYTES]> {
    signature::parse_signature(text.trim()).map_err(|e| anyhow!("{name}: {e}"))
}

#[cfg(test)]
mod tests;
