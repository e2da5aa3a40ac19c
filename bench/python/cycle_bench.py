"""Lock cycles (acquire + release) from the Python client, for
stage-bench's Python rows (docs/performance.md, "Stages and cost").

Each of ``--clients`` threads has a ``Client`` of its own (its own
kept-alive connection) and a key of its own, and runs cycles for
``--seconds`` once every client has connected; prints the JSON
``lockctl --json bench`` prints (cycles, cycles_per_sec, acquire_p50_ms,
errors), so the two are read alike.

    python cycle_bench.py --endpoint http://127.0.0.1:7400 [--clients 1] [--seconds 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

from lockd_client import Client


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--clients", type=int, default=1)
    p.add_argument("--seconds", type=float, default=4.0)
    a = p.parse_args()

    ready = threading.Barrier(a.clients + 1)
    stop = threading.Event()
    merged = threading.Lock()
    waits: list = []
    totals = {"cycles": 0, "errors": 0}

    def worker(i: int) -> None:
        key = f"pybench/{i}"
        client = Client([a.endpoint])
        client.get(key)  # connected before the clock starts
        ready.wait()
        mine, cycles, errors = [], 0, 0
        while not stop.is_set():
            started = time.perf_counter()
            try:
                lk = client.lock(key, lease=30, keepalive=False)
                mine.append(time.perf_counter() - started)
                lk.release()
                cycles += 1
            except Exception:  # counted, as lockctl bench counts them
                errors += 1
        client.close()
        with merged:
            waits.extend(mine)
            totals["cycles"] += cycles
            totals["errors"] += errors

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    ready.wait()
    began = time.perf_counter()
    stop.wait(a.seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    print(json.dumps({
        "cycles": totals["cycles"],
        "cycles_per_sec": totals["cycles"] / elapsed,
        "acquire_p50_ms": statistics.median(waits) * 1e3 if waits else 0.0,
        "errors": totals["errors"],
    }))


if __name__ == "__main__":
    main()
