//! Engine settings, the wasmtime `Config` they produce, and their fingerprint.
//!
//! Every setting that can change what a guest computes, or at which point it
//! fails, is spelled out here and enters the fingerprint. Two nodes with equal
//! fingerprints run the same module to the same result.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};
use wasmtime::{Config, OptLevel, WasmFeatures};

/// The wasmtime release the host is built against. Cargo pins it exactly
/// (`=48.0.8`), so the fingerprint can name it.
pub const WASMTIME_VERSION: &str = "48.0.8";

/// Settings that decide guest behaviour. Identical on every node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineSettings {
    /// Fuel given to every guest call (roughly one unit per wasm
    /// instruction). A call that needs more fails with
    /// [`super::EngineError::FuelExhausted`] on every node alike.
    pub fuel_per_call: u64,
    /// Fuel given to a call that moves the whole state (`snapshot`,
    /// `restore`, `downgrade-snapshot`): their cost grows with the table,
    /// which the capacity bound keeps at least ten times inside this.
    pub fuel_per_state_call: u64,
    /// The most linear memory a guest instance may grow to, all its
    /// memories together.
    pub memory_limit_bytes: u64,
    /// The most native stack a guest call may use.
    pub max_wasm_stack: usize,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            // Well under a second of guest code on a current core (one
            // unit is one wasm instruction); applying 1024 grants takes
            // 1-2 % of it (capacity-bench).
            fuel_per_call: 5_000_000_000,
            // Ten times that: a few seconds. Restoring a table at the
            // default capacity bound takes under a tenth (capacity-bench).
            fuel_per_state_call: 50_000_000_000,
            memory_limit_bytes: 1 << 30,
            max_wasm_stack: 1 << 20,
        }
    }
}

/// Each wasm proposal and whether it is on. Written out in full so that a
/// wasmtime upgrade that changes a default cannot change guest behaviour
/// silently.
pub const FEATURES: &[(&str, WasmFeatures, bool)] = &[
    // The MVP and the proposals Rust's wasm32 target emits by default.
    ("mutable-global", WasmFeatures::MUTABLE_GLOBAL, true),
    (
        "saturating-float-to-int",
        WasmFeatures::SATURATING_FLOAT_TO_INT,
        true,
    ),
    ("sign-extension", WasmFeatures::SIGN_EXTENSION, true),
    ("multi-value", WasmFeatures::MULTI_VALUE, true),
    ("bulk-memory", WasmFeatures::BULK_MEMORY, true),
    ("reference-types", WasmFeatures::REFERENCE_TYPES, true),
    ("floats", WasmFeatures::FLOATS, true),
    // Fixed-width SIMD is deterministic once NaNs are canonicalised.
    ("simd", WasmFeatures::SIMD, true),
    ("extended-const", WasmFeatures::EXTENDED_CONST, true),
    ("component-model", WasmFeatures::COMPONENT_MODEL, true),
    // Off: nondeterministic by design (relaxed SIMD, threads), or not needed
    // by a lock table and best kept out of the trusted surface.
    ("relaxed-simd", WasmFeatures::RELAXED_SIMD, false),
    ("threads", WasmFeatures::THREADS, false),
    (
        "shared-everything-threads",
        WasmFeatures::SHARED_EVERYTHING_THREADS,
        false,
    ),
    ("multi-memory", WasmFeatures::MULTI_MEMORY, false),
    ("memory64", WasmFeatures::MEMORY64, false),
    ("tail-call", WasmFeatures::TAIL_CALL, false),
    (
        "function-references",
        WasmFeatures::FUNCTION_REFERENCES,
        false,
    ),
    ("gc", WasmFeatures::GC, false),
    ("exceptions", WasmFeatures::EXCEPTIONS, false),
    ("legacy-exceptions", WasmFeatures::LEGACY_EXCEPTIONS, false),
    ("stack-switching", WasmFeatures::STACK_SWITCHING, false),
    ("custom-page-sizes", WasmFeatures::CUSTOM_PAGE_SIZES, false),
    ("wide-arithmetic", WasmFeatures::WIDE_ARITHMETIC, false),
    ("memory-control", WasmFeatures::MEMORY_CONTROL, false),
    ("cm-async", WasmFeatures::CM_ASYNC, false),
    (
        "cm-more-async-builtins",
        WasmFeatures::CM_MORE_ASYNC_BUILTINS,
        false,
    ),
    ("cm-threading", WasmFeatures::CM_THREADING, false),
    ("cm-async-stackful", WasmFeatures::CM_ASYNC_STACKFUL, false),
    ("cm-error-context", WasmFeatures::CM_ERROR_CONTEXT, false),
    ("cm-gc", WasmFeatures::CM_GC, false),
];

impl EngineSettings {
    /// The most bytes one call may copy out of the guest: its memory limit.
    pub fn hostcall_fuel(&self) -> usize {
        usize::try_from(self.memory_limit_bytes).unwrap_or(usize::MAX)
    }

    /// The wasmtime configuration, every relevant setting explicit.
    pub fn wasmtime_config(&self) -> Config {
        let mut config = Config::new();
        for (_, flag, on) in FEATURES {
            config.wasm_features(*flag, *on);
        }
        config
            // Determinism.
            .cranelift_nan_canonicalization(true)
            .relaxed_simd_deterministic(true)
            .consume_fuel(true)
            .epoch_interruption(false)
            .max_wasm_stack(self.max_wasm_stack)
            // Code generation: these change speed, not results.
            .cranelift_opt_level(OptLevel::Speed)
            .debug_info(false)
            .native_unwind_info(true)
            // Memory: a plain growable heap per instance; the limit is
            // enforced by the store's resource limiter, not by reservation.
            .memory_may_move(true)
            .memory_init_cow(true);
        config
    }

    /// The canonical description of everything that decides guest behaviour,
    /// and its hash.
    pub fn fingerprint(&self) -> EngineFingerprint {
        let mut text = String::new();
        let _ = write!(
            text,
            "wasmtime={};arch={};",
            implementation_version(),
            std::env::consts::ARCH
        );
        for (name, _, on) in FEATURES {
            let _ = write!(text, "{name}={};", if *on { "on" } else { "off" });
        }
        let _ = write!(
            text,
            "nan-canonicalization=on;relaxed-simd-deterministic=on;fuel-per-call={};fuel-per-state-call={};memory-limit={};memory-limit-scope=store;hostcall-fuel=memory-limit;max-instances={};max-memories={};max-tables={};max-table-elements={};max-wasm-stack={};imports=none",
            self.fuel_per_call,
            self.fuel_per_state_call,
            self.memory_limit_bytes,
            super::store::MAX_INSTANCES,
            super::store::MAX_MEMORIES,
            super::store::MAX_TABLES,
            super::store::MAX_TABLE_ELEMENTS,
            self.max_wasm_stack
        );
        let hash = hex::encode(Sha256::digest(text.as_bytes()));
        EngineFingerprint { text, hash }
    }
}

/// The wasmtime version the fingerprint names. A build with the test-only
/// faults takes it from `LOCKD_FAULT_IMPLEMENTATION` when set, to
/// play a node of another implementation in a rolling-upgrade test.
fn implementation_version() -> String {
    #[cfg(feature = "faults")]
    if let Ok(v) = std::env::var("LOCKD_FAULT_IMPLEMENTATION") {
        return v;
    }
    WASMTIME_VERSION.to_string()
}

/// The fingerprint's settings that describe the implementation (which
/// wasmtime, which CPU) rather than what a guest computes: nodes may
/// differ in them (docs/operations.md, "Rolling binary upgrades").
/// Everything else is the determinism part, which must match.
pub const IMPLEMENTATION_SETTINGS: [&str; 2] = ["wasmtime", "arch"];

fn is_implementation(setting: &str) -> bool {
    let name = setting.split('=').next().unwrap_or(setting);
    IMPLEMENTATION_SETTINGS.contains(&name)
}

/// A summary of the engine's behaviour-deciding settings. Nodes compare
/// [`EngineFingerprint::hash`]; the text says what differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineFingerprint {
    pub text: String,
    /// SHA-256 of `text`, hex.
    pub hash: String,
}

impl EngineFingerprint {
    /// The first 16 hex digits, for file names and logs.
    pub fn short(&self) -> &str {
        &self.hash[..16]
    }

    /// The implementation part: `wasmtime=…;arch=…`.
    pub fn implementation(&self) -> String {
        let parts: Vec<&str> = self
            .text
            .split(';')
            .filter(|s| is_implementation(s))
            .collect();
        parts.join(";")
    }

    /// The determinism part's settings that differ from `other`'s: what
    /// keeps two nodes out of one cluster.
    pub fn determinism_differences(&self, other: &EngineFingerprint) -> Vec<String> {
        self.differences(other)
            .into_iter()
            .filter(|d| !d.split(" != ").all(is_implementation))
            .collect()
    }

    /// The settings that differ from `other`'s, as `name: ours != theirs`.
    pub fn differences(&self, other: &EngineFingerprint) -> Vec<String> {
        let ours: Vec<&str> = self.text.split(';').collect();
        let theirs: Vec<&str> = other.text.split(';').collect();
        let mut out = Vec::new();
        for o in &ours {
            let name = o.split('=').next().unwrap_or(o);
            match theirs.iter().find(|t| t.split('=').next() == Some(name)) {
                Some(t) if t == o => {}
                Some(t) => out.push(format!("{o} != {t}")),
                None => out.push(format!("{o} != (absent)")),
            }
        }
        for t in &theirs {
            let name = t.split('=').next().unwrap_or(t);
            if !ours.iter().any(|o| o.split('=').next() == Some(name)) {
                out.push(format!("(absent) != {t}"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(text: &str) -> EngineFingerprint {
        EngineFingerprint {
            text: text.into(),
            hash: String::new(),
        }
    }

    #[test]
    fn another_wasmtime_or_cpu_is_an_implementation_difference_only() {
        let ours = EngineSettings::default().fingerprint();
        assert_eq!(
            ours.implementation(),
            format!(
                "wasmtime={WASMTIME_VERSION};arch={}",
                std::env::consts::ARCH
            )
        );
        let newer = with(
            &ours
                .text
                .replace(&format!("wasmtime={WASMTIME_VERSION}"), "wasmtime=99.0.0"),
        );
        let arm = with(&ours.text.replace(
            &format!("arch={}", std::env::consts::ARCH),
            "arch=elsewhere",
        ));
        for other in [&newer, &arm] {
            assert_eq!(ours.differences(other).len(), 1);
            assert!(ours.determinism_differences(other).is_empty());
            assert_ne!(ours.implementation(), other.implementation());
        }
        let more_fuel = EngineSettings {
            fuel_per_call: 1,
            ..EngineSettings::default()
        }
        .fingerprint();
        let d = ours.determinism_differences(&more_fuel);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].starts_with("fuel-per-call="), "{d:?}");
        assert_eq!(ours.implementation(), more_fuel.implementation());
        // A setting one side lacks is a determinism difference.
        let fewer = with(&ours.text.replace("nan-canonicalization=on;", ""));
        assert_eq!(ours.determinism_differences(&fewer).len(), 1);
    }

    #[test]
    fn fingerprint_changes_with_every_setting() {
        let base = EngineSettings::default();
        let fp = base.fingerprint();
        assert_eq!(fp, EngineSettings::default().fingerprint());
        let more_fuel = EngineSettings {
            fuel_per_call: base.fuel_per_call + 1,
            ..base.clone()
        };
        let more_state_fuel = EngineSettings {
            fuel_per_state_call: base.fuel_per_state_call + 1,
            ..base.clone()
        };
        let more_mem = EngineSettings {
            memory_limit_bytes: base.memory_limit_bytes * 2,
            ..base.clone()
        };
        let more_stack = EngineSettings {
            max_wasm_stack: base.max_wasm_stack * 2,
            ..base.clone()
        };
        for other in [more_fuel, more_state_fuel, more_mem, more_stack] {
            let ofp = other.fingerprint();
            assert_ne!(ofp.hash, fp.hash);
            assert_eq!(fp.differences(&ofp).len(), 1, "{:?}", fp.differences(&ofp));
        }
    }

    #[test]
    fn every_feature_is_listed_once() {
        let mut seen = WasmFeatures::empty();
        for (name, flag, _) in FEATURES {
            assert!(!seen.intersects(*flag), "{name} listed twice");
            seen |= *flag;
        }
    }
}
