"""Real lockd clusters for the tests: one `lockd serve` process per node,
each with its own data dir and log file, on free loopback ports.

Nothing here uses the client under test: the harness talks to the nodes
with urllib, so a bug in the client cannot hide a bug in the harness.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[3]

# The Raft timings of the Rust cluster tests (tests/src/cluster.rs): a
# loaded 2-core machine does not start spurious elections with them.
HEARTBEAT_MS = 50
ELECTION_MS = 400

_handed_out: set = set()


def lockd_bin() -> Path:
    path = Path(os.environ.get("LOCKD_BIN", ROOT / "target" / "release" / "lockd"))
    if not path.is_file():
        raise RuntimeError(
            f"{path} is missing: build it with `cargo build --release` (or `cargo test --release`) "
            "at the repository root, or point LOCKD_BIN at a lockd binary"
        )
    return path


def _ports() -> range:
    """This test process's ports: below the kernel's ephemeral range (where
    outgoing connections take their local ports, so a stopped node's port
    cannot be taken by one), as the Rust harness does, and split between
    pytest-xdist workers so two workers never try the same port."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            first, last = (int(p) for p in f.read().split())
    except (OSError, ValueError):
        first, last = 32768, 60999
    lo, hi = (20000, first) if first >= 21000 else (last + 1, 65536) if last <= 64000 else (20000, 32768)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    worker = int((os.environ.get("PYTEST_XDIST_WORKER") or "gw0")[2:] or 0)
    span = (hi - lo) // max(workers, 1)
    return range(lo + worker * span, lo + (worker + 1) * span)


def free_port() -> int:
    """A port nobody listens on now, never the same one twice in a run."""
    ports = _ports()
    start = random.randrange(len(ports))
    for i in range(len(ports)):
        port = ports[(start + i) % len(ports)]
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port left in {ports}")


def run(args: List[str], **kw: Any) -> subprocess.CompletedProcess:
    r = subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


@dataclass
class Secure:
    """Certificates (`lockd certs init`), tokens (`lockd auth token`) and an auth file."""

    dir: Path
    auth_file: Path
    tokens: Dict[str, str] = field(default_factory=dict)

    @property
    def ca(self) -> str:
        return str(self.dir / "ca.pem")

    def cert(self, name: str) -> tuple:
        return str(self.dir / f"{name}.pem"), str(self.dir / f"{name}.key")

    @staticmethod
    def create(dir: Path, node_ids: List[int]) -> "Secure":
        bin = str(lockd_bin())
        args = [bin, "certs", "init", str(dir)]
        for i in node_ids:
            args += ["--node", f"{i}=127.0.0.1"]
        for c in ("admin", "ci", "stranger"):
            args += ["--client", c]
        run(args)
        tokens: Dict[str, str] = {}
        hashes: Dict[str, str] = {}
        for p in ("deployer", "worker"):
            r = run([bin, "auth", "token", p])
            tokens[p] = r.stdout.strip()
            m = re.search(r"sha256:[0-9a-f]{64}", r.stderr)
            assert m, f"no token hash in: {r.stderr}"
            hashes[p] = m.group(0)
        auth = dir / "auth.toml"
        auth.write_text(
            f"""
[roles.jobs]
lock = ["jobs/"]

[principals.admin]
roles = ["admin"]

[principals.ci]
roles = ["jobs", "read"]

[principals.deployer]
roles = ["jobs"]
tokens = ["{hashes['deployer']}"]

[principals.worker]
roles = ["jobs", "read"]
tokens = ["{hashes['worker']}"]
"""
        )
        run([bin, "auth", "check", str(auth)])
        return Secure(dir=dir, auth_file=auth, tokens=tokens)


@dataclass
class Node:
    id: int
    addr: str
    data_dir: Path
    log: Path
    args: List[str]
    proc: Optional[subprocess.Popen] = None
    paused: bool = False


class Cluster:
    def __init__(self, dir: Path, n: int = 3, secure: bool = False, extra: Optional[List[str]] = None) -> None:
        self.dir = dir
        dir.mkdir(parents=True, exist_ok=True)
        self.bin = str(lockd_bin())
        ids = list(range(1, n + 1))
        self.secure = Secure.create(dir / "certs", ids) if secure else None
        self.nodes: Dict[int, Node] = {}
        addrs = {i: f"127.0.0.1:{free_port()}" for i in ids}
        initial = ",".join(f"{i}={a}" for i, a in addrs.items())
        for i in ids:
            args = [
                "serve", "--id", str(i), "--addr", addrs[i],
                "--data-dir", str(dir / f"n{i}"),
                "--initial-cluster", initial,
                "--heartbeat-ms", str(HEARTBEAT_MS),
                "--election-timeout-ms", str(ELECTION_MS),
            ]
            if self.secure:
                cert, key = self.secure.cert(f"node-{i}")
                args += ["--tls-cert", cert, "--tls-key", key, "--tls-ca", self.secure.ca,
                         "--auth-file", str(self.secure.auth_file)]
            args += extra or []
            self.nodes[i] = Node(i, addrs[i], dir / f"n{i}", dir / f"n{i}.log", args)
        self._ctx: Optional[ssl.SSLContext] = None
        if self.secure:
            self._ctx = ssl.create_default_context(cafile=self.secure.ca)
            self._ctx.load_cert_chain(*self.secure.cert("admin"))

    # ------------------------------------------------------------ processes

    def start(self) -> "Cluster":
        for i in self.nodes:
            self.spawn(i)
        self.wait_leader()
        return self

    def spawn(self, i: int) -> None:
        node = self.nodes[i]
        assert node.proc is None, f"node {i} runs already"
        env = dict(os.environ, RUST_LOG=os.environ.get("LOCKD_TEST_LOG", "info,openraft=warn"))
        # One compiled-module cache for every node of the suite (as the Rust
        # process tests share theirs): a module is compiled once, not at
        # every node start.
        env.setdefault("LOCKD_MODULE_CACHE", os.path.join(os.path.dirname(self.bin), "test-module-cache"))
        with open(node.log, "ab") as log:
            node.proc = subprocess.Popen([self.bin] + node.args, stdout=subprocess.DEVNULL, stderr=log, env=env)

    def kill(self, i: int) -> None:
        """SIGKILL node ``i`` and reap it."""
        node = self.nodes[i]
        if node.proc is not None:
            if node.paused:
                node.proc.send_signal(signal.SIGCONT)
                node.paused = False
            node.proc.kill()
            node.proc.wait(timeout=30)
            node.proc = None

    def terminate(self, i: int) -> None:
        """SIGTERM node ``i`` (a graceful stop: it ends its watch streams
        with a cut) and reap it."""
        node = self.nodes[i]
        if node.proc is not None:
            if node.paused:
                node.proc.send_signal(signal.SIGCONT)
                node.paused = False
            node.proc.terminate()
            try:
                node.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait(timeout=30)
                raise AssertionError(f"node {i} did not stop within 30 s of SIGTERM:\n{self.log_tail(i)}")
            finally:
                node.proc = None

    def pause(self, i: int) -> None:
        """SIGSTOP node ``i``, and return once the whole node has stopped.
        kill() returns before that: one thread takes the signal and stops
        the others when it next runs, and until then they go on serving (a
        request sent at once could still be answered). The kernel reports
        the stop to the parent, this process, once every thread has
        stopped; waitid blocks until then."""
        node = self.nodes[i]
        node.proc.send_signal(signal.SIGSTOP)
        node.paused = True
        # WEXITED and WNOWAIT: a node that died instead returns at once, unreaped.
        os.waitid(os.P_PID, node.proc.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)

    def resume(self, i: int) -> None:
        self.nodes[i].proc.send_signal(signal.SIGCONT)
        self.nodes[i].paused = False

    def stop(self) -> None:
        for i in self.nodes:
            self.kill(i)

    def running(self) -> List[int]:
        return [i for i, n in self.nodes.items() if n.proc is not None and n.proc.poll() is None]

    def check_alive(self) -> None:
        for i, n in self.nodes.items():
            if n.proc is not None and n.proc.poll() is not None:
                raise AssertionError(f"node {i} exited with {n.proc.returncode}:\n{self.log_tail(i)}")

    def log_tail(self, i: int, lines: int = 30) -> str:
        try:
            text = self.nodes[i].log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])

    def logs(self) -> str:
        return "\n".join(f"--- node {i} ({n.log}) ---\n{self.log_tail(i)}" for i, n in self.nodes.items())

    # ---------------------------------------------------------------- HTTP

    @property
    def scheme(self) -> str:
        return "https" if self.secure else "http"

    def url(self, i: int) -> str:
        return f"{self.scheme}://{self.nodes[i].addr}"

    @property
    def endpoints(self) -> List[str]:
        return [self.url(i) for i in self.nodes]

    def http(self, i: int, method: str, path: str, body: Optional[bytes] = None, timeout: float = 5.0) -> tuple:
        """(status, parsed JSON or text) from node ``i``, as the admin on a secure cluster."""
        req = urllib.request.Request(self.url(i) + path, data=body, method=method)
        if body is not None:
            # Bodies here are modules (the node refuses an untyped body).
            req.add_header("Content-Type", "application/wasm")
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self._ctx) as r:
                raw = r.read()
                status = r.status
        except urllib.error.HTTPError as e:
            raw, status = e.read(), e.code
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")

    def status(self, i: int) -> Optional[Dict[str, Any]]:
        try:
            code, body = self.http(i, "GET", "/v1/status", timeout=2.0)
        except OSError:
            return None
        return body if code == 200 and isinstance(body, dict) else None

    def wait_leader(self, timeout: float = 30.0, without: Optional[int] = None) -> int:
        """The leader every running node (but ``without``) agrees on."""
        end = time.monotonic() + timeout
        seen = None
        while time.monotonic() < end:
            self.check_alive()
            live = [i for i in self.running() if i != without and not self.nodes[i].paused]
            st = {i: self.status(i) for i in live}
            seen = {i: (s or {}).get("leader") for i, s in st.items()}
            leaders = set(seen.values())
            if len(leaders) == 1:
                (leader,) = leaders
                if leader in st and (st[leader] or {}).get("role") == "leader":
                    return leader
            time.sleep(0.05)
        raise AssertionError(f"no agreed leader within {timeout} s (each node's view: {seen})\n{self.logs()}")

    def metric(self, i: int, name: str) -> Optional[float]:
        code, text = self.http(i, "GET", "/metrics")
        assert code == 200, text
        for line in str(text).splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return None

    def wait_first_module(self) -> None:
        """Wait until every node runs the module the new cluster recorded
        first (its first leader's first entry), so that status reads
        agree from the start."""
        self.wait_leader()
        end = time.monotonic() + 30
        while True:
            st = [self.status(i) or {} for i in self.running()]
            hashes = {s.get("module_hash") for s in st}
            if len(hashes) == 1 and all(s.get("module_since_index", 0) > 0 for s in st):
                return
            assert time.monotonic() < end, f"the first module is not on every node:\n{self.logs()}"
            time.sleep(0.05)


def poll(what: str, cond: Callable[[], Any], timeout: float = 15.0, every: float = 0.02) -> Any:
    """Wait until ``cond()`` is true (and return it), checking every
    ``every`` seconds; fail naming ``what`` after ``timeout``."""
    end = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < end, f"{what}: not within {timeout} s"
        time.sleep(every)
