"""Real lockd processes on loopback and a headless Chromium for the
console's browser test (conftest.py) and its screenshot (screenshot.py)."""

import contextlib
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
LOCKD = pathlib.Path(os.environ.get("LOCKD_BIN", ROOT / "target/release/lockd"))
HEARTBEAT_MS = 50
ELECTION_MS = 400


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for(what, fn, timeout=30.0, every=0.1):
    """Poll fn until it returns something truthy; fail naming `what` and the
    last value (or exception) seen."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - reported below
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}")
        time.sleep(every)


def http(addr, method, path, body=None, token=None, timeout=5.0):
    """(status, parsed JSON or text) of one request to a node; a body of
    bytes is sent as a module (application/wasm), any other as JSON."""
    raw = isinstance(body, bytes)
    data = body if raw else None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{addr}{path}", data=data, method=method)
    if data is not None:
        req.add_header("content-type", "application/wasm" if raw else "application/json")
    if token:
        req.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


class Node:
    def __init__(self, id, addr, data_dir, log, args):
        self.id, self.addr, self.data_dir, self.log, self.args = id, addr, data_dir, log, args
        self.proc = None

    def start(self):
        out = open(self.log, "ab")
        # One compiled-module cache for every node (as the other suites
        # share theirs): a module is compiled once, not at every start.
        env = dict(os.environ)
        env.setdefault("LOCKD_MODULE_CACHE", str(LOCKD.parent / "test-module-cache"))
        self.proc = subprocess.Popen([str(LOCKD), *self.args], stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        out.close()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None


class Cluster:
    """`n` lockd processes on 127.0.0.1, each with its own port and data dir."""

    def __init__(self, workdir, n, token=None, extra=()):
        if not LOCKD.exists():
            raise RuntimeError(f"{LOCKD} is missing: build it first (cargo build --release)")
        self.dir = pathlib.Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.token = token
        addrs = {i: f"127.0.0.1:{free_port()}" for i in range(1, n + 1)}
        initial = ",".join(f"{i}={a}" for i, a in addrs.items())
        self.nodes = {}
        for i, addr in addrs.items():
            args = ["serve", "--id", str(i), "--addr", addr, "--data-dir", str(self.dir / f"n{i}"),
                    "--initial-cluster", initial, "--heartbeat-ms", str(HEARTBEAT_MS),
                    "--election-timeout-ms", str(ELECTION_MS), *extra]
            self.nodes[i] = Node(i, addr, self.dir / f"n{i}", self.dir / f"n{i}.log", args)
        for node in self.nodes.values():
            node.start()

    def running(self):
        return [n for n in self.nodes.values() if n.running]

    def status(self, node):
        code, body = http(node.addr, "GET", "/v1/status", token=self.token, timeout=2.0)
        return body if code == 200 else None

    def leader(self, timeout=30.0):
        """The leader every running node agrees on (same id, same term)."""
        def agreed():
            sts = [self.status(n) for n in self.running()]
            if not sts or any(s is None for s in sts):
                return None
            leaders = [s for s in sts if s["role"] == "leader"]
            if len(leaders) != 1:
                return None
            l = leaders[0]
            return l["id"] if all(s["leader"] == l["id"] and s["term"] == l["term"] for s in sts) else None
        return wait_for("an agreed leader", agreed, timeout)

    def describe(self):
        lines = []
        for n in self.nodes.values():
            lines.append(f"node {n.id} {n.addr} running={n.running} log={n.log}")
            with contextlib.suppress(OSError):
                lines.extend("    " + l for l in n.log.read_text(errors="replace").splitlines()[-15:])
        return "\n".join(lines)

    def close(self):
        for n in self.nodes.values():
            n.kill()


def auth_token(principal):
    """A fresh token from `lockd auth token` and the hash line for the file."""
    r = subprocess.run([str(LOCKD), "auth", "token", principal], capture_output=True, text=True, check=True)
    token = r.stdout.strip()
    m = re.search(r'"(sha256:[0-9a-f]{64})"', r.stderr)
    assert token.startswith("lkd_") and m, (r.stdout, r.stderr)
    return token, m.group(1)


def find_exe(*names, hint):
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    raise RuntimeError(f"none of {names} found: {hint}")


def chrome(width=1440, height=1100):
    """Debian's headless Chromium through its chromedriver (Selenium)."""
    os.environ.setdefault("SE_OFFLINE", "true")   # never let Selenium Manager download anything
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = find_exe("chromium", "chromium-browser", hint="apt-get install chromium")
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              f"--window-size={width},{height}", "--no-first-run", "--disable-extensions",
              "--disable-background-networking", "--disable-sync", "--lang=en-US"):
        opts.add_argument(a)
    service = Service(find_exe("chromedriver", hint="apt-get install chromium-driver"))
    driver = webdriver.Chrome(service=service, options=opts)
    driver.set_page_load_timeout(30)
    return driver
