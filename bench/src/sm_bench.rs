//! State-machine apply throughput: the native build of `guest-sm` against the
//! wasm component run by `lockd`'s engine, side by side in one run.
//!
//! ```text
//! cargo run --release -p lockd-bench --bin sm-bench [-- --seconds 1.5 --json]
//! ```
//!
//! Workload: 1024 distinct keys; the command stream grants every key, then
//! releases every key, and repeats, so the table swings between empty and
//! 1024 locks. The stream is cut into batches of 1, 64 and 1024 commands;
//! one batch is one call (one committed range). Both builds get the same
//! batches. The native build takes owned commands, so each batch is cloned
//! before it is applied; that copy is the native counterpart of the wasm
//! call copying the batch into guest memory.
//!
//! Native and wasm are measured in alternating rounds (five each per batch
//! size, each a fifth of `--seconds`) and each side reports its median round,
//! so both see the same machine state.
//!
//! Also measured: the cost of a call that does no work (`counters`), i.e. the
//! fixed price of crossing into the guest (fuel reset included).
//!
//! Then the built-in module (world 0.1, through the engine's adapter)
//! against the reference module of world 0.2, on the same stream with
//! each release naming the token its grant got: both sides build each
//! entry from the same templates and read the tokens from the outcomes,
//! so they pay the same host-side work, and the difference is the guest's
//! (and the world's) own.

use std::time::{Duration, Instant};

use guest_sm::{Command as NCommand, LockTable};
use lockd_core::command::{Command, Outcome};
use lockd_core::engine::{EngineSettings, GuestInstance, WasmEngine};
use serde::Serialize;

use lockd_tests::fixtures::LOCK_SM_WORLD02;

const KEYS: usize = 1024;
const BATCHES: [usize; 3] = [1, 64, 1024];
const ROUNDS: u32 = 5;

/// The round with the median rate.
fn median(mut rounds: Vec<(f64, f64)>) -> (f64, f64) {
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    rounds[rounds.len() / 2]
}

#[derive(Serialize)]
struct Row {
    batch: usize,
    native_cmds_per_sec: f64,
    wasm_cmds_per_sec: f64,
    /// native / wasm: how many times slower wasm is.
    slowdown: f64,
    native_ns_per_call: f64,
    wasm_ns_per_call: f64,
}

#[derive(Serialize)]
struct WorldRow {
    batch: usize,
    world01_cmds_per_sec: f64,
    world02_cmds_per_sec: f64,
    /// 0.2 / 0.1.
    ratio: f64,
}

#[derive(Serialize)]
struct Report {
    keys: usize,
    seconds_per_measurement: f64,
    rows: Vec<Row>,
    /// A guest call that does no work (`counters`), in ns.
    empty_call_ns: f64,
    /// wasm minus native time of one call at batch size 1, in ns.
    per_call_overhead_ns: f64,
    /// The built-in 0.1 module against the 0.2 reference module.
    worlds: Vec<WorldRow>,
}

/// Apply the stream's batches to `guest`, each release with the token its
/// key's grant got.
struct Tokened {
    guest: GuestInstance,
    tokens: Vec<u64>,
}

impl Tokened {
    fn apply(&mut self, batch: &[(usize, bool)], keys: &[String]) {
        let entries: Vec<Vec<Command>> = batch
            .iter()
            .map(|&(k, grant)| {
                vec![if grant {
                    Command::grant(keys[k].clone(), 10_000)
                } else {
                    Command::release(keys[k].clone(), self.tokens[k])
                }]
            })
            .collect();
        let out = self.guest.apply(&entries).expect("apply");
        for (&(k, _), o) in batch.iter().zip(&out) {
            if let [Outcome::Granted(g)] = o.as_slice() {
                self.tokens[k] = g.token;
            }
        }
        std::hint::black_box(out);
    }
}

/// The built-in module against the 0.2 reference module, alternating rounds.
fn worlds(engine: &WasmEngine, dur: Duration) -> Vec<WorldRow> {
    let keys: Vec<String> = (0..KEYS).map(|i| format!("key-{i:05}")).collect();
    let stream: Vec<(usize, bool)> = (0..KEYS)
        .map(|k| (k, true))
        .chain((0..KEYS).map(|k| (k, false)))
        .collect();
    let load = |bytes: &[u8]| Tokened {
        guest: engine
            .instantiate(&engine.load(bytes).expect("module"))
            .expect("instance"),
        tokens: vec![0; KEYS],
    };
    let mut rows = Vec::new();
    for &b in &BATCHES {
        let batches: Vec<&[(usize, bool)]> = stream.chunks(b).collect();
        let (mut v01, mut v02) = (load(lockd_core::builtin::LOCK_SM), load(LOCK_SM_WORLD02));
        let (mut r01, mut r02) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            r01.push(measure(&batches, dur / ROUNDS, |x| v01.apply(x, &keys)));
            r02.push(measure(&batches, dur / ROUNDS, |x| v02.apply(x, &keys)));
        }
        let (a, z) = (median(r01).0, median(r02).0);
        rows.push(WorldRow {
            batch: b,
            world01_cmds_per_sec: a,
            world02_cmds_per_sec: z,
            ratio: z / a,
        });
    }
    rows
}

fn stream() -> (Vec<NCommand>, Vec<Command>) {
    let keys: Vec<String> = (0..KEYS).map(|i| format!("key-{i:05}")).collect();
    let mut native = Vec::with_capacity(2 * KEYS);
    let mut wasm = Vec::with_capacity(2 * KEYS);
    for k in &keys {
        native.push(NCommand::Grant {
            key: k.clone(),
            lease_ms: 10_000,
        });
        wasm.push(Command::grant(k.clone(), 10_000));
    }
    for k in &keys {
        native.push(NCommand::Release { key: k.clone() });
        // A 0.1 module's release ignores the token.
        wasm.push(Command::release(k.clone(), 0));
    }
    (native, wasm)
}

/// Run `f` over the batches round-robin for about `dur`; returns (commands
/// per second, ns per call).
fn measure<T>(batches: &[&[T]], dur: Duration, mut f: impl FnMut(&[T])) -> (f64, f64) {
    // Warm up: one pass over the stream.
    for b in batches {
        f(b);
    }
    let (mut cmds, mut calls) = (0usize, 0usize);
    let start = Instant::now();
    while start.elapsed() < dur {
        for b in batches {
            f(b);
            cmds += b.len();
            calls += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    (cmds as f64 / secs, secs * 1e9 / calls as f64)
}

fn main() {
    let json = lockd_bench::flag("--json");
    let seconds: f64 = lockd_bench::arg("--seconds", 1.5);
    let dur = Duration::from_secs_f64(seconds);

    let engine = WasmEngine::new(EngineSettings::default(), None).expect("engine");
    let module = engine
        .load(lockd_core::builtin::LOCK_SM)
        .expect("built-in module");
    let (native_stream, wasm_stream) = stream();

    let mut rows = Vec::new();
    for &b in &BATCHES {
        let nb: Vec<&[NCommand]> = native_stream.chunks(b).collect();
        // One command per entry: the 0.1 adapter sends them in one call.
        let entries: Vec<Vec<Command>> = wasm_stream.iter().map(|c| vec![c.clone()]).collect();
        let wb: Vec<&[Vec<Command>]> = entries.chunks(b).collect();
        let mut table = LockTable::new();
        let mut guest: GuestInstance = engine.instantiate(&module).expect("instance");
        let (mut native, mut wasm) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            native.push(measure(&nb, dur / ROUNDS, |batch| {
                std::hint::black_box(table.apply_batch(batch.to_vec()));
            }));
            wasm.push(measure(&wb, dur / ROUNDS, |batch| {
                std::hint::black_box(guest.apply(batch).expect("apply"));
            }));
        }
        let ((n_rate, n_call), (w_rate, w_call)) = (median(native), median(wasm));
        rows.push(Row {
            batch: b,
            native_cmds_per_sec: n_rate,
            wasm_cmds_per_sec: w_rate,
            slowdown: n_rate / w_rate,
            native_ns_per_call: n_call,
            wasm_ns_per_call: w_call,
        });
    }

    let mut guest = engine.instantiate(&module).expect("instance");
    let calls: Vec<&[()]> = vec![&[()]];
    let (_, empty_call_ns) = measure(&calls, dur, |_| {
        std::hint::black_box(guest.counters().expect("counters"));
    });
    let per_call_overhead_ns = rows[0].wasm_ns_per_call - rows[0].native_ns_per_call;
    let report = Report {
        keys: KEYS,
        seconds_per_measurement: seconds,
        rows,
        empty_call_ns,
        per_call_overhead_ns,
        worlds: worlds(&engine, dur),
    };

    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serialises")
        );
        return;
    }
    println!("State machine apply, Grant/Release over {KEYS} keys, {seconds} s per cell\n");
    println!(
        "| batch | native cmds/s | wasm cmds/s | native/wasm | native ns/call | wasm ns/call |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for r in &report.rows {
        println!(
            "| {} | {:.0} | {:.0} | {:.2}x | {:.0} | {:.0} |",
            r.batch,
            r.native_cmds_per_sec,
            r.wasm_cmds_per_sec,
            r.slowdown,
            r.native_ns_per_call,
            r.wasm_ns_per_call
        );
    }
    println!(
        "\nper-call overhead at batch 1 (wasm - native): {:.0} ns; empty guest call (`counters`): {:.0} ns",
        report.per_call_overhead_ns, report.empty_call_ns
    );
    println!("\nBuilt-in module (world 0.1) against the 0.2 reference module, releases by token\n");
    println!("| batch | 0.1 cmds/s | 0.2 cmds/s | 0.2/0.1 |");
    println!("|---:|---:|---:|---:|");
    for r in &report.worlds {
        println!(
            "| {} | {:.0} | {:.0} | {:.2} |",
            r.batch, r.world01_cmds_per_sec, r.world02_cmds_per_sec, r.ratio
        );
    }
}
