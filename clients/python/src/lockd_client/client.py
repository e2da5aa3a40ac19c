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
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from . import _core as C
from . import _session as S
from . import _watch as W
from . import errors as E

__all__ = ["Client", "Lock", "Watch", "Session", "Observe"]

_POOL_PER_NODE = 16
_READ_MAX = 64 * 1024


class _OneWrite:
    """Send a request's head and its body in one write. ``http.client``
    writes them apart, and on a connection with ``TCP_NODELAY`` they then
    travel as two segments: the node reads the head, and its request waits
    for the body, which under threads that contend for the GIL comes
    late (docs/performance.md, "The Python client")."""

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        if isinstance(message_body, bytes) and not encode_chunked:
            buffer: List[bytes] = self._buffer  # type: ignore[attr-defined]
            buffer.extend((b"", b""))
            head = b"\r\n".join(buffer)
            del buffer[:]
            self.send(head + message_body)  # type: ignore[attr-defined]
            return
        super()._send_output(message_body, encode_chunked)  # type: ignore[misc]


class _HTTPConnection(_OneWrite, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_OneWrite, http.client.HTTPSConnection):
    pass


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
            conn: http.client.HTTPConnection = _HTTPSConnection(
                ep.host, ep.port, timeout=self._connect_timeout, context=self._ctx
            )
        else:
            conn = _HTTPConnection(ep.host, ep.port, timeout=self._connect_timeout)
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


class _Stream:
    """A watch's own connection (never pooled), open while it streams.

    Holds no reference to its :class:`Watch`, so that a watch dropped
    without :meth:`Watch.close` closes it from a finalizer.
    """

    def __init__(self, transport: _Transport) -> None:
        self._transport = transport
        self._mu = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None
        self._resp: Optional[http.client.HTTPResponse] = None
        self._shut = False
        self.endpoint: Optional[C.Endpoint] = None

    def open(self, x: W.OpenStream) -> C.Reply:
        self.close()
        conn = self._transport._new(x.endpoint)
        with self._mu:
            shut = self._shut
            if not shut:
                self._conn = conn
        if shut:
            conn.close()
            raise C.NotSent("the watch was closed")
        headers = C.headers_for(self._transport._headers, x.endpoint)
        headers["Accept"] = "text/event-stream"
        try:
            assert conn.sock is not None
            conn.sock.settimeout(x.timeout)
            conn.request("GET", x.path, headers=headers)
            resp = conn.getresponse()
            data = b"" if resp.status == 200 else resp.read()
            if resp.status == 200:
                assert conn.sock is not None
                conn.sock.settimeout(x.idle)  # a read past it is a broken stream
        except (OSError, http.client.HTTPException, ValueError, AssertionError) as e:
            self.close()
            raise C.NoAnswer(e, False) from None
        reply = (resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        if resp.status != 200:
            self.close()
            return reply
        with self._mu:
            if self._conn is conn:
                self._resp = resp
                self.endpoint = x.endpoint
        return reply

    def read(self) -> bytes:
        resp = self._resp
        if resp is None:
            raise C.NoAnswer(ConnectionError("the stream is closed"), False)
        try:
            return resp.read1(_READ_MAX)
        # AttributeError: close() in another thread took the response's
        # file away in the middle of the read.
        except (OSError, http.client.HTTPException, ValueError, AttributeError) as e:
            self.close()
            raise C.NoAnswer(e, False) from None

    def close(self) -> None:
        """Close the connection; from any thread (a read blocked in another
        thread returns at once)."""
        with self._mu:
            conn, self._conn, self._resp, self.endpoint = self._conn, None, None, None
        if conn is None:
            return
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        conn.close()

    def shut(self) -> None:
        """Close the connection for good: no stream opens after this."""
        with self._mu:
            self._shut = True
        self.close()


class Watch:
    """The changes under a prefix, as :meth:`Client.watch` returns them: an
    iterator of :class:`~lockd_client.WatchEvent` (one log entry's changes)
    and :class:`~lockd_client.Progress` (everything up to an index was
    delivered), in log order, without an end.

    It resumes by itself: when its stream breaks, stays silent for
    ``idle_timeout`` or its node shuts down, it watches again on the next
    endpoint from the index after the last event delivered, so it yields
    every change once. It raises :class:`~lockd_client.errors.WatchCut`
    when that cannot work (``compacted``, ``watch_behind``), and
    :class:`~lockd_client.errors.Unavailable` when no node served it for
    ``retry_for``. Any exception out of :meth:`__next__` ends it.

    :meth:`close` (or the end of a ``with`` block, or dropping the last
    reference to it) closes its connection; it may be called from another
    thread to end a :meth:`__next__` waiting there, which then stops the
    iteration.
    """

    def __init__(self, client: "Client", prefix: str, from_index: Optional[int], idle: float) -> None:
        self.prefix = prefix
        #: The log index of the last event delivered (``None`` before the
        #: first): a new watch from ``last_index + 1`` goes on from here.
        self.last_index: Optional[int] = None
        self._plan = W.watch_plan(client._router, client._settings, prefix, from_index, idle)
        self._stream = _Stream(client._transport)
        self._mu = threading.Lock()  # the plan runs in one thread at a time
        self._closed = False
        self._finalize = weakref.finalize(self, self._stream.shut)

    @property
    def endpoint(self) -> Optional[str]:
        """The node whose stream is open now (``None`` between streams)."""
        ep = self._stream.endpoint
        return ep.url if ep is not None else None

    def __iter__(self) -> "Watch":
        return self

    def _step(self, reply: Any = None, error: Optional[BaseException] = None) -> Any:
        with self._mu:
            if self._closed:
                raise StopIteration
            return self._plan.throw(error) if error is not None else self._plan.send(reply)

    def __next__(self) -> Union[W.WatchEvent, W.Progress]:
        try:
            step = self._step()
            while True:
                if isinstance(step, (W.WatchEvent, W.Progress)):
                    self.last_index = step.index
                    return step
                if isinstance(step, C.Sleep):
                    time.sleep(step.seconds)
                    step = self._step()
                    continue
                if isinstance(step, W.CloseStream):
                    self._stream.close()
                    step = self._step()
                    continue
                try:
                    reply = self._stream.open(step) if isinstance(step, W.OpenStream) else self._stream.read()
                except (C.NotSent, C.NoAnswer) as e:
                    step = self._step(error=e)
                else:
                    step = self._step(reply)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """End the watch and close its connection (once; from any thread)."""
        self._closed = True
        self._finalize()
        try:
            with self._mu:
                self._plan.close()
        except ValueError:
            pass

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else (self.endpoint or "between streams")
        return f"<Watch {self.prefix!r} last index {self.last_index} {state}>"


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
        reentrant: bool = False,
        value: Optional[str] = None,
        session: Union["Session", int, None] = None,
        priority: int = 0,
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

        World 0.3 (docs/sessions.md): ``reentrant`` enters again a key this
        holder (principal, owner, session) holds, with the same token and a
        count one higher (:attr:`Lock.count`); ``value`` publishes a value
        with the holding (an election's leader value); ``session`` (a
        :class:`Session` or its id) holds the key in that session instead
        of on a lease of its own: ``lease`` is then ignored, and the
        session's keepalive renews it (prefer :meth:`Session.lock`).

        World 0.4: ``priority`` asks to go before waiters of a lower one
        when the key frees (the module's election policy decides; an older
        module keeps FIFO).
        """
        if isinstance(session, Session):
            return session.lock(key, wait, mode=mode, limit=limit, request_id=request_id, reentrant=reentrant, value=value)
        extra = C.check_extra(reentrant, value, session, priority)
        g = self._run(
            C.acquire_plan(
                self._router, self._settings, key, lease, wait, mode, limit,
                self.owner if owner is None else owner, request_id, extra,
            )
        )
        return Lock(self, g, keepalive and extra.session is None)

    def try_lock(self, key: str, lease: float, **options: Any) -> Optional["Lock"]:
        """Take ``key`` if it is free now; ``None`` if it is busy. Takes the
        options of :meth:`lock` (but no ``wait``)."""
        if "wait" in options:
            raise TypeError("try_lock does not wait: use lock(key, lease, wait=...)")
        try:
            return self.lock(key, lease, 0, **options)
        except E.Held:
            return None

    def release(self, key: str, token: int) -> int:
        """Release the holding of ``token`` on ``key`` (what :meth:`Lock.release`
        does). Returns what is left of it: 0 when it ended, more when a
        reentrant holding was entered several times."""
        op = C.release_op(C.check_key(key), C.check_token(token))
        return C.released_count(op, self._call(op))

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

    def watch(
        self, prefix: str = "", from_index: Optional[int] = None, *, idle_timeout: float = W.WATCH_IDLE
    ) -> Watch:
        """Follow every change under ``prefix`` (``""``: every key) from log
        index ``from_index`` (``None``: from the next entry applied): a
        :class:`Watch`, an iterator of :class:`~lockd_client.WatchEvent`
        and :class:`~lockd_client.Progress`. Any node answers it (it is not
        forwarded to the leader), on a connection of its own.

        A stream silent for ``idle_timeout`` seconds is taken for broken
        and resumed elsewhere (the node says where it is every 5 s: keep it
        well above that). See docs/watch.md.
        """
        C.check_text("prefix", prefix)
        return Watch(self, prefix, W.check_index("from_index", from_index), C.idle_seconds(idle_timeout))

    # ------------------------------------------ sessions and elections

    def open_session(
        self, ttl: float, *, owner: Optional[str] = None, request_id: Any = C.AUTO, keepalive: bool = True
    ) -> "Session":
        """Open a session of ``ttl`` seconds (docs/sessions.md): one lease
        for many holdings, renewed by a background thread (unless
        ``keepalive=False``); closing it, or its expiry, releases every
        holding in it in one log entry. Use it in a ``with`` block to close
        it at the end."""
        ms = C.lease_ms(ttl)
        owner = C.check_text("owner", self.owner if owner is None else owner)
        rid = C.random_id() if request_id is C.AUTO else (None if request_id is None else C.check_text("request_id", request_id))
        sent = time.monotonic()
        sid, got = S.opened(self._call(S.open_op(ms, owner, rid)))
        return Session(self, sid, min(got, ms / 1000.0), sent, owner, keepalive)

    def session_info(self, session: int) -> S.SessionInfo:
        """A session and its holdings, read linearizably."""
        return S.session_info(self._call(S.get_op(C.check_session(session))))

    def proclaim(self, key: str, token: int, value: str) -> None:
        """Publish ``value`` for the holding of ``token`` on ``key`` (an
        election's leader publishing its new value)."""
        self._call(S.proclaim_op(C.check_key(key), C.check_token(token), C.check_value(value)))

    def campaign(
        self, name: str, value: str, ttl: float, wait: Optional[float] = None, *, priority: int = 0
    ) -> "Lock":
        """Campaign in election ``name``: wait up to ``wait`` seconds
        (``None``: as long as it takes) to lead it, publishing ``value``,
        with a leadership lease of ``ttl`` renewed in the background. The
        :class:`Lock` is the leadership: its token is the epoch (larger
        than every earlier leader's), :meth:`Lock.release` resigns.
        Candidates queue in FIFO order; with a module of world 0.4 a
        higher ``priority`` goes first, and a leader whose lease ran out
        and who campaigns again leads again before the others."""
        return self.lock(name, ttl, wait, value=C.check_value(value), priority=priority)

    def leader(self, name: str) -> Optional[S.Leader]:
        """The leader of election ``name`` now (read linearizably), or
        ``None``."""
        return S.leader_of(name, self.list(C.check_key(name), limit=1))

    def observe(self, name: str, *, idle_timeout: float = W.WATCH_IDLE) -> "Observe":
        """Follow election ``name``: an iterator of its leaders, first the
        one now (``None``: no leader), then one per change of leader or of
        its value, from a watch that starts right after the read, so no
        change is missed or seen twice."""
        page = self.list(C.check_key(name), limit=1)
        if page.index is None:
            raise E.ProtocolError("the node did not say at which index it listed the election")
        return Observe(self.watch(name, page.index + 1, idle_timeout=idle_timeout), S.LeaderFold(name, S.leader_of(name, page)))

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

    def __init__(self, what: str, lease: float, deadline: float, renew: Callable[[float], float]) -> None:
        # What is renewed, for messages; the call that renews it (given the
        # deadline, past which it must not try) and answers the new lease.
        self.what = what
        self.renew = renew
        self.lease = lease
        self.deadline = deadline
        self.lost = threading.Event()
        self.reason: Optional[BaseException] = None
        self.stop = threading.Event()
        self.thread: Optional[threading.Thread] = None

    def lose(self, reason: BaseException) -> None:
        if not self.lost.is_set():
            self.reason = reason
            self.lost.set()

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name=f"lockd-keepalive {self.what}", daemon=True)
        self.thread.start()

    def run(self) -> None:
        every = self.lease / 3
        next_at = self.deadline - self.lease + every
        while True:
            if self.stop.wait(max(0.0, next_at - time.monotonic())):
                return
            now = time.monotonic()
            if now >= self.deadline:
                self.lose(E.LeaseEnded(f"the lease of {self.what} ended before it was renewed"))
                return
            try:
                renewed = self.renew(self.deadline)
            except E.LockdError as e:
                if self.stop.is_set():
                    return  # released meanwhile: a refusal is expected
                if C.is_refusal(e):
                    self.lose(e)
                    return
                if time.monotonic() >= self.deadline:
                    self.lose(E.LeaseEnded(f"the lease of {self.what} ended before it was renewed: {e}"))
                    return
                next_at = time.monotonic() + min(every, 0.05)
                continue
            except Exception as e:  # a bug, not the cluster: do not renew blindly
                self.lose(e)
                return
            # Never believe a renewal longer than the lease granted.
            self.deadline = now + min(renewed, self.lease)
            next_at = now + every


class _Held:
    """What a held lock and an open session share: a lease a
    :class:`_Renewal` keeps, and the end of a ``with`` block, which ends
    them (one that ended meanwhile, ``NotHeld``, is no error there:
    ``lost`` is set; other errors are raised unless the block raised)."""

    _r: _Renewal

    @property
    def lost_reason(self) -> Optional[BaseException]:
        return self._r.reason

    @property
    def deadline(self) -> float:
        return self._r.deadline

    def _end(self) -> None:
        raise NotImplementedError

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self._end()
        except E.NotHeld as e:
            self._r.lose(e)
        except E.LockdError:
            if exc_type is None:
                raise


class Lock(_Held):
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

    def __init__(self, client: Client, g: C.Grant, keepalive: bool = True, session: Optional["Session"] = None) -> None:
        self._client = client
        self.key: str = g.key
        self.token: int = g.token
        self.lease: float = g.lease
        self.mode: str = g.mode
        # None: the server chose it (the mode's default; see lock()).
        self.limit: Optional[int] = g.limit
        self.owner: str = g.owner
        self.request_id: Optional[str] = g.request_id
        #: Times this holder holds it (above 1: entered again, reentrant).
        self.count: int = g.count
        #: The session it lives in (``None``: a lease of its own).
        self.session: Optional[int] = g.session
        #: The value published with it (:meth:`proclaim` changes it).
        self.value: Optional[str] = g.value
        self._released = False
        if session is not None:
            # Its session's lease is its lease: lost when the session is.
            self._r = session._r
        else:
            key, token = g.key, g.token

            def renew(until: float) -> float:
                op = C.keepalive_op(key, token, until=until)
                return C.renewed_lease(op, client._call(op))

            self._r = _Renewal(f"{key!r} (token {token})", g.lease, g.deadline, renew)
            if keepalive:
                self._r.start()
            weakref.finalize(self, self._r.stop.set)
        self._own = session is None
        self.lost: threading.Event = self._r.lost

    def valid(self) -> bool:
        """Still ours as far as this process knows: not lost, before the deadline."""
        return not self.lost.is_set() and time.monotonic() < self._r.deadline

    def release(self) -> int:
        """Stop renewing and release the lock (once; later calls do nothing
        and answer 0). Answers what is left of the holding: 0 when it
        ended; for a reentrant holding entered several times, the entries
        left (each :class:`Lock` of them is one entry, renewed until it is
        released)."""
        if self._released:
            return 0
        self._released = True
        if self._own:
            self._r.stop.set()
        left = self._client.release(self.key, self.token)
        self.count = left
        return left

    def proclaim(self, value: str) -> None:
        """Publish ``value`` with this holding (a leader's new value)."""
        self._client.proclaim(self.key, self.token, value)
        self.value = value

    def __enter__(self) -> "Lock":
        return self

    def _end(self) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "lost" if self.lost.is_set() else ("released" if self._released else "held")
        return f"<Lock {self.key!r} token {self.token} lease {self.lease:g}s {state}>"


class Session(_Held):
    """An open session (:meth:`Client.open_session`): one lease for many
    holdings. ``id`` names it; :meth:`lock` holds a key in it; a
    background thread renews it (and so every holding in it) every third
    of its TTL; :meth:`close` releases them all in one log entry.

    ``lost`` is set when a renewal is refused (the session expired or was
    closed elsewhere) or its local deadline passed before a renewal got
    through; the locks taken in it share it. As a context manager it
    closes the session at the end of the block.
    """

    def __init__(self, client: Client, sid: int, ttl: float, sent: float, owner: str, keepalive: bool) -> None:
        self._client = client
        self.id: int = sid
        self.ttl: float = ttl
        self.owner: str = owner

        def renew(until: float) -> float:
            return S.opened(client._call(S.keepalive_op(sid, until)))[1]

        self._r = _Renewal(f"session {sid}", ttl, sent + ttl, renew)
        self.lost: threading.Event = self._r.lost
        self._closed = False
        if keepalive:
            self._r.start()
        weakref.finalize(self, self._r.stop.set)

    def valid(self) -> bool:
        """Still open as far as this process knows."""
        return not self._closed and not self.lost.is_set() and time.monotonic() < self._r.deadline

    def lock(
        self,
        key: str,
        wait: Optional[float] = None,
        *,
        mode: str = "exclusive",
        limit: Optional[int] = None,
        request_id: Any = C.AUTO,
        reentrant: bool = False,
        value: Optional[str] = None,
    ) -> Lock:
        """Hold ``key`` in this session (the options of :meth:`Client.lock`).
        It lives until the session ends or it is released: the session's
        keepalive is its keepalive, and its ``lost`` is the session's."""
        extra = C.check_extra(reentrant, value, self.id)
        g = self._client._run(
            C.acquire_plan(
                self._client._router, self._client._settings, key, self.ttl, wait, mode, limit,
                self.owner, request_id, extra,
            )
        )
        return Lock(self._client, g, session=self)

    def keepalive(self) -> float:
        """Renew the session once; returns its TTL (seconds)."""
        now = time.monotonic()
        ttl = S.opened(self._client._call(S.keepalive_op(self.id, None)))[1]
        self._r.deadline = max(self._r.deadline, now + min(ttl, self.ttl))
        return ttl

    def info(self) -> S.SessionInfo:
        """The session and its holdings, read linearizably."""
        return self._client.session_info(self.id)

    def close(self) -> None:
        """Stop renewing and close the session: every holding in it is
        released (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        self._r.stop.set()
        self._client._call(S.close_op(self.id))

    def __enter__(self) -> "Session":
        return self

    def _end(self) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "lost" if self.lost.is_set() else ("closed" if self._closed else "open")
        return f"<Session {self.id} ttl {self.ttl:g}s {state}>"


class Observe:
    """The leaders of one election (:meth:`Client.observe`): an iterator of
    :class:`~lockd_client.Leader` or ``None`` (no leader), first the one
    at the read, then one per change. It raises what its watch raises;
    :meth:`close` ends it (from any thread)."""

    def __init__(self, watch: Watch, fold: S.LeaderFold) -> None:
        self._watch = watch
        self._fold = fold
        self._first = True

    def __iter__(self) -> Iterator[Optional[S.Leader]]:
        return self

    def __next__(self) -> Optional[S.Leader]:
        if self._first:
            self._first = False
            return self._fold.current
        while True:
            got = self._fold.apply(next(self._watch))
            if got is not S.SAME:
                return got

    def close(self) -> None:
        self._watch.close()

    def __enter__(self) -> "Observe":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
