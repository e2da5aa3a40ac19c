//! The compiled-component cache: keyed by module hash and engine
//! fingerprint, authenticated with a key kept outside it, never trusted
//! blindly.

use lockd_core::command::{Command, Granted, Outcome};
use lockd_core::engine::cache::Compiled;
use lockd_core::engine::{EngineSettings, WasmEngine};

#[test]
fn second_load_comes_from_the_cache_and_behaves_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let engine = WasmEngine::new(
        EngineSettings::default(),
        Some(dir.path().join("module-cache")),
    )
    .unwrap();
    let first = engine.load(lockd_core::builtin::LOCK_SM).unwrap();
    assert_eq!(first.compiled(), Compiled::Fresh);
    let path = engine.cache().unwrap().path_for(&first.hash());
    assert!(path.exists());
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    assert!(
        name.starts_with(&first.hash().to_string()) && name.contains(engine.fingerprint().short()),
        "{name}"
    );

    // A new engine (a restarted node) with the same settings.
    let engine2 = WasmEngine::new(
        EngineSettings::default(),
        Some(dir.path().join("module-cache")),
    )
    .unwrap();
    let second = engine2.load(lockd_core::builtin::LOCK_SM).unwrap();
    assert_eq!(second.compiled(), Compiled::Cached);
    let mut a = engine.instantiate(&first).unwrap();
    let mut b = engine2.instantiate(&second).unwrap();
    let batch = [vec![
        Command::grant("x", 1),
        Command::release("x", 1),
        Command::grant("x", 2),
    ]];
    assert_eq!(a.apply(&batch).unwrap(), b.apply(&batch).unwrap());
    assert_eq!(a.state_hash().unwrap(), b.state_hash().unwrap());
}

#[test]
fn a_corrupt_artifact_is_recompiled_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let engine = WasmEngine::new(
        EngineSettings::default(),
        Some(dir.path().join("module-cache")),
    )
    .unwrap();
    let module = engine.load(lockd_core::builtin::LOCK_SM).unwrap();
    let path = engine.cache().unwrap().path_for(&module.hash());
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();

    let engine2 = WasmEngine::new(
        EngineSettings::default(),
        Some(dir.path().join("module-cache")),
    )
    .unwrap();
    let again = engine2.load(lockd_core::builtin::LOCK_SM).unwrap();
    assert_eq!(again.compiled(), Compiled::Fresh);
    let mut g = engine2.instantiate(&again).unwrap();
    assert_eq!(
        g.apply(&[vec![Command::grant("k", 1)]]).unwrap(),
        [[Outcome::Granted(Granted {
            token: 1,
            lease_ms: 1,
            repeat: false,
            count: 1
        })]]
    );
    // And the rewritten artifact is sound again.
    let engine3 = WasmEngine::new(
        EngineSettings::default(),
        Some(dir.path().join("module-cache")),
    )
    .unwrap();
    assert_eq!(
        engine3
            .load(lockd_core::builtin::LOCK_SM)
            .unwrap()
            .compiled(),
        Compiled::Cached
    );
}

#[test]
fn a_different_fingerprint_uses_a_different_artifact() {
    let dir = tempfile::tempdir().unwrap();
    let a = WasmEngine::new(
        EngineSettings::default(),
        Some(dir.path().join("module-cache")),
    )
    .unwrap();
    let other = EngineSettings {
        fuel_per_call: 1_000,
        ..EngineSettings::default()
    };
    let b = WasmEngine::new(other, Some(dir.path().join("module-cache"))).unwrap();
    assert_ne!(a.fingerprint().hash, b.fingerprint().hash);
    assert_eq!(
        a.fingerprint().differences(b.fingerprint()),
        ["fuel-per-call=5000000000 != fuel-per-call=1000"]
    );
    let ma = a.load(lockd_core::builtin::LOCK_SM).unwrap();
    let mb = b.load(lockd_core::builtin::LOCK_SM).unwrap();
    assert_eq!(mb.compiled(), Compiled::Fresh);
    assert_ne!(
        a.cache().unwrap().path_for(&ma.hash()),
        b.cache().unwrap().path_for(&mb.hash())
    );
}

#[test]
fn an_artifact_not_written_with_this_nodes_key_is_recompiled() {
    // Another node's cache (its own key) holds a genuine artifact.
    let theirs = tempfile::tempdir().unwrap();
    let other = WasmEngine::new(
        EngineSettings::default(),
        Some(theirs.path().join("module-cache")),
    )
    .unwrap();
    let m = other.load(lockd_core::builtin::LOCK_SM).unwrap();
    let artifact =
        std::fs::read(other.cache().unwrap().path_for(&m.hash())).unwrap()[32..].to_vec();

    let ours = tempfile::tempdir().unwrap();
    let dir = ours.path().join("module-cache");
    let engine = WasmEngine::new(EngineSettings::default(), Some(dir.clone())).unwrap();
    let key = ours.path().join("module-cache.key");
    assert_eq!(
        std::fs::read(&key).unwrap().len(),
        32,
        "the key lives beside the cache"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&key), 0o600);
    assert_eq!(mode(&dir), 0o700);

    // Planted with a correct SHA-256 in front (what a checksum would
    // accept), and with the other node's tag: neither is loaded.
    let path = engine.cache().unwrap().path_for(&m.hash());
    use sha2::Digest;
    let mut planted = sha2::Sha256::digest(&artifact).to_vec();
    planted.extend_from_slice(&artifact);
    for file in [
        planted,
        std::fs::read(other.cache().unwrap().path_for(&m.hash())).unwrap(),
    ] {
        std::fs::write(&path, &file).unwrap();
        let fresh = WasmEngine::new(EngineSettings::default(), Some(dir.clone())).unwrap();
        assert_eq!(
            fresh.load(lockd_core::builtin::LOCK_SM).unwrap().compiled(),
            Compiled::Fresh
        );
    }
    // What this node wrote back is its own, and loads.
    let again = WasmEngine::new(EngineSettings::default(), Some(dir)).unwrap();
    assert_eq!(
        again.load(lockd_core::builtin::LOCK_SM).unwrap().compiled(),
        Compiled::Cached
    );
    drop(engine);
}

#[test]
fn an_artifact_renamed_to_another_module_is_recompiled() {
    // Two modules' artifacts, each with a sound tag under this node's key.
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("module-cache");
    let engine = WasmEngine::new(EngineSettings::default(), Some(cache.clone())).unwrap();
    let v1 = engine.load(lockd_core::builtin::LOCK_SM).unwrap();
    let v2 = engine
        .load(lockd_tests::fixtures::LOCK_SM_WORLD01_V2)
        .unwrap();
    let (p1, p2) = {
        let c = engine.cache().unwrap();
        (c.path_for(&v1.hash()), c.path_for(&v2.hash()))
    };
    // v2's artifact put where v1's belongs: its tag covers its own name.
    std::fs::copy(&p2, &p1).unwrap();
    let again = WasmEngine::new(EngineSettings::default(), Some(cache)).unwrap();
    let loaded = again.load(lockd_core::builtin::LOCK_SM).unwrap();
    assert_eq!(loaded.compiled(), Compiled::Fresh, "not v2's code for v1");
    assert_eq!(loaded.hash(), v1.hash());
    assert_eq!(
        again
            .load(lockd_tests::fixtures::LOCK_SM_WORLD01_V2)
            .unwrap()
            .compiled(),
        Compiled::Cached
    );
}

/// Nodes sharing one cache (`--module-cache`) start at once: they all end
/// with the one key, so what one compiled, every other loads. Opened many
/// times over, since the race is between the key's creation and its
/// reading.
#[test]
fn engines_opening_one_new_cache_at_once_share_its_key() {
    let open_at_once = |cache: &std::path::Path| -> Vec<WasmEngine> {
        let barrier = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            let opened: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        WasmEngine::new(EngineSettings::default(), Some(cache.to_path_buf()))
                    })
                })
                .collect();
            opened
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap()
                        .expect("every engine opens the shared cache")
                })
                .collect()
        })
    };
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("shared-cache");
        let engines = open_at_once(&cache);
        // One key, whole, and no temporary file left beside it.
        let mut beside: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        beside.sort();
        assert_eq!(beside, ["shared-cache", "shared-cache.key"]);
        // Compiling takes a while: what one engine compiled, the others
        // load, checked in one round.
        if round == 0 {
            let first = engines[0].load(lockd_core::builtin::LOCK_SM).unwrap();
            assert_eq!(first.compiled(), Compiled::Fresh);
            for other in &engines[1..] {
                let loaded = other.load(lockd_core::builtin::LOCK_SM).unwrap();
                assert_eq!(loaded.compiled(), Compiled::Cached);
            }
        }
    }
}
