//! The cost of trap isolation at scale: how long one entry whose command
//! the module fails on takes to apply, with many locks held (the failed
//! call, a rebuild of the instance from its checkpoint, the command alone,
//! and a second rebuild), in this process.

use std::sync::Arc;
use std::time::Instant;

use lockd_core::command::{is_module_failed, Command, Outcome, Reason};
use lockd_core::engine::{EngineSettings, WasmEngine};
use lockd_core::entry::{Entry, LogId, Payload, Request, Response};
use lockd_core::precompile::Precompiler;
use lockd_core::replica::capacity::Capacity;
use lockd_core::replica::Replica;
use lockd_tests::fixtures::CHAOS_GUEST;

/// Print the table for each count of held locks.
pub fn table(counts: &[usize]) {
    println!("One failing command (a trap) with many locks held, the chaos module (world 0.1), in this process (median of 5):\n");
    println!(
        "| locks held | apply of a normal entry ms | apply of the failing entry ms | rebuilds |"
    );
    println!("|---:|---:|---:|---:|");
    for &locks in counts {
        let (normal, failing, rebuilds) = measure(locks);
        println!("| {locks} | {normal:.2} | {failing:.1} | {rebuilds} |");
    }
    println!();
}

fn entry(index: u64, request: Request) -> Entry {
    Entry {
        log_id: LogId::new(1, 0, index),
        payload: Payload::Normal(request),
    }
}

fn measure(locks: usize) -> (f64, f64, u64) {
    let engine = Arc::new(WasmEngine::new(EngineSettings::default(), None).expect("engine"));
    let loader = Precompiler::new(engine);
    let module = loader.load(CHAOS_GUEST).expect("chaos module");
    let mut r = Replica::new(1, loader, module, 1 << 40).expect("replica");
    let mut index = 1;
    let room = Capacity {
        max_held: locks as u64 + 1_000,
        max_key_bytes: 64 * (locks as u64 + 1_000),
    };
    r.apply([entry(index, Request::Capacity(room))])
        .expect("capacity");
    for chunk in (0..locks).collect::<Vec<_>>().chunks(4096) {
        index += 1;
        let batch: Vec<Command> = chunk
            .iter()
            .map(|i| Command::grant(format!("held/{i:07}"), 3_600_000))
            .collect();
        r.apply([entry(index, Request::commands(vec![batch]))])
            .expect("fill");
    }
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let mut normal = Vec::new();
    let mut failing = Vec::new();
    for round in 0..5 {
        index += 1;
        let grant = Command::grant(format!("cycle/{round}"), 1_000);
        let t = Instant::now();
        r.apply([entry(index, Request::commands(vec![vec![grant]]))])
            .expect("normal");
        normal.push(ms(t));
        index += 1;
        let trap = vec![vec![Command::grant("chaos:trap", 1_000)]];
        let t = Instant::now();
        let out = r
            .apply([entry(index, Request::commands(trap))])
            .expect("isolated");
        failing.push(ms(t));
        let refused = matches!(&out[0], Response::Lock(g)
            if matches!(&g[0][0], Outcome::Rejected(Reason::Unsupported(w)) if is_module_failed(w)));
        assert!(
            refused,
            "the trap was not refused as a module failure: {out:?}"
        );
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    assert_eq!(r.counters().expect("counters").holders as usize, locks + 5);
    (
        median(normal),
        median(failing),
        r.view(false).instance_rebuilds,
    )
}
