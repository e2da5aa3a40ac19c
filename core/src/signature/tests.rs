//! Tests of the signature check and the trusted set: what verifies, what
//! is refused and with which words, the bound, and the log encoding of a
//! signature.

use ed25519_dalek::{Signer, SigningKey};

use super::*;

fn signer(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn key_of(s: &SigningKey) -> ModuleKey {
    ModuleKey(s.verifying_key().to_bytes())
}

fn sign(s: &SigningKey, module: &[u8]) -> ModuleSignature {
    let m = wire::signed_message(&ModuleHash::of(module).0);
    ModuleSignature(s.sign(&m).to_bytes())
}

fn trusting(signers: &[&SigningKey]) -> TrustedKeys {
    let mut t = TrustedKeys::default();
    for s in signers {
        assert_eq!(t.apply(&KeyEntry::Trust(key_of(s))), Ok(KeyChange::Trusted));
    }
    t
}

const MODULE: &[u8] = b"\0asm a module";

#[test]
fn with_no_key_trusted_nothing_is_required_and_nothing_checked() {
    let none = TrustedKeys::default();
    let h = ModuleHash::of(MODULE);
    assert_eq!(none.check(&h, None), Ok(Verdict::NotRequired));
    // Not checked: even a signature of nothing in particular passes.
    let junk = ModuleSignature([7; 64]);
    assert_eq!(none.check(&h, Some(&junk)), Ok(Verdict::NotRequired));
}

#[test]
fn a_trusted_set_takes_exactly_a_signature_by_one_of_its_keys() {
    let (a, b, outsider) = (signer(1), signer(2), signer(3));
    let t = trusting(&[&a, &b]);
    let h = ModuleHash::of(MODULE);

    assert_eq!(
        t.check(&h, Some(&sign(&b, MODULE))),
        Ok(Verdict::Verified(key_of(&b)))
    );
    let unsigned = t.check(&h, None).map_err(|e| e.to_string());
    assert_eq!(
        unsigned,
        Err("the module is not signed; the cluster trusts 2 module keys".into())
    );
    let untrusted = t
        .check(&h, Some(&sign(&outsider, MODULE)))
        .map_err(|e| e.to_string());
    assert_eq!(
        untrusted,
        Err("the signature verifies under none of the 2 trusted module keys".into())
    );
    // A trusted key's signature of another module.
    assert_eq!(
        t.check(&h, Some(&sign(&a, b"\0asm another module"))),
        Err(SignatureError::NoKey { trusted: 2 })
    );
    // One bit off.
    let mut flipped = sign(&a, MODULE);
    flipped.0[10] ^= 1;
    assert_eq!(
        t.check(&h, Some(&flipped)),
        Err(SignatureError::NoKey { trusted: 2 })
    );
    let one = trusting(&[&a]);
    assert_eq!(
        one.check(&h, None).map_err(|e| e.to_string()),
        Err("the module is not signed; the cluster trusts 1 module key".into())
    );
    assert_eq!(
        one.check(&h, Some(&sign(&b, MODULE)))
            .map_err(|e| e.to_string()),
        Err("the signature verifies under none of the 1 trusted module key".into())
    );
}

#[test]
fn the_signature_covers_the_context_not_the_bare_hash() {
    let a = signer(1);
    let t = trusting(&[&a]);
    let h = ModuleHash::of(MODULE);
    let bare = ModuleSignature(a.sign(&h.0).to_bytes());
    assert_eq!(
        t.check(&h, Some(&bare)),
        Err(SignatureError::NoKey { trusted: 1 })
    );
}

#[test]
fn the_set_is_bounded_and_every_change_is_exact() {
    let mut t = TrustedKeys::default();
    for seed in 0..MAX_TRUSTED_KEYS as u8 {
        assert_eq!(
            t.apply(&KeyEntry::Trust(key_of(&signer(seed)))),
            Ok(KeyChange::Trusted)
        );
    }
    let before = t.clone();
    let full = t.apply(&KeyEntry::Trust(key_of(&signer(200))));
    assert_eq!(full, Err(KeyError::Full { max: 16 }));
    assert_eq!(
        full.map_err(|e| e.to_string()),
        Err(
            "the cluster already trusts 16 module keys, the most it keeps; untrust one first"
                .into()
        )
    );
    assert_eq!(t, before, "a refused entry changes nothing");
    // Trusting a key again is not an error, and is not refused when full.
    assert_eq!(
        t.apply(&KeyEntry::Trust(key_of(&signer(3)))),
        Ok(KeyChange::AlreadyTrusted)
    );
    assert_eq!(t, before);
    assert_eq!(
        t.apply(&KeyEntry::Untrust(key_of(&signer(3)))),
        Ok(KeyChange::Untrusted)
    );
    assert_eq!(t.len(), 15);
    let gone = key_of(&signer(3));
    assert_eq!(
        t.apply(&KeyEntry::Untrust(gone)),
        Err(KeyError::NotTrusted(gone))
    );
    assert_eq!(
        t.apply(&KeyEntry::Untrust(gone)).map_err(|e| e.to_string()),
        Err(format!("module key {gone} is not trusted"))
    );
    // The order is the keys' own, whatever order they came in.
    let hex = t.hex();
    let mut sorted = hex.clone();
    sorted.sort();
    assert_eq!(hex, sorted);
}

#[test]
fn keys_that_cannot_verify_anything_are_refused() {
    let mut t = TrustedKeys::default();
    // y = 1 encodes the identity: small order.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    let weak = t.apply(&KeyEntry::Trust(ModuleKey(identity)));
    assert!(
        matches!(&weak, Err(KeyError::NotAKey { why, .. }) if why.contains("small order")),
        "{weak:?}"
    );
    let off_curve = ModuleKey(NOT_ON_CURVE);
    let r = t.apply(&KeyEntry::Trust(off_curve));
    assert_eq!(
        r.map_err(|e| e.to_string()),
        Err(format!(
            "{off_curve} is not a usable ed25519 public key: not a point of the curve"
        ))
    );
    assert!(t.is_empty());
}

/// A y coordinate for which no x exists on edwards25519.
const NOT_ON_CURVE: [u8; 32] = {
    let mut b = [0u8; 32];
    b[0] = 2;
    b
};

#[test]
fn a_signature_is_64_bytes_in_the_log_and_round_trips() {
    let s = sign(&signer(9), MODULE);
    let bytes = postcard::to_allocvec(&s).unwrap();
    assert_eq!(bytes.as_slice(), s.0.as_slice(), "no length prefix");
    assert_eq!(postcard::from_bytes::<ModuleSignature>(&bytes).unwrap(), s);
    assert!(postcard::from_bytes::<ModuleSignature>(&bytes[..63]).is_err());
    assert_eq!(ModuleSignature::parse(&s.to_string()), Ok(s));
    let k = key_of(&signer(9));
    assert_eq!(ModuleKey::parse(&k.to_string()), Ok(k));
}
