#!/usr/bin/env python3
"""Where a leader failover's time goes, from the nodes' own logs.

Starts a 3-node cluster of a built lockd on loopback (fsync on, the
default Raft timings unless given), keeps four clients acquiring fresh
keys on the two followers, SIGKILLs the leader, and prints for each trial
the time from the kill to each step the survivors log: a node standing
once a quorum granted its pre-vote ("stand"), the election won ("won"), the new
leader's lock table loaded ("table"), and the first acquire that started
after the kill and succeeded ("grant", as the failover benchmark counts
it). docs/performance.md, "The failover tail", reports a run.

    cargo build --release -p lockd
    scripts/failover-timeline.py --trials 5
    scripts/failover-timeline.py --signal term --trials 5
    scripts/failover-timeline.py --rolling 3
    scripts/failover-timeline.py --lockd target/ci/lockd -- --election-timeout-ms 100

`--signal term` stops the leader with SIGTERM instead (it hands its
leadership over, lockd::raft::handoff); `--signal stop` with SIGSTOP (its
connections stay open: the others find it gone by silence alone, as for
a network cut). `--rolling N` instead restarts
every node in turn with SIGTERM, N rounds, under load from six clients
that each retry on the next node when one fails, and prints each
restart's longest acquire wait (from an acquire's first try to its grant;
ROLLING_DEBUG=1 prints every failed try).

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
    # A pre-vote granted, the node asks openraft to stand (lockd::raft::stand)
    ("stand", "standing for election"),
    ("won", "a quorum granted my vote"),
    ("table", "lock table loaded"),
    # A stopping leader named its successor (lockd::raft::handoff)
    ("resign", "handing leadership over"),
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
    """The leader every node names, twice 200 ms apart."""
    end = time.monotonic() + deadline_s
    seen = None
    while time.monotonic() < end:
        named = set()
        for port in ports.values():
            try:
                named.add(http(port, "/v1/status").get("leader"))
            except OSError:
                named.add(None)
        leader = named.pop() if len(named) == 1 else None
        if leader and leader == seen:
            return leader
        seen = leader
        time.sleep(0.2 if leader else 0.05)
    sys.exit("no leader within 20 s")


def stamp(line):
    """The UTC time at the start of a log line, as a POSIX timestamp."""
    try:
        t = datetime.datetime.strptime(line[:26], "%Y-%m-%dT%H:%M:%S.%f")
    except ValueError:
        return None
    return t.replace(tzinfo=datetime.timezone.utc).timestamp()


def start(lockd, root, n, i, ports, extra):
    """Start (or restart) node i of trial n; its log is appended to."""
    members = ",".join(f"{j}=127.0.0.1:{p}" for j, p in ports.items())
    env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info,openraft=info"))
    log = os.path.join(root, f"trial{n}-node{i}.log")
    with open(log, "a") as out:
        proc = subprocess.Popen(
            [lockd, "serve", "--id", str(i), "--addr", f"127.0.0.1:{ports[i]}",
             "--data-dir", os.path.join(root, f"trial{n}-data{i}"),
             "--initial-cluster", members, *extra],
            stdout=subprocess.DEVNULL, stderr=out, env=env)
    return proc, log


def trial(lockd, root, n, extra, base_port, sig):
    ports = {i: base_port + i for i in (1, 2, 3)}
    procs, logs = {}, {}
    for i in ports:
        procs[i], logs[i] = start(lockd, root, n, i, ports, extra)
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
        procs[leader].send_signal(sig)
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
    how = {signal.SIGKILL: "killed", signal.SIGTERM: "stopped"}.get(sig, "paused")
    print(f"trial {n} (leader n{leader} {how}): {line} ms", flush=True)


def rolling(lockd, root, rounds, extra, base_port):
    """Restart every node in turn with SIGTERM, under load."""
    ports = {i: base_port + i for i in (1, 2, 3)}
    procs = {i: start(lockd, root, 0, i, ports, extra)[0] for i in ports}
    order = list(ports)
    waits = []  # (first try, grant) of every acquire
    stop = threading.Event()

    def client(c):
        k, at = 0, c % 3
        while not stop.is_set():
            began = time.time()
            while not stop.is_set():
                port = ports[order[at]]
                t = time.time()
                try:
                    http(port, f"/v1/locks/r{c}k{k}/acquire", {"lease_ms": 1000}, timeout=2.0)
                    waits.append((began, time.time()))
                    break
                except urllib.error.HTTPError as e:
                    if e.code == 409:
                        # An earlier try was granted and its answer lost
                        # with the node that stopped: the key is ours.
                        waits.append((began, time.time()))
                        break
                    at = (at + 1) % 3
                    time.sleep(0.005)
                except OSError as e:
                    if os.environ.get("ROLLING_DEBUG"):
                        print(f"  {t:.3f} n{order[at]} failed after {(time.time() - t) * 1e3:.0f} ms: {e}", flush=True)
                    at = (at + 1) % 3
                    time.sleep(0.005)
            k += 1

    try:
        wait_leader(ports)
        clients = [threading.Thread(target=client, args=(c,)) for c in range(6)]
        for t in clients:
            t.start()
        time.sleep(1.0)
        for r in range(1, rounds + 1):
            for i in order:
                leader = wait_leader(ports)
                t0 = time.time()
                if os.environ.get("ROLLING_DEBUG"):
                    print(f"  {t0:.3f} SIGTERM n{i}", flush=True)
                procs[i].send_signal(signal.SIGTERM)
                procs[i].wait()
                down = time.time() - t0
                procs[i] = start(lockd, root, 0, i, ports, extra)[0]
                # Back: it answers, and knows a leader.
                end = time.monotonic() + 20
                while time.monotonic() < end:
                    try:
                        if http(ports[i], "/v1/status").get("leader"):
                            break
                    except OSError:
                        pass
                    time.sleep(0.05)
                time.sleep(0.5)
                t1 = time.time()
                worst = max((g - b for b, g in waits if g >= t0 and b <= t1), default=0.0)
                role = "leader" if i == leader else "follower"
                print(f"round {r}: n{i} ({role}) restarted, exit {down * 1e3:.0f} ms, "
                      f"longest acquire wait {worst * 1e3:.0f} ms", flush=True)
        stop.set()
        for t in clients:
            t.join()
        worst = max((g - b for b, g in waits), default=0.0)
        print(f"{len(waits)} acquires, longest wait {worst * 1e3:.0f} ms")
    finally:
        stop.set()
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lockd", default=os.environ.get("LOCKD_BIN", "target/release/lockd"))
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--port", type=int, default=7610, help="ports from PORT+1 to PORT+3")
    ap.add_argument("--signal", choices=["kill", "term", "stop"], default="kill",
                    help="how the leader is stopped (stop: SIGSTOP, its sockets stay open)")
    ap.add_argument("--rolling", type=int, default=0, metavar="N",
                    help="N rounds of a rolling restart instead of trials")
    ap.add_argument("extra", nargs="*", help="after --: flags for every lockd serve")
    args = ap.parse_args()
    if not os.access(args.lockd, os.X_OK):
        sys.exit(f"{args.lockd} is missing: cargo build --release -p lockd (or --lockd PATH)")
    root = tempfile.mkdtemp(prefix="lockd-failover-")
    if args.rolling:
        rolling(args.lockd, root, args.rolling, args.extra, args.port)
        print(f"logs: {root}")
        return
    sig = {"kill": signal.SIGKILL, "term": signal.SIGTERM, "stop": signal.SIGSTOP}[args.signal]
    for n in range(1, args.trials + 1):
        trial(args.lockd, root, n, args.extra, args.port, sig)
    print(f"logs: {root}")


if __name__ == "__main__":
    main()
