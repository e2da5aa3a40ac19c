//! Signed modules on real processes, driven through `lockctl`: a key made
//! with `lockctl module keygen` and trusted; the leader refuses (403, with
//! nothing in the log) an unsigned module, one whose signature is of
//! another module and one signed by a key the cluster does not trust;
//! with `--no-precheck` an unsigned module is committed and rejected by
//! every node alike (same index and reason, the module unchanged, equal
//! state hashes); a signed module swaps on every node; a signed shadow
//! starts and promotes (signed for a shadow, not for an upgrade); a
//! replayed signature (a downgrade) and one made for another cluster are
//! refused by the leader and rejected by every node alike at apply; the
//! set is bounded (409); untrusting the last key lets an unsigned upgrade
//! in again.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use lockd::api::status::Status;
use lockd_core::engine::ModuleHash;
use lockd_tests::cluster::Cluster;
use lockd_tests::fixtures::{LOCK_SM_WORLD01_V2, LOCK_SM_WORLD02};

fn run(c: &Cluster, args: &[&str]) -> Output {
    c.lockctl().args(args).output().expect("lockctl")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn ok(c: &Cluster, args: &[&str]) -> String {
    let o = run(c, args);
    assert!(o.status.success(), "lockctl {args:?}: {}", text(&o));
    text(&o)
}

fn fails(c: &Cluster, args: &[&str]) -> String {
    let o = run(c, args);
    assert_eq!(o.status.code(), Some(1), "lockctl {args:?}: {}", text(&o));
    text(&o)
}

/// Refused by the leader for its signature (403: lockctl's "not
/// allowed", status 4).
fn refused(c: &Cluster, args: &[&str]) -> String {
    let o = run(c, args);
    assert_eq!(o.status.code(), Some(4), "lockctl {args:?}: {}", text(&o));
    text(&o)
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// Every node has applied the same entries, the first module's among
/// them (the first leader appends it after its election, so an entry
/// counted before it would move the log).
fn settled(c: &Cluster) -> Vec<Status> {
    let start = std::time::Instant::now();
    loop {
        let st = c.wait_converged(Duration::from_secs(20));
        if st.first_module_hash.is_some() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{}",
            c.describe()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (1..=3).map(|id| c.status(id).expect("status")).collect()
}

#[test]
fn signed_modules_from_keygen_to_untrust() {
    let c = Cluster::start(3, &["--initial-module", "world-0.1"]);
    let leader = c.wait_leader(Duration::from_secs(20));
    let follower = (1..=3).find(|i| *i != leader).expect("follower");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = |name: &str| dir.path().join(name);
    let (v2, v3) = (file("v2.wasm"), file("v3.wasm"));
    std::fs::write(&v2, LOCK_SM_WORLD01_V2).expect("write");
    std::fs::write(&v3, LOCK_SM_WORLD02).expect("write");
    let (h1, h2, h3) = (
        ModuleHash::of(lockd_core::builtin::LOCK_SM).to_string(),
        ModuleHash::of(LOCK_SM_WORLD01_V2).to_string(),
        ModuleHash::of(LOCK_SM_WORLD02).to_string(),
    );

    // Keys: private 0600, never overwritten.
    let out = ok(&c, &["module", "keygen", p(&file("ops"))]);
    assert!(out.contains("ops.key") && out.contains("ops.pub"), "{out}");
    ok(&c, &["module", "keygen", p(&file("rogue"))]);
    let private = std::fs::read(file("ops.key")).expect("ops.key");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(file("ops.key"))
        .expect("meta")
        .permissions();
    assert_eq!(mode.mode() & 0o777, 0o600);
    assert!(fails(&c, &["module", "keygen", p(&file("ops"))]).contains("exists; not overwriting"));
    assert_eq!(std::fs::read(file("ops.key")).expect("ops.key"), private);

    let out = ok(&c, &["--json", "module", "trust", p(&file("ops.pub"))]);
    let trusted: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(trusted["result"], "trusted", "{out}");
    let ops = trusted["key"].as_str().expect("key").to_string();
    assert_eq!(trusted["keys"], serde_json::json!([ops]));
    for st in settled(&c) {
        assert_eq!(st.trusted_module_keys, vec![ops.clone()], "node {}", st.id);
    }
    assert!(ok(&c, &["module", "keys"]).contains(&ops));
    assert!(ok(&c, &["status"]).contains("trusted module key"));
    let again = ok(&c, &["module", "trust", &ops]);
    assert!(again.contains("already-trusted"), "{again}");

    // The leader refuses, and nothing reaches the log (compared with a
    // reading in which its log and applied index agree).
    let before = c.wait_settled(leader, Duration::from_secs(20));
    let out = refused(&c, &["upgrade", p(&v2)]);
    assert!(out.contains("unsigned: no --signature"), "{out}");
    assert!(
        out.contains("the module is not signed; the cluster trusts 1 module key"),
        "{out}"
    );
    let r = c
        .post_bytes(follower, "/v1/admin/upgrade", LOCK_SM_WORLD01_V2)
        .expect("upgrade");
    assert_eq!(r.status, 403, "{r:?}");
    ok(
        &c,
        &["module", "sign", p(&v3), "--key", p(&file("ops.key"))],
    );
    std::fs::rename(file("v3.wasm.sig"), file("of-v3.sig")).expect("rename");
    let out = refused(
        &c,
        &["upgrade", p(&v2), "--signature", p(&file("of-v3.sig"))],
    );
    assert!(
        out.contains("the signature verifies under none of the 1 trusted module key"),
        "{out}"
    );
    let of_v3 = std::fs::read_to_string(file("of-v3.sig")).expect("sig");
    let path = format!("/v1/admin/upgrade?signature={}", of_v3.trim());
    let r = c
        .post_bytes(leader, &path, LOCK_SM_WORLD01_V2)
        .expect("upgrade");
    assert_eq!(r.status, 403, "{r:?}");
    let out = ok(
        &c,
        &["module", "sign", p(&v2), "--key", p(&file("rogue.key"))],
    );
    assert!(out.contains(&h2), "sign prints the module hash: {out}");
    let out = refused(&c, &["upgrade", p(&v2)]);
    assert!(out.contains("v2.wasm.sig"), "says which signature: {out}");
    assert!(out.contains("verifies under none"), "{out}");
    let shadow = refused(&c, &["upgrade", "--shadow", p(&v2)]);
    assert!(shadow.contains("verifies under none"), "{shadow}");
    let after = c.status(leader).expect("status");
    assert!(after.upgrades.is_empty() && after.shadow.is_none());
    if after.term == before.term {
        assert_eq!(after.last_log_index, before.last_log_index, "no entry");
    }

    // Unsigned, without the leader's checks: every node rejects it alike.
    std::fs::remove_file(file("v2.wasm.sig")).expect("rm");
    let out = fails(&c, &["upgrade", p(&v2), "--no-precheck"]);
    assert!(out.contains("rejected on every node"), "{out}");
    let nodes = settled(&c);
    let first = nodes[0].upgrades.last().expect("a record").clone();
    assert_eq!(
        first.reason.as_deref(),
        Some("the module is not signed; the cluster trusts 1 module key")
    );
    for st in &nodes {
        let rec = st.upgrades.last().expect("a record");
        assert_eq!(rec.outcome(), first.outcome(), "node {}", st.id);
        assert_eq!(st.module_hash, h1, "node {}: module unchanged", st.id);
        assert_eq!(st.state_hash, nodes[0].state_hash);
    }

    // Signed by the trusted key: swapped on every node.
    ok(
        &c,
        &["module", "sign", p(&v2), "--key", p(&file("ops.key"))],
    );
    let out = ok(&c, &["upgrade", p(&v2)]);
    assert!(
        out.contains("signature: ") && out.contains("upgraded at index"),
        "{out}"
    );
    let nodes = settled(&c);
    for st in &nodes {
        assert_eq!(st.module_hash, h2, "node {}", st.id);
        assert_eq!(st.module_since_index, nodes[0].module_since_index);
    }

    // A signed shadow starts and promotes (the promote carries its
    // signature); an unsigned one is refused.
    let unsigned = refused(&c, &["upgrade", "--shadow", p(&v3)]);
    assert!(unsigned.contains("not signed"), "{unsigned}");
    // Signed for an upgrade, not for a shadow: refused.
    ok(
        &c,
        &["module", "sign", p(&v3), "--key", p(&file("ops.key"))],
    );
    let wrong_use = refused(&c, &["upgrade", "--shadow", p(&v3)]);
    assert!(
        wrong_use.contains("for this use: a shadow start"),
        "{wrong_use}"
    );
    ok(
        &c,
        &[
            "module",
            "sign",
            p(&v3),
            "--key",
            p(&file("ops.key")),
            "--shadow",
        ],
    );
    let out = ok(&c, &["upgrade", "--shadow", p(&v3)]);
    assert!(out.contains("started"), "{out}");
    for st in settled(&c) {
        let sh = st.shadow.as_ref().expect("shadow");
        assert_eq!(sh.module_hash, h3, "node {}", st.id);
    }
    let out = ok(&c, &["upgrade", "--promote"]);
    assert!(out.contains("upgraded at index"), "{out}");
    for st in settled(&c) {
        assert_eq!(st.module_hash, h3, "node {}", st.id);
        assert!(st.shadow.is_none());
    }

    // Signatures serve once, on one cluster. Each refused by the leader,
    // and, sent past its checks, rejected by every node alike at apply:
    // v2's old signature again (a replay, and a downgrade), and a
    // signature of v2 made offline for another cluster.
    // v2 signed offline for a given binding, kept as `name`.
    let sign_v2_for = |name: &str, cluster: &str, replaces: &str, since: &str| {
        ok(
            &c,
            &[
                "module",
                "sign",
                p(&v2),
                "--key",
                p(&file("ops.key")),
                "--cluster-id",
                cluster,
                "--replaces",
                replaces,
                "--since",
                since,
            ],
        );
        let kept = file(name);
        std::fs::rename(file("v2.wasm.sig"), &kept).expect("rename");
        kept
    };
    let now = c.status(leader).expect("status");
    let v2_earlier = now
        .upgrades
        .iter()
        .find(|u| u.module_hash == h2)
        .expect("v2's upgrade record");
    // Made for the state v2 replaced back then: the builtin module.
    let replayed = sign_v2_for(
        "v2-replayed.sig",
        now.cluster_id.as_deref().expect("cluster id"),
        &v2_earlier.replaces,
        "0",
    );
    let other_cluster = sign_v2_for(
        "v2-other-cluster.sig",
        "0123456789abcdef0123456789abcdef",
        &now.module_hash,
        &now.module_since_index.to_string(),
    );
    for sig in [&replayed, &other_cluster] {
        let out = refused(&c, &["upgrade", p(&v2), "--signature", p(sig)]);
        assert!(out.contains("for this use"), "{out}");
        let out = fails(
            &c,
            &["upgrade", p(&v2), "--signature", p(sig), "--no-precheck"],
        );
        assert!(out.contains("rejected on every node"), "{out}");
        let nodes = settled(&c);
        let first = nodes[0].upgrades.last().expect("a record").clone();
        assert!(
            first
                .reason
                .as_deref()
                .is_some_and(|r| r.contains("for this use")),
            "{first:?}"
        );
        for st in &nodes {
            let rec = st.upgrades.last().expect("a record");
            assert_eq!(rec.outcome(), first.outcome(), "node {}", st.id);
            assert_eq!(st.module_hash, h3, "node {}: module unchanged", st.id);
        }
    }

    // The bound: 16 keys at most (409), nothing changed past it.
    let extra: Vec<String> = (0..16u8)
        .map(|s| {
            let k = ed25519_dalek::SigningKey::from_bytes(&[s; 32]);
            hex::encode(k.verifying_key().to_bytes())
        })
        .collect();
    for k in &extra[..15] {
        let r = c
            .post(
                leader,
                "/v1/admin/module-keys",
                serde_json::json!({ "key": k }),
            )
            .expect("trust");
        assert_eq!(r.status, 200, "{r:?}");
    }
    let r = c
        .post(
            follower,
            "/v1/admin/module-keys",
            serde_json::json!({ "key": extra[15] }),
        )
        .expect("trust");
    assert_eq!(r.status, 409, "{r:?}");
    assert!(r.error().contains("16 module keys"), "{r:?}");
    let keys = c.get(follower, "/v1/admin/module-keys").expect("keys");
    assert_eq!(keys.body["keys"].as_array().map(Vec::len), Some(16));
    let bad = c
        .post(
            leader,
            "/v1/admin/module-keys",
            serde_json::json!({ "key": "zz" }),
        )
        .expect("trust");
    assert_eq!(bad.status, 400, "{bad:?}");
    let bad = c
        .post_bytes(leader, "/v1/admin/upgrade?signature=12", LOCK_SM_WORLD01_V2)
        .expect("upgrade");
    assert_eq!(bad.status, 400, "{bad:?}");
    for k in &extra[..15] {
        let r = c
            .delete(follower, &format!("/v1/admin/module-keys/{k}"))
            .expect("untrust");
        assert_eq!(r.status, 200, "{r:?}");
    }

    // Untrusting the last key: unsigned upgrades are possible again.
    let out = ok(&c, &["module", "untrust", p(&file("ops.pub"))]);
    assert!(
        out.contains("untrusted") && out.contains("no key is now"),
        "{out}"
    );
    let gone = c
        .delete(leader, &format!("/v1/admin/module-keys/{ops}"))
        .expect("untrust");
    assert_eq!(gone.status, 404, "{gone:?}");
    assert!(!file("v2.wasm.sig").exists(), "no signature beside it");
    // (Version 3 took version 2's reserved prefix as policy data, which a
    // module of world 0.1 could not enforce.)
    let cleared = c
        .put(
            leader,
            "/v1/admin/policy",
            serde_json::json!({ "rules": [] }),
        )
        .expect("policy");
    assert!(cleared.ok(), "{cleared:?}");
    // Version 2 is below version 3: only as a swap marked a rollback.
    let out = fails(&c, &["upgrade", p(&v2)]);
    assert!(out.contains("not above the active module's"), "{out}");
    let out = ok(&c, &["upgrade", p(&v2), "--rollback"]);
    assert!(
        out.contains("unsigned") && out.contains("upgraded at index"),
        "{out}"
    );
    for st in settled(&c) {
        assert_eq!(st.module_hash, h2, "node {}", st.id);
        assert!(st.trusted_module_keys.is_empty());
    }
}
