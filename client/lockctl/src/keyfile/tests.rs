//! Tests of the key and signature files against what openssl writes and
//! signs, and of the errors a wrong file gets.

use super::*;

// Written by `openssl genpkey -algorithm ed25519` and `openssl pkey
// -pubout` (OpenSSL 3.0), and that key's signature of "hello" by `openssl
// pkeyutl -sign -rawin`.
const OPENSSL_KEY: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIKwJEyi0k4fKurrSgWiUx0qQmO3eZ7GkI6LaWnuPnoRG
-----END PRIVATE KEY-----
";
const OPENSSL_PUB: &str = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEADgkxzxVs5feTGqmesqnyzO+1+yAI4+e0GLl349p1K6o=
-----END PUBLIC KEY-----
";
const OPENSSL_PUB_HEX: &str = "0e0931cf156ce5f7931aa99eb2a9f2ccefb5fb2008e3e7b418b977e3da752baa";
const OPENSSL_SEED: &str = "ac091328b49387cababad2816894c74a9098edde67b1a423a2da5a7b8f9e8446";
const OPENSSL_SIG_OF_HELLO: &str = "be829f919ca126c207026c48688b866bb41aba915f7856ed7c2cc9418288c9a47dfcf24db158c9fab2d82ad84028d2bc73a7fe8fbf6c288dd677bc61b822cf06";

fn seed() -> [u8; 32] {
    hex::decode(OPENSSL_SEED).unwrap().try_into().unwrap()
}

#[test]
fn a_new_key_pair_is_written_exactly_as_openssl_writes_it() {
    let pair = key_pair(&seed()).unwrap();
    assert_eq!(pair.private_pem.as_str(), OPENSSL_KEY);
    assert_eq!(pair.public_pem, OPENSSL_PUB);
    assert_eq!(hex::encode(pair.public), OPENSSL_PUB_HEX);
}

#[test]
fn openssl_keys_read_back_and_sign_as_openssl_does() {
    let key = read_private("k.key", OPENSSL_KEY).unwrap();
    assert_eq!(hex::encode(key.to_bytes()), OPENSSL_SEED);
    assert_eq!(
        hex::encode(key.sign(b"hello").to_bytes()),
        OPENSSL_SIG_OF_HELLO
    );
    assert_eq!(
        hex::encode(read_public("k.pub", OPENSSL_PUB).unwrap()),
        OPENSSL_PUB_HEX
    );
    assert_eq!(
        read_public("k.hex", &format!("{OPENSSL_PUB_HEX}\n")).unwrap(),
        read_public("k.pub", OPENSSL_PUB).unwrap()
    );
    // PKCS#8 v2 (the public key inside), as other tools write it.
    let v2 = key.to_pkcs8_pem(LineEnding::LF).unwrap();
    assert_ne!(v2.as_str(), OPENSSL_KEY);
    assert_eq!(read_private("v2.key", &v2).unwrap().to_bytes(), seed());
}

#[test]
fn a_signature_covers_the_bound_message_of_the_module_hash() {
    let key = read_private("k.key", OPENSSL_KEY).unwrap();
    let module = b"\0asm\x0d\0\x01\0";
    let binding = signature::Binding {
        purpose: signature::Purpose::Upgrade,
        cluster: [7; 16],
        replaces: [8; 32],
        since: 42,
    };
    let (hash, sig) = sign(&key, module, &binding);
    assert_eq!(hash, <[u8; 32]>::from(Sha256::digest(module)));
    let vk = key.verifying_key();
    let message = signature::bound_message(&binding, &hash);
    let s = ed25519_dalek::Signature::from_bytes(&sig);
    assert!(vk.verify_strict(&message, &s).is_ok());
    assert!(vk.verify_strict(&hash, &s).is_err(), "not the bare hash");
    let v1 = signature::signed_message(&hash);
    assert!(
        vk.verify_strict(&v1, &s).is_err(),
        "not the unbound message"
    );
    // The file: 128 hex digits and a newline, read back exactly.
    let text = signature_text(&sig);
    assert_eq!(text.len(), 129);
    assert!(text.ends_with('\n'));
    assert_eq!(read_signature("m.sig", &text).unwrap(), sig);
    assert_eq!(
        read_signature("m.sig", &format!("  {text}\r\n")).unwrap(),
        sig
    );
}

#[test]
fn wrong_files_are_named_with_what_is_wrong() {
    let err = |r: Result<_>| r.map(|_: [u8; 32]| ()).unwrap_err().to_string();
    assert_eq!(
        err(read_public("k.key", OPENSSL_KEY)),
        "k.key is a private key: trust its public key (NAME.pub), and keep this file where only the signer reads it"
    );
    assert!(err(read_public(
        "x.pub",
        "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"
    ))
    .starts_with("x.pub is not an ed25519 public key in SPKI PEM"));
    assert_eq!(
        err(read_public("x.pub", &OPENSSL_PUB_HEX[2..])),
        "x.pub: expected 64 hex digits (a module key), got 62 characters"
    );
    let private = |text: &str| read_private("y", text).map(|_| ()).unwrap_err().to_string();
    assert_eq!(
        private(OPENSSL_PUB),
        "y is a public key; signing needs the private key (NAME.key)"
    );
    assert!(private("not a key").starts_with("y is not an ed25519 private key in PKCS#8 PEM"));
    let sig = |text: &str| {
        read_signature("m.sig", text)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        sig(&"ab".repeat(63)),
        "m.sig: expected 128 hex digits (a module signature), got 126 characters"
    );
    assert_eq!(
        sig(&format!("{}zz", "ab".repeat(63))),
        "m.sig: a module signature is not hex: 'z' at position 126"
    );
}
