//! What a full lock table costs each guest call, against the engine's
//! budgets: the measurement behind the default capacity bounds.
//!
//! ```text
//! cargo run --release -p lockd-bench --bin capacity-bench [-- --locks N --key-bytes L]
//!     [--fuel-per-state-call F]
//! ```
//!
//! For each lock module (the built-in world-0.1 module and the world-0.2
//! reference module) and each table shape (by default: the default bounds
//! filled with the shortest keys that reach both bounds, and with the
//! longest keys allowed), the table is filled with grants of distinct keys,
//! as many per call as the replica ever sends (4096), and then every call
//! the cluster makes on a table that size is run once:
//!
//! * `apply`: the most fuel one call of 4096 grants took, and the apply
//!   throughput of grants and releases of other keys beside the full table
//!   against the same on an empty one;
//! * `state-hash` (every audit point and status);
//! * `snapshot` (building a Raft snapshot) and `restore` into a new instance
//!   (installing one, restarting);
//! * `list-keys` walked in pages of 4096 (counting the capacity's use after
//!   a restore or an upgrade): the most fuel one page took;
//! * a migration into the other world's module (an upgrade): `restore` of
//!   the captured state in the new module.
//!
//! Fuel is deterministic (the same on every machine); memory is the guest's
//! linear memory, all memories together, as the limit counts it. Both are
//! shown as the number of times the call fits in its budget: the bounds are
//! chosen so that every call fits at least 10 times. Memory grows as
//! `a·holdings + b·key bytes`, so the corner where both bounds bind is the
//! fullest table the bounds allow; 1 KiB is the longest key.

use std::time::Instant;

use lockd_bench::arg;
use lockd_core::command::Command;
use lockd_core::engine::{EngineSettings, GuestInstance, WasmEngine};
use lockd_core::replica::capacity::{DEFAULT_CAPACITY, MAX_COMMANDS_PER_CALL};
use lockd_tests::fixtures::LOCK_SM_WORLD02;

struct Cost {
    call: &'static str,
    fuel: u64,
    memory: u64,
    ms: f64,
}

fn run(
    engine: &WasmEngine,
    module: &[u8],
    other: &[u8],
    locks: usize,
    key_bytes: usize,
) -> (Vec<Cost>, f64, f64) {
    let load = |bytes: &[u8]| {
        engine
            .instantiate(&engine.load(bytes).expect("module"))
            .expect("instance")
    };
    let mut g = load(module);
    let mut costs = Vec::new();
    let record = |costs: &mut Vec<Cost>, call, g: &GuestInstance, started: Instant| {
        costs.push(Cost {
            call,
            fuel: g.last_fuel_used(),
            memory: g.memory_bytes(),
            ms: started.elapsed().as_secs_f64() * 1e3,
        })
    };
    let key = |i: usize| {
        let mut k = format!("k/{i:012}/");
        while k.len() < key_bytes {
            k.push('x');
        }
        k.truncate(key_bytes.max(16));
        k
    };
    let empty_rate = {
        let mut fresh = load(module);
        cycle_rate(&mut fresh, key_bytes)
    };
    let mut worst = (0, 0.0);
    let mut i = 0;
    while i < locks {
        let n = MAX_COMMANDS_PER_CALL.min(locks - i);
        let groups: Vec<Vec<Command>> = (i..i + n)
            .map(|j| vec![Command::grant(key(j), 3_600_000)])
            .collect();
        let started = Instant::now();
        g.apply(&groups).expect("apply");
        if g.last_fuel_used() >= worst.0 {
            worst = (g.last_fuel_used(), started.elapsed().as_secs_f64() * 1e3);
        }
        i += n;
    }
    let full_rate = cycle_rate(&mut g, key_bytes);
    costs.push(Cost {
        call: "apply (4096 grants, the most per call)",
        fuel: worst.0,
        memory: g.memory_bytes(),
        ms: worst.1,
    });
    let t = Instant::now();
    g.state_hash().expect("state-hash");
    record(&mut costs, "state-hash", &g, t);
    let t = Instant::now();
    let mut after: Option<String> = None;
    let mut page_fuel = 0;
    loop {
        let page = g.list_keys("", after.as_deref(), 4096).expect("list-keys");
        page_fuel = page_fuel.max(g.last_fuel_used());
        match page.last() {
            Some(last) if page.len() == 4096 => after = Some(last.key.clone()),
            _ => break,
        }
    }
    costs.push(Cost {
        call: "list-keys (page of 4096)",
        fuel: page_fuel,
        memory: g.memory_bytes(),
        ms: t.elapsed().as_secs_f64() * 1e3,
    });
    let t = Instant::now();
    let snap = g.snapshot().expect("snapshot");
    record(&mut costs, "snapshot", &g, t);
    let mut fresh = load(module);
    let t = Instant::now();
    fresh.restore(&snap).expect("restore");
    record(&mut costs, "restore", &fresh, t);
    let state = lockd_core::upgrade::capture(&mut g, engine.load(other).expect("other").world())
        .expect("capture")
        .0;
    let mut migrated = load(other);
    let t = Instant::now();
    migrated.restore(&state).expect("migrate");
    record(
        &mut costs,
        "migrate (restore in the other world)",
        &migrated,
        t,
    );
    (costs, empty_rate, full_rate)
}

/// Keys per round of [`cycle_rate`].
const CYCLE_KEYS: usize = 2048;

/// Apply throughput beside what `g` holds: rounds of one call granting
/// [`CYCLE_KEYS`] keys of its own and one releasing them, commands/s over
/// 20 rounds after one to warm up.
fn cycle_rate(g: &mut GuestInstance, key_bytes: usize) -> f64 {
    let key = |i: usize| {
        let mut k = format!("cycle/{i:06}/");
        while k.len() < key_bytes {
            k.push('y');
        }
        k
    };
    let mut round = || {
        let grants: Vec<Vec<Command>> = (0..CYCLE_KEYS)
            .map(|i| vec![Command::grant(key(i), 60_000)])
            .collect();
        let out = g.apply(&grants).expect("apply grants");
        let releases: Vec<Vec<Command>> = out
            .iter()
            .enumerate()
            .map(|(i, o)| match o.first() {
                Some(lockd_core::command::Outcome::Granted(gr)) => {
                    vec![Command::release(key(i), gr.token)]
                }
                other => panic!("cycle grant: {other:?}"),
            })
            .collect();
        g.apply(&releases).expect("apply releases");
    };
    round();
    let t = Instant::now();
    for _ in 0..20 {
        round();
    }
    (20 * 2 * CYCLE_KEYS) as f64 / t.elapsed().as_secs_f64()
}

fn fuel_budget(b: &EngineSettings, call: &str) -> u64 {
    if ["snapshot", "restore", "migrate"]
        .iter()
        .any(|c| call.starts_with(c))
    {
        b.fuel_per_state_call
    } else {
        b.fuel_per_call
    }
}

fn main() {
    // A table beyond the default bounds needs a bigger state budget (the
    // scale report's 1M locks: `--fuel-per-state-call 500000000000`).
    let mut budget = EngineSettings::default();
    budget.fuel_per_state_call = arg("--fuel-per-state-call", budget.fuel_per_state_call);
    let engine = WasmEngine::new(budget.clone(), None).expect("engine");
    let shapes: Vec<(usize, usize)> = match (arg("--locks", 0usize), arg("--key-bytes", 0usize)) {
        (0, _) | (_, 0) => {
            let d = DEFAULT_CAPACITY;
            vec![
                (d.max_held as usize, (d.max_key_bytes / d.max_held) as usize),
                ((d.max_key_bytes / 1024) as usize, 1024),
            ]
        }
        (n, l) => vec![(n, l)],
    };
    println!(
        "budgets: fuel {} per call, memory {} MiB per instance\n",
        budget.fuel_per_call,
        budget.memory_limit_bytes >> 20
    );
    println!(
        "snapshot, restore and migrate get the state budget: {} fuel\n",
        budget.fuel_per_state_call
    );
    let modules: [(&str, &[u8], &[u8]); 2] = [
        (
            "built-in (0.1)",
            lockd_core::builtin::LOCK_SM,
            LOCK_SM_WORLD02,
        ),
        (
            "reference (0.2)",
            LOCK_SM_WORLD02,
            lockd_core::builtin::LOCK_SM,
        ),
    ];
    for (locks, key_bytes) in shapes {
        for (name, module, other) in modules {
            println!("## {name}: {locks} locks, {key_bytes}-byte keys\n");
            println!("| call | fuel | × inside fuel | memory MiB | × inside memory | ms |");
            println!("|---|---:|---:|---:|---:|---:|");
            let (costs, empty_rate, full_rate) = run(&engine, module, other, locks, key_bytes);
            for c in costs {
                let memory = match c.memory {
                    0 => "– | –".to_string(),
                    m => format!(
                        "{:.0} | {:.1}",
                        m as f64 / (1 << 20) as f64,
                        budget.memory_limit_bytes as f64 / m as f64
                    ),
                };
                println!(
                    "| {} | {} | {:.1} | {memory} | {:.1} |",
                    c.call,
                    c.fuel,
                    fuel_budget(&budget, c.call) as f64 / c.fuel.max(1) as f64,
                    c.ms
                );
            }
            println!(
                "\napply beside this table, rounds of {CYCLE_KEYS} grants and {CYCLE_KEYS} releases of other keys: {full_rate:.0} commands/s; on an empty table {empty_rate:.0} ({:.2} of it)",
                full_rate / empty_rate
            );
            println!();
        }
    }
}
