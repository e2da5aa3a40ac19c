//! The module cache trusts nothing it did not check: a directory or key
//! others may write (or read, for the key) is refused at open with the path
//! and the fix; only an admitted module is ever stored; and the cache stays
//! within its bound, the artifact used longest ago going first.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use lockd_core::engine::{CacheBound, EngineError, EngineSettings, WasmEngine};
use lockd_tests::fixtures;

fn open(dir: &Path) -> Result<WasmEngine, EngineError> {
    WasmEngine::new(EngineSettings::default(), Some(dir.to_path_buf()))
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn refused(r: Result<WasmEngine, EngineError>) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(_) => panic!("the cache was opened"),
    }
}

#[test]
fn a_cache_others_may_write_or_read_is_refused_at_start() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("module-cache");
    drop(open(&dir).expect("a new cache"));
    let key = root.path().join("module-cache.key");

    chmod(&dir, 0o777);
    let e = refused(open(&dir));
    assert!(
        e.contains(&dir.display().to_string()) && e.contains("chmod go-w"),
        "{e}"
    );
    chmod(&dir, 0o700);

    chmod(&key, 0o644);
    let e = refused(open(&dir));
    assert!(
        e.contains(&key.display().to_string()) && e.contains("chmod 600"),
        "{e}"
    );
    chmod(&key, 0o600);

    // The directory the key lives in must not let others replace it.
    chmod(root.path(), 0o777);
    let e = refused(open(&dir));
    assert!(e.contains("not sticky"), "{e}");
    // Sticky, as /tmp is: others cannot replace this user's files.
    chmod(root.path(), 0o1777);
    open(&dir).expect("a sticky parent is fine");
    chmod(root.path(), 0o700);

    // Another user's key (only root can make one; other machines check
    // the modes above).
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&key, Some(65534), None).unwrap();
        let e = refused(open(&dir));
        assert!(e.contains("belongs to uid 65534"), "{e}");
        std::os::unix::fs::chown(&key, Some(0), None).unwrap();
    }
    open(&dir).expect("mended, it opens");
}

#[test]
fn a_module_that_fails_admission_is_never_stored() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("module-cache");
    let engine = open(&dir).unwrap();
    let e = engine.load(fixtures::IMPORT_GUEST).err().expect("imports");
    assert!(matches!(e, EngineError::HasImports(_)), "{e}");
    let e = engine
        .load(fixtures::EMPTY_COMPONENT)
        .err()
        .expect("no world");
    assert!(matches!(e, EngineError::WrongWorld(_)), "{e}");
    let stored = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(stored, 0, "a refused module reached the cache");
    // An admitted one is stored.
    engine.load(lockd_core::builtin::LOCK_SM).unwrap();
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
}

#[test]
fn the_cache_keeps_within_its_bound_the_longest_unused_going_first() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("module-cache");
    let bound = CacheBound {
        max_entries: 2,
        max_bytes: 1 << 40,
    };
    let engine = WasmEngine::bounded(EngineSettings::default(), Some(dir.clone()), bound).unwrap();
    let [a, b, c] = [
        lockd_core::builtin::LOCK_SM,
        fixtures::LOCK_SM_WORLD01_V2,
        fixtures::LOCK_SM_WORLD02,
    ];
    let path = |m: &[u8]| {
        engine
            .cache()
            .unwrap()
            .path_for(&lockd_core::engine::ModuleHash::of(m))
    };
    engine.load(a).unwrap();
    engine.load(b).unwrap();
    // `a` is used again (a hit renews it), so `b` is the one to go.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(path(b))
        .unwrap()
        .set_modified(old)
        .unwrap();
    engine.load(a).unwrap();
    engine.load(c).unwrap();
    assert!(path(a).exists() && path(c).exists(), "the used ones stay");
    assert!(!path(b).exists(), "the one used longest ago goes");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    // And by bytes: a bound of one byte keeps only the artifact just written.
    let tiny = CacheBound {
        max_entries: 64,
        max_bytes: 1,
    };
    let engine = WasmEngine::bounded(EngineSettings::default(), Some(dir.clone()), tiny).unwrap();
    engine.load(b).unwrap();
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    assert!(path(b).exists());
}
