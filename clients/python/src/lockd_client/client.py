"""The blocking client: :class:`Client` and :class:`Lock`.

HTTP/1.1 with ``http.client`` (kept-alive connections, one per request in
flight), TLS with ``ssl``, a keepalive thread per held lock.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
import weakref
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _core as C
from . import errors as E

__all__ = ["Client", "Lock"]

_POOL_PER_NODE = 16


class _Transport:
    """Kept-alive HTTP connections per node, for any thread."""

    def __init__(self, ctx: Optional[ssl.SSLContext], connect_timeout: float, headers: Dict[str, str]) -> None:
        self._ctx = ctx
        self._connect_timeout = connect_timeout
        self._headers = headers
        self._mu = threading.Lock()
        self._idle: Dict[C.Endpoint, List[http.client.HTTPConnection]] = {}
        self._closed = False

    def _new(self, ep: C.Endpoint) -> http.client.HTTPConnection:
        if ep.tls:
            if self._ctx is None:
                raise C.NotSent("https endpoint without a TLS context")
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                ep.host, ep.port, timeout=self._connect_timeout, context=self._ctx
            )
        else:
            conn = http.client.HTTPConnection(ep.host, ep.port, timeout=self._connect_timeout)
        try:
            conn.connect()
        except (OSError, ssl.SSLError) as e:
            conn.close()
            raise C.NotSent(str(e) or type(e).__name__) from None
        sock = conn.sock
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def exchange(self, x: C.Exchange) -> C.Reply:
        conn = None
        if x.reuse:
            with self._mu:
                idle = self._idle.get(x.endpoint)
                if idle:
                    conn = idle.pop()
        pooled = conn is not None
        if conn is None:
            conn = self._new(x.endpoint)
        headers = C.headers_for(self._headers, x.endpoint)
        if x.body is not None:
            headers["Content-Type"] = "application/json"
        try:
            assert conn.sock is not None
            conn.sock.settimeout(x.timeout)
            conn.request(x.method, x.path, body=x.body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException, ValueError, AssertionError) as e:
            conn.close()
            if pooled:
                self._drop(x.endpoint)
            raise C.NoAnswer(e, pooled) from None
        reply = (resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        if resp.will_close:
            conn.close()
        else:
            with self._mu:
                idle = self._idle.setdefault(x.endpoint, [])
                if self._closed or len(idle) >= _POOL_PER_NODE:
                    conn.close()
                else:
                    idle.append(conn)
        return reply

    def _drop(self, ep: C.Endpoint) -> None:
        """A kept-alive connection to ``ep`` broke: the others likely did too."""
        with self._mu:
            conns = self._idle.pop(ep, [])
        for c in conns:
            c.close()

    def close(self) -> None:
        with self._mu:
            self._closed = True
            conns = [c for cs in self._idle.values() for c in cs]
            self._idle.clear()
        for c in conns:
            c.close()


class Client:
    """A client of a lockd cluster (blocking; safe to share between threads).

    ``endpoints``: any nodes of the cluster (``http://host:port``,
    ``https://host:port`` or ``host:port``; default
    ``http://127.0.0.1:7400``). Requests go to the leader, found with
    ``/v1/status``; any node forwards lock requests to it, and a node that
    is down is skipped.

    ``token``: a bearer token (``lockd auth token``). ``cafile``: the CA
    that signed the nodes' certificates (TLS; bare ``host:port`` endpoints
    then mean https). ``certfile``/``keyfile``: a client certificate, whose
    first DNS name is the principal.

    ``timeout``: how long one request may take beyond the wait it asks for;
    ``connect_timeout``: for one connection; ``retry_for``: how long to
    keep trying through leader changes and dead nodes before
    :class:`~lockd_client.errors.Unavailable`. ``owner``: the owner
    (session) name sent with every acquire (default: random, one per
    client).
    """

    def __init__(
        self,
        endpoints: Union[str, Sequence[str], None] = None,
        *,
        token: Optional[str] = None,
        cafile: Optional[str] = None,
        certfile: Optional[str] = None,
        keyfile: Optional[str] = None,
        timeout: float = 5.0,
        connect_timeout: float = 2.0,
        retry_for: float = 10.0,
        owner: Optional[str] = None,
    ) -> None:
        cfg = C.configure(endpoints, token, cafile, certfile, keyfile, timeout, connect_timeout, retry_for, owner)
        self._endpoints = cfg.endpoints
        self._settings = cfg.settings
        self._router = C.Router(cfg.endpoints)
        self._transport = _Transport(cfg.ctx, cfg.settings.connect_timeout, cfg.headers)
        self.owner: str = cfg.owner

    # ----------------------------------------------------------- plumbing

    def _run(self, plan: C.Plan) -> Any:
        """Drive a plan of :mod:`lockd_client._core` with blocking I/O."""
        try:
            step = next(plan)
            while True:
                if isinstance(step, C.Sleep):
                    time.sleep(step.seconds)
                    step = plan.send(None)
                    continue
                try:
                    reply = self._transport.exchange(step)
                except (C.NotSent, C.NoAnswer) as e:
                    step = plan.throw(e)
                else:
                    step = plan.send(reply)
        except StopIteration as stop:
            return stop.value
        finally:
            plan.close()

    def _call(self, op: C.Op) -> Dict[str, Any]:
        return self._run(C.call_plan(self._router, self._settings, op))

    def close(self) -> None:
        """Close kept-alive connections (held locks stay held: release them first)."""
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def endpoints(self) -> List[str]:
        """The nodes this client knows: those given, then members learned."""
        return [ep.url for ep in self._router.endpoints]

    # -------------------------------------------------------------- locks

    def lock(
        self,
        key: str,
        lease: float,
        wait: Optional[float] = None,
        *,
        mode: str = "exclusive",
        limit: Optional[int] = None,
        owner: Optional[str] = None,
        request_id: Any = C.AUTO,
        keepalive: bool = True,
    ) -> "Lock":
        """Take ``key`` for ``lease`` seconds, waiting for it up to ``wait``
        seconds (``None``: as long as it takes; ``0``: not at all).

        Returns a :class:`Lock` whose lease a background thread renews
        (unless ``keepalive=False``); use it in a ``with`` block to release
        it at the end. Raises :class:`~lockd_client.errors.Timeout` if the
        key is still busy when the wait ends.

        ``mode`` and ``limit`` are world 0.2's: ``"shared"`` with ``limit``
        N is one of at most N readers (a writer, ``"exclusive"``, waits for
        all of them; without ``limit``, as many readers as the key's readers
        agreed on, else 1024 or the prefix policy's max-holders);
        ``"exclusive"`` with ``limit`` N is one of N slots of a counting
        semaphore (without it, a mutex). Every holder of a key gives the
        same limit. ``owner`` names the holder (default: the
        client's). ``request_id`` makes the acquire safe to repeat after a
        lost answer (default: a fresh random one; ``None`` sends none, and
        a lost answer is then :class:`~lockd_client.errors.OutcomeUnknown`).
        """
        g = self._run(
            C.acquire_plan(
                self._router, self._settings, key, lease, wait, mode, limit,
                self.owner if owner is None else owner, request_id,
            )
        )
        return Lock(self, g, keepalive)

    def try_lock(self, key: str, lease: float, **options: Any) -> Optional["Lock"]:
        """Take ``key`` if it is free now; ``None`` if it is busy. Takes the
        options of :meth:`lock` (but no ``wait``)."""
        if "wait" in options:
            raise TypeError("try_lock does not wait: use lock(key, lease, wait=...)")
        try:
            return self.lock(key, lease, 0, **options)
        except E.Held:
            return None

    def release(self, key: str, token: int) -> None:
        """Release the holding of ``token`` on ``key`` (what :meth:`Lock.release` does)."""
        self._call(C.release_op(C.check_key(key), C.check_token(token)))

    def keepalive(self, key: str, token: int) -> float:
        """Renew the lease of ``token`` on ``key`` once; returns the lease (seconds)."""
        op = C.keepalive_op(C.check_key(key), C.check_token(token), None)
        return C.renewed_lease(op, self._call(op))

    def get(self, key: str) -> C.LockInfo:
        """Who holds ``key``, read linearizably."""
        return C.lock_info(key, self._call(C.get_op(C.check_key(key))))

    def holders(self, key: str) -> List[C.Holder]:
        """Every holding of ``key`` (several for shared locks and semaphores)."""
        return self.get(key).holders

    def list(self, prefix: str = "", after: Optional[str] = None, limit: int = 100) -> C.ListPage:
        """Held keys under ``prefix`` after ``after``, at most ``limit`` (1 to 1000)."""
        C.check_text("prefix", prefix)
        if after is not None:
            C.check_text("after", after)
        return C.list_page(self._call(C.list_op(prefix, after, C.check_limit(limit))))

    def force_release(self, key: str, token: int) -> None:
        """End the holding of ``token`` on ``key`` now, whoever holds it (admin)."""
        self._call(C.force_release_op(C.check_key(key), C.check_token(token)))

    def policy(self) -> List[Dict[str, Any]]:
        """The lock module's policy rules (world 0.2)."""
        return list(self._call(C.policy_get_op()).get("rules", []))

    def set_policy(self, rules: Sequence[Mapping[str, Any]]) -> None:
        """Replace the lock module's policy rules (admin; world 0.2), e.g.
        ``[{"prefix": "tmp/", "max_lease_ms": 60000}, {"prefix": "frozen/", "reserved": True}]``."""
        self._call(C.policy_put_op([dict(r) for r in rules]))

    def status(self, endpoint: Optional[str] = None) -> Dict[str, Any]:
        """``/v1/status`` of one node (``endpoint``), or of any node."""
        op = C.Op(method="GET", path="/v1/status", what="status", kind="read", idempotent=True)
        if endpoint is None:
            return self._call(op)
        router = C.Router([C.parse_endpoint(endpoint, self._endpoints[0].scheme)])
        router.discovery = False
        return self._run(C.call_plan(router, self._settings, op))


class _Renewal:
    """A held lock's lease as this process sees it, and its keepalive thread.

    Kept apart from :class:`Lock` so that the thread holds no reference to
    the lock: a lock dropped without a release stops being renewed (its
    lease then ends it), as the Rust client's guard does.
    """

    def __init__(self, client: Client, g: C.Grant) -> None:
        self.client = client
        self.key = g.key
        self.token = g.token
        self.lease = g.lease
        self.deadline = g.deadline
        self.lost = threading.Event()
        self.reason: Optional[BaseException] = None
        self.stop = threading.Event()
        self.thread: Optional[threading.Thread] = None

    def lose(self, reason: BaseException) -> None:
        if not self.lost.is_set():
            self.reason = reason
            self.lost.set()

    def start(self) -> None:
        self.thread = threading.Thread(
            target=self.run, name=f"lockd-keepalive {self.key} {self.token}", daemon=True
        )
        self.thread.start()

    def run(self) -> None:
        every = self.lease / 3
        next_at = self.deadline - self.lease + every
        while True:
            if self.stop.wait(max(0.0, next_at - time.monotonic())):
                return
            now = time.monotonic()
            if now >= self.deadline:
                self.lose(E.LeaseEnded(f"the lease of {self.key!r} (token {self.token}) ended before it was renewed"))
                return
            op = C.keepalive_op(self.key, self.token, until=self.deadline)
            try:
                renewed = C.renewed_lease(op, self.client._call(op))
            except E.LockdError as e:
                if self.stop.is_set():
                    return  # released meanwhile: a refusal is expected
                if C.is_refusal(e):
                    self.lose(e)
                    return
                if time.monotonic() >= self.deadline:
                    self.lose(E.LeaseEnded(f"the lease of {self.key!r} (token {self.token}) ended before it was renewed: {e}"))
                    return
                next_at = time.monotonic() + min(every, 0.05)
                continue
            except Exception as e:  # a bug, not the cluster: do not renew blindly
                self.lose(e)
                return
            # Never believe a renewal longer than the lease granted.
            self.deadline = now + min(renewed, self.lease)
            next_at = now + every


class Lock:
    """A held lock.

    ``token`` is the fencing token: pass it with every write to the resource
    the lock protects, and have the resource refuse a token lower than the
    highest it has seen (a paused holder may wake up believing it still
    holds the lock; only the token check stops its writes).

    ``lost`` (a :class:`threading.Event`) is set when a renewal is refused
    (the lease is gone, or someone else holds the key now) or when the
    lease's local deadline passes before a renewal got through;
    ``lost_reason`` says which. ``deadline`` is that local deadline
    (``time.monotonic()``), counted from before the request that granted or
    renewed the lease, so it never outlasts the lease the leader keeps.

    As a context manager it releases the lock at the end of the block. A
    lock that ended meanwhile (``NotHeld``) is not an error there: ``lost``
    is set then. Other errors of the release are raised, unless the block
    itself raised.
    """

    def __init__(self, client: Client, g: C.Grant, keepalive: bool = True) -> None:
        self._client = client
        self.key: str = g.key
        self.token: int = g.token
        self.lease: float = g.lease
        self.mode: str = g.mode
        # None: the server chose it (the mode's default; see lock()).
        self.limit: Optional[int] = g.limit
        self.owner: str = g.owner
        self.request_id: Optional[str] = g.request_id
        self._r = _Renewal(client, g)
        self.lost: threading.Event = self._r.lost
        self._released = False
        if keepalive:
            self._r.start()
        weakref.finalize(self, self._r.stop.set)

    @property
    def lost_reason(self) -> Optional[BaseException]:
        return self._r.reason

    @property
    def deadline(self) -> float:
        return self._r.deadline

    def valid(self) -> bool:
        """Still ours as far as this process knows: not lost, before the deadline."""
        return not self.lost.is_set() and time.monotonic() < self._r.deadline

    def release(self) -> None:
        """Stop renewing and release the lock (once; later calls do nothing)."""
        if self._released:
            return
        self._released = True
        self._r.stop.set()
        self._client.release(self.key, self.token)

    def __enter__(self) -> "Lock":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.release()
        except E.NotHeld as e:
            self._r.lose(e)
        except E.LockdError:
            if exc_type is None:
                raise

    def __repr__(self) -> str:
        state = "lost" if self.lost.is_set() else ("released" if self._released else "held")
        return f"<Lock {self.key!r} token {self.token} lease {self.lease:g}s {state}>"
