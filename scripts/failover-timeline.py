#!/usr/bin/env python3
"""Where a leader failover's time goes, from the nodes' own logs.

Starts a 3-node cluster of a built lockd on loopback (fsync on, the
default Raft timings unless given), keeps four clients acquiring fresh
keys on the two followers, SIGKILLs the leader, and prints for each trial
the time from the kill to each step the survivors log: each node's
election timer firing ("stand"), the election won ("won"), the new
leader's lock table loaded ("table"), and the first acquire that started
after the kill and succeeded ("grant", as the failover benchmark counts
it). docs/performance.md, "The failover tail", reports a run.

    cargo build --release -p lockd
    scripts/failover-timeline.py --trials 5
    scripts/failover-timeline.py --lockd target/ci/lockd -- --election-timeout-ms 100

Arguments after `--` go to every `lockd serve`. Python's standard library
only; the nodes' logs stay in a temporary directory, printed at the end.
"""

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

STEPS = [
    ("stand", "do trigger election"),
    ("won", "a quorum granted my vote"),
    ("table", "lock table loaded"),
]


def http(port, path, body=None, timeout=1.0):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        headers={"content-type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def wait_leader(ports, deadline_s=20.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for port in ports.values():
            try:
                leader = http(port, "/v1/status").get("leader")
                if leader:
                    return leader
            except OSError:
                pass
        time.sleep(0.05)
    sys.exit("no leader within 20 s")


def stamp(line):
    """The UTC time at the start of a log line, as a POSIX timestamp."""
    try:
        t = datetime.datetime.strptime(line[:26], "%Y-%m-%dT%H:%M:%S.%f")
    except ValueError:
        return None
    return t.replace(tzinfo=datetime.timezone.utc).timestamp()


def trial(lockd, root, n, extra, base_port):
    ports = {i: base_port + i for i in (1, 2, 3)}
    members = ",".join(f"{i}=127.0.0.1:{p}" for i, p in ports.items())
    env = dict(os.environ, RUST_LOG="info,openraft=info")
    procs, logs = {}, {}
    for i, port in ports.items():
        logs[i] = os.path.join(root, f"trial{n}-node{i}.log")
        with open(logs[i], "w") as log:
            procs[i] = subprocess.Popen(
                [lockd, "serve", "--id", str(i), "--addr", f"127.0.0.1:{port}",
                 "--data-dir", os.path.join(root, f"trial{n}-data{i}"),
                 "--initial-cluster", members, *extra],
                stdout=subprocess.DEVNULL, stderr=log, env=env)
    try:
        leader = wait_leader(ports)
        survivors = [p for i, p in ports.items() if i != leader]
        killed = [float("inf")]
        first = []
        stop = threading.Event()

        def client(port, c):
            k = 0
            while not stop.is_set():
                started = time.time()
                try:
                    http(port, f"/v1/locks/t{n}c{c}k{k}/acquire", {"lease_ms": 1000}, timeout=2.0)
                    if started >= killed[0] and not first:
                        first.append(time.time())
                except OSError:
                    pass
                k += 1

        clients = [threading.Thread(target=client, args=(p, c))
                   for c, p in enumerate(survivors * 2)]
        for t in clients:
            t.start()
        time.sleep(1.0)
        killed[0] = time.time()
        procs[leader].send_signal(signal.SIGKILL)
        while not first and time.time() - killed[0] < 10:
            time.sleep(0.005)
        stop.set()
        for t in clients:
            t.join()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
    events = []
    for i in ports:
        if i == leader:
            continue
        seen = set()
        with open(logs[i]) as f:
            for line in f:
                t = stamp(line)
                if t is None or t < killed[0]:
                    continue
                for step, marker in STEPS:
                    if marker in line and step not in seen:
                        seen.add(step)
                        events.append((t, f"{step} n{i}"))
    if first:
        events.append((first[0], "grant"))
    events.sort()
    line = ", ".join(f"{what} +{(t - killed[0]) * 1e3:.0f}" for t, what in events)
    print(f"trial {n} (leader n{leader} killed): {line} ms", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lockd", default=os.environ.get("LOCKD_BIN", "target/release/lockd"))
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--port", type=int, default=7610, help="ports from PORT+1 to PORT+3")
    ap.add_argument("extra", nargs="*", help="after --: flags for every lockd serve")
    args = ap.parse_args()
    if not os.access(args.lockd, os.X_OK):
        sys.exit(f"{args.lockd} is missing: cargo build --release -p lockd (or --lockd PATH)")
    root = tempfile.mkdtemp(prefix="lockd-failover-")
    for n in range(1, args.trials + 1):
        trial(args.lockd, root, n, args.extra, args.port)
    print(f"logs: {root}")


if __name__ == "__main__":
    main()
