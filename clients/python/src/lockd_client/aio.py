"""The asyncio client: :class:`AsyncClient` and :class:`AsyncLock`.

HTTP/1.1 over asyncio streams (kept-alive connections, TLS by ``ssl``), a
keepalive task per held lock. The request logic is the blocking client's
(:mod:`lockd_client._core`), so retries and errors are the same.

Cancelling a waiting acquire closes its connection: the node sees the
caller leave and drops it from the key's queue (or releases a grant made
at that moment), so a cancelled acquire leaves no lock behind.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
import weakref
from typing import Any, Awaitable, Callable, Dict, Generator, List, Mapping, Optional, Sequence, Set, Tuple, Union

from . import _core as C
from . import _session as S
from . import _watch as W
from . import errors as E

__all__ = ["AsyncClient", "AsyncLock", "AsyncWatch", "AsyncSession", "AsyncObserve"]

_POOL_PER_NODE = 16
_MAX_BODY = 64 * 1024 * 1024
_MAX_HEADERS = 100
_READ_MAX = 64 * 1024

# Keepalive tasks that run: the event loop keeps only weak references.
_TASKS: Set["asyncio.Task[None]"] = set()

_Conn = Tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _BadAnswer(Exception):
    pass


async def _send(
    w: asyncio.StreamWriter, ep: C.Endpoint, method: str, path: str, body: Optional[bytes], headers: Mapping[str, str]
) -> None:
    host = f"[{ep.host}]" if ":" in ep.host else ep.host
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{ep.port}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if body is not None:
        lines.append("Content-Type: application/json")
    if body is not None or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body or b'')}")
    w.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
    await w.drain()


async def _read_head(r: asyncio.StreamReader) -> Tuple[str, int, Dict[str, str]]:
    """The status line and headers of an answer (after any interim ones)."""
    while True:
        line = await r.readline()
        if not line:
            raise _BadAnswer("the connection closed before an answer")
        parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise _BadAnswer(f"not an HTTP status line: {line[:80]!r}")
        version, status = parts[0], int(parts[1])
        headers: Dict[str, str] = {}
        for _ in range(_MAX_HEADERS + 1):
            h = await r.readline()
            if h in (b"\r\n", b"\n"):
                break
            if not h:
                raise _BadAnswer("the connection closed in the headers")
            k, sep, v = h.decode("latin-1").partition(":")
            if not sep:
                raise _BadAnswer(f"not a header line: {h[:80]!r}")
            headers[k.strip().lower()] = v.strip()
        else:
            raise _BadAnswer("too many header lines")
        if 100 <= status < 200:
            continue  # an interim answer; the real one follows
        return version, status, headers


async def _chunk_size(r: asyncio.StreamReader) -> int:
    size_line = await r.readline()
    return int(size_line.split(b";")[0].strip() or b"x", 16)


async def _read_body(
    r: asyncio.StreamReader, method: str, status: int, headers: Mapping[str, str]
) -> Tuple[bytes, bool]:
    """The whole body of an answer, and whether the connection may be kept
    (False: the body ran to the connection's end)."""
    if method == "HEAD" or status in (204, 304):
        return b"", True
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        total = 0
        while True:
            size = await _chunk_size(r)
            if size == 0:
                while (await r.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                break
            total += size
            if total > _MAX_BODY:
                raise _BadAnswer("answer body too large")
            chunks.append(await r.readexactly(size))
            await r.readexactly(2)
        return b"".join(chunks), True
    if "content-length" in headers:
        n = int(headers["content-length"])
        if not 0 <= n <= _MAX_BODY:
            raise _BadAnswer(f"answer body of {n} bytes")
        return await r.readexactly(n), True
    return await r.read(_MAX_BODY), False


class _Transport:
    def __init__(self, ctx: Optional[ssl.SSLContext], connect_timeout: float, headers: Dict[str, str]) -> None:
        self._ctx = ctx
        self._connect_timeout = connect_timeout
        self._headers = headers
        self._mu = threading.Lock()
        self._idle: Dict[C.Endpoint, List[_Conn]] = {}

    async def _new(self, ep: C.Endpoint) -> _Conn:
        if ep.tls and self._ctx is None:
            raise C.NotSent("https endpoint without a TLS context")
        try:
            r, w = await asyncio.wait_for(
                asyncio.open_connection(
                    ep.host,
                    ep.port,
                    ssl=self._ctx if ep.tls else None,
                    server_hostname=ep.host if ep.tls else None,
                ),
                self._connect_timeout,
            )
        except (OSError, asyncio.TimeoutError, ssl.SSLError) as e:
            raise C.NotSent(str(e) or type(e).__name__) from None
        sock = w.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        return r, w

    def _take(self, ep: C.Endpoint) -> Optional[_Conn]:
        with self._mu:
            idle = self._idle.get(ep)
            while idle:
                r, w = idle.pop()
                if not w.is_closing() and not r.at_eof():
                    return r, w
                w.transport.abort()
        return None

    async def exchange(self, x: C.Exchange) -> C.Reply:
        conn = self._take(x.endpoint) if x.reuse else None
        pooled = conn is not None
        if conn is None:
            conn = await self._new(x.endpoint)
        r, w = conn
        done = False
        try:
            status, headers, body, keep = await asyncio.wait_for(self._roundtrip(r, w, x), x.timeout)
            done = True
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, _BadAnswer) as e:
            if pooled:
                self._drop(x.endpoint)
            raise C.NoAnswer(e, pooled) from None
        finally:
            if not done:
                # Also on cancellation: the node sees the caller leave.
                w.transport.abort()
        reply = (status, headers, body)
        if keep:
            with self._mu:
                idle = self._idle.setdefault(x.endpoint, [])
                if len(idle) < _POOL_PER_NODE:
                    idle.append((r, w))
                    return reply
        w.close()
        return reply

    async def _roundtrip(
        self, r: asyncio.StreamReader, w: asyncio.StreamWriter, x: C.Exchange
    ) -> Tuple[int, Dict[str, str], bytes, bool]:
        await _send(w, x.endpoint, x.method, x.path, x.body, C.headers_for(self._headers, x.endpoint))
        version, status, headers = await _read_head(r)
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        data, whole = await _read_body(r, x.method, status, headers)
        return status, headers, data, keep and whole

    def _drop(self, ep: C.Endpoint) -> None:
        with self._mu:
            conns = self._idle.pop(ep, [])
        for _, w in conns:
            w.transport.abort()

    def close(self) -> None:
        with self._mu:
            conns = [c for cs in self._idle.values() for c in cs]
            self._idle.clear()
        for _, w in conns:
            w.close()


class _Stream:
    """A watch's own connection (never pooled), open while it streams; no
    reference to its :class:`AsyncWatch`, which closes it from a finalizer
    when dropped."""

    def __init__(self, transport: _Transport) -> None:
        self._transport = transport
        self._conn: Optional[_Conn] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._idle = W.WATCH_IDLE
        self._chunked = False
        self._left = 0  # bytes of the current chunk not yet read
        self._shut = False
        self.endpoint: Optional[C.Endpoint] = None

    async def open(self, x: W.OpenStream) -> C.Reply:
        self.close()
        conn = await self._transport._new(x.endpoint)
        if self._shut:
            conn[1].transport.abort()
            raise C.NotSent("the watch was closed")
        self._conn, self._loop = conn, asyncio.get_running_loop()
        r, w = conn
        headers = C.headers_for(self._transport._headers, x.endpoint)
        headers["Accept"] = "text/event-stream"
        try:
            status, headers, data = await asyncio.wait_for(self._head(r, w, x, headers), x.timeout)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, _BadAnswer) as e:
            self.close()
            raise C.NoAnswer(e, False) from None
        if status != 200:
            self.close()
            return status, headers, data
        self._idle = x.idle
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._left = 0
        self.endpoint = x.endpoint
        return status, headers, b""

    async def _head(
        self, r: asyncio.StreamReader, w: asyncio.StreamWriter, x: W.OpenStream, headers: Dict[str, str]
    ) -> C.Reply:
        await _send(w, x.endpoint, "GET", x.path, None, headers)
        _, status, head = await _read_head(r)
        data = b"" if status == 200 else (await _read_body(r, "GET", status, head))[0]
        return status, head, data

    async def read(self) -> bytes:
        if self._conn is None:
            raise C.NoAnswer(ConnectionError("the stream is closed"), False)
        try:
            return await asyncio.wait_for(self._piece(self._conn[0]), self._idle)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
            self.close()
            raise C.NoAnswer(e, False) from None

    async def _piece(self, r: asyncio.StreamReader) -> bytes:
        """The next bytes of the body (``b""`` at its end), with the chunked
        framing taken off."""
        if not self._chunked:
            return await r.read(_READ_MAX)
        if self._left == 0:
            size = await _chunk_size(r)
            if size == 0:
                return b""
            self._left = size
        data = await r.read(min(self._left, _READ_MAX))
        if not data:
            raise asyncio.IncompleteReadError(b"", self._left)
        self._left -= len(data)
        if self._left == 0:
            await r.readexactly(2)  # the CRLF after a chunk
        return data

    def close(self) -> None:
        conn, self._conn, self.endpoint = self._conn, None, None
        if conn is not None:
            conn[1].transport.abort()

    def shut(self) -> None:
        """Close the connection for good (no stream opens after this); from
        a finalizer, on the loop's thread or not."""
        self._shut = True
        loop = self._loop
        if self._conn is None or loop is None:
            return
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is loop:
            self.close()
        elif loop.is_closed():
            try:
                self.close()
            except Exception:
                pass  # the transport closes its socket when it is collected
        else:
            try:
                loop.call_soon_threadsafe(self.close)
            except RuntimeError:
                pass


class AsyncWatch:
    """The changes under a prefix, as :meth:`AsyncClient.watch` returns
    them: an async iterator of :class:`~lockd_client.WatchEvent` and
    :class:`~lockd_client.Progress` that resumes by itself, as
    :class:`lockd_client.Watch` does (the same plan drives both).

    Cancelling a ``__anext__`` (a task cancelled, an ``asyncio.wait_for``
    around it that timed out) closes the stream's connection but not the
    watch: the next ``__anext__`` goes on from the index after the last
    event delivered. Any other exception out of it ends the watch.
    :meth:`aclose` (or the end of an ``async with`` block, or dropping the
    last reference to it) closes its connection.
    """

    def __init__(self, client: "AsyncClient", prefix: str, from_index: Optional[int], idle: float) -> None:
        self.prefix = prefix
        #: The log index of the last event delivered (``None`` before the first).
        self.last_index: Optional[int] = None
        self._plan = W.watch_plan(client._router, client._settings, prefix, from_index, idle)
        self._stream = _Stream(client._transport)
        # Thrown into the plan at the next step: the I/O it waited for was
        # cancelled (None: it goes on as asked).
        self._pending: Optional[BaseException] = None
        self._closed = False
        self._finalize = weakref.finalize(self, self._stream.shut)

    @property
    def endpoint(self) -> Optional[str]:
        """The node whose stream is open now (``None`` between streams)."""
        ep = self._stream.endpoint
        return ep.url if ep is not None else None

    def __aiter__(self) -> "AsyncWatch":
        return self

    def _step(self, reply: Any = None, error: Optional[BaseException] = None) -> Any:
        if self._closed:
            raise StopAsyncIteration
        try:
            return self._plan.throw(error) if error is not None else self._plan.send(reply)
        except StopIteration:
            raise StopAsyncIteration from None

    async def __anext__(self) -> Union[W.WatchEvent, W.Progress]:
        try:
            error, self._pending = self._pending, None
            step = self._step(error=error)
            while True:
                if isinstance(step, (W.WatchEvent, W.Progress)):
                    self.last_index = step.index
                    return step
                if isinstance(step, C.Sleep):
                    await asyncio.sleep(step.seconds)
                    step = self._step()
                    continue
                if isinstance(step, W.CloseStream):
                    self._stream.close()
                    step = self._step()
                    continue
                # Cancelled while it waits: the stream counts as broken.
                self._pending = C.NoAnswer(ConnectionAbortedError("the stream was left while it was read"), False)
                try:
                    if isinstance(step, W.OpenStream):
                        reply: Any = await self._stream.open(step)
                    else:
                        reply = await self._stream.read()
                except (C.NotSent, C.NoAnswer) as e:
                    self._pending = None
                    step = self._step(error=e)
                else:
                    self._pending = None
                    step = self._step(reply)
        except asyncio.CancelledError:
            self._stream.close()
            raise
        except BaseException:
            self._close()
            raise

    def _close(self) -> None:
        self._closed = True
        self._finalize()
        self._plan.close()

    async def aclose(self) -> None:
        """End the watch and close its connection (once)."""
        self._close()

    async def __aenter__(self) -> "AsyncWatch":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else (self.endpoint or "between streams")
        return f"<AsyncWatch {self.prefix!r} last index {self.last_index} {state}>"


class AsyncClient:
    """The asyncio twin of :class:`lockd_client.Client`: the same arguments,
    the same methods as coroutines, the same errors.

    ``async with client.lock(key, lease) as lk`` takes the lock (``lk`` is
    an :class:`AsyncLock`, renewed by a task) and releases it at the end of
    the block; ``lk = await client.lock(...)`` takes it without a block.
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

    async def _run(self, plan: C.Plan) -> Any:
        try:
            step = next(plan)
            while True:
                if isinstance(step, C.Sleep):
                    await asyncio.sleep(step.seconds)
                    step = plan.send(None)
                    continue
                try:
                    reply = await self._transport.exchange(step)
                except (C.NotSent, C.NoAnswer) as e:
                    step = plan.throw(e)
                else:
                    step = plan.send(reply)
        except StopIteration as stop:
            return stop.value
        finally:
            plan.close()

    async def _call(self, op: C.Op) -> Dict[str, Any]:
        return await self._run(C.call_plan(self._router, self._settings, op))

    async def close(self) -> None:
        """Close kept-alive connections (held locks stay held: release them first)."""
        self._transport.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def endpoints(self) -> List[str]:
        return [ep.url for ep in self._router.endpoints]

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
        session: Union["AsyncSession", int, None] = None,
        priority: int = 0,
    ) -> "_PendingLock":
        """Take ``key`` (see :meth:`lockd_client.Client.lock`): use as
        ``async with client.lock(...) as lk`` or ``lk = await client.lock(...)``.
        Bad arguments raise here, before anything is awaited."""
        C.check_key(key)
        C.lease_ms(lease)
        C.wait_seconds(wait)
        C.check_mode(mode)
        C.check_acquire_limit(limit)
        in_session = session if isinstance(session, AsyncSession) else None
        if in_session is not None:
            session, owner, lease = in_session.id, in_session.owner, in_session.ttl
        extra = C.check_extra(reentrant, value, session, priority)
        return _PendingLock(
            self,
            (key, lease, wait, mode, limit, self.owner if owner is None else owner, request_id, extra),
            keepalive and extra.session is None,
            in_session,
        )

    async def _lock(self, args: Tuple[Any, ...], keepalive: bool, session: Optional["AsyncSession"] = None) -> "AsyncLock":
        g = await self._run(C.acquire_plan(self._router, self._settings, *args))
        return AsyncLock(self, g, keepalive, session)

    async def try_lock(self, key: str, lease: float, **options: Any) -> Optional["AsyncLock"]:
        """Take ``key`` if it is free now; ``None`` if it is busy."""
        if "wait" in options:
            raise TypeError("try_lock does not wait: use lock(key, lease, wait=...)")
        try:
            return await self.lock(key, lease, 0, **options)
        except E.Held:
            return None

    async def release(self, key: str, token: int) -> int:
        op = C.release_op(C.check_key(key), C.check_token(token))
        return C.released_count(op, await self._call(op))

    async def keepalive(self, key: str, token: int) -> float:
        op = C.keepalive_op(C.check_key(key), C.check_token(token), None)
        return C.renewed_lease(op, await self._call(op))

    async def get(self, key: str) -> C.LockInfo:
        return C.lock_info(key, await self._call(C.get_op(C.check_key(key))))

    async def holders(self, key: str) -> List[C.Holder]:
        return (await self.get(key)).holders

    async def list(self, prefix: str = "", after: Optional[str] = None, limit: int = 100) -> C.ListPage:
        C.check_text("prefix", prefix)
        if after is not None:
            C.check_text("after", after)
        return C.list_page(await self._call(C.list_op(prefix, after, C.check_limit(limit))))

    async def force_release(self, key: str, token: int) -> None:
        await self._call(C.force_release_op(C.check_key(key), C.check_token(token)))

    async def policy(self) -> List[Dict[str, Any]]:
        return list((await self._call(C.policy_get_op())).get("rules", []))

    async def set_policy(self, rules: Sequence[Mapping[str, Any]]) -> None:
        await self._call(C.policy_put_op([dict(r) for r in rules]))

    def watch(
        self, prefix: str = "", from_index: Optional[int] = None, *, idle_timeout: float = W.WATCH_IDLE
    ) -> AsyncWatch:
        """Follow every change under ``prefix`` from log index
        ``from_index`` (see :meth:`lockd_client.Client.watch`): an
        :class:`AsyncWatch`, used as ``async for event in client.watch(...)``.
        Bad arguments raise here."""
        C.check_text("prefix", prefix)
        return AsyncWatch(self, prefix, W.check_index("from_index", from_index), C.idle_seconds(idle_timeout))

    # ------------------------------------------ sessions and elections

    async def open_session(
        self, ttl: float, *, owner: Optional[str] = None, request_id: Any = C.AUTO, keepalive: bool = True
    ) -> "AsyncSession":
        """Open a session (see :meth:`lockd_client.Client.open_session`),
        renewed by a task unless ``keepalive=False``."""
        ms = C.lease_ms(ttl)
        owner = C.check_text("owner", self.owner if owner is None else owner)
        rid = C.random_id() if request_id is C.AUTO else (None if request_id is None else C.check_text("request_id", request_id))
        sent = time.monotonic()
        sid, got = S.opened(await self._call(S.open_op(ms, owner, rid)))
        return AsyncSession(self, sid, min(got, ms / 1000.0), sent, owner, keepalive)

    async def session_info(self, session: int) -> S.SessionInfo:
        return S.session_info(await self._call(S.get_op(C.check_session(session))))

    async def proclaim(self, key: str, token: int, value: str) -> None:
        await self._call(S.proclaim_op(C.check_key(key), C.check_token(token), C.check_value(value)))

    def campaign(
        self, name: str, value: str, ttl: float, wait: Optional[float] = None, *, priority: int = 0
    ) -> "_PendingLock":
        """Campaign in election ``name`` (see :meth:`lockd_client.Client.campaign`)."""
        return self.lock(name, ttl, wait, value=C.check_value(value), priority=priority)

    async def leader(self, name: str) -> Optional[S.Leader]:
        return S.leader_of(name, await self.list(C.check_key(name), limit=1))

    async def observe(self, name: str, *, idle_timeout: float = W.WATCH_IDLE) -> "AsyncObserve":
        """Follow election ``name`` (see :meth:`lockd_client.Client.observe`):
        ``async for leader in await client.observe(name)``."""
        page = await self.list(C.check_key(name), limit=1)
        if page.index is None:
            raise E.ProtocolError("the node did not say at which index it listed the election")
        watch = self.watch(name, page.index + 1, idle_timeout=idle_timeout)
        return AsyncObserve(watch, S.LeaderFold(name, S.leader_of(name, page)))

    async def status(self, endpoint: Optional[str] = None) -> Dict[str, Any]:
        op = C.Op(method="GET", path="/v1/status", what="status", kind="read", idempotent=True)
        if endpoint is None:
            return await self._call(op)
        router = C.Router([C.parse_endpoint(endpoint, self._endpoints[0].scheme)])
        router.discovery = False
        return await self._run(C.call_plan(router, self._settings, op))


class _PendingLock:
    """What :meth:`AsyncClient.lock` returns: awaitable, and an async context manager."""

    def __init__(
        self, client: AsyncClient, args: Tuple[Any, ...], keepalive: bool, session: Optional["AsyncSession"] = None
    ) -> None:
        self._client = client
        self._args = args
        self._keepalive = keepalive
        self._session = session
        self._lock: Optional[AsyncLock] = None

    def __await__(self) -> Generator[Any, None, "AsyncLock"]:
        return self._client._lock(self._args, self._keepalive, self._session).__await__()

    async def __aenter__(self) -> "AsyncLock":
        self._lock = await self._client._lock(self._args, self._keepalive, self._session)
        return self._lock

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        assert self._lock is not None
        await self._lock.__aexit__(exc_type, exc, tb)


class _Renewal:
    """The lease as this process sees it, renewed by a task that holds no
    reference to the :class:`AsyncLock` (dropping the lock stops it)."""

    def __init__(self, what: str, lease: float, deadline: float, renew: Callable[[float], Awaitable[float]]) -> None:
        # What is renewed, for messages; the call that renews it (given the
        # deadline, past which it must not try) and answers the new lease.
        self.what = what
        self.renew = renew
        self.lease = lease
        self.deadline = deadline
        self.lost = asyncio.Event()
        self.reason: Optional[BaseException] = None
        self.stopped = False

    def lose(self, reason: BaseException) -> None:
        if not self.lost.is_set():
            self.reason = reason
            self.lost.set()

    async def run(self) -> None:
        every = self.lease / 3
        next_at = self.deadline - self.lease + every
        while True:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            now = time.monotonic()
            if now >= self.deadline:
                self.lose(E.LeaseEnded(f"the lease of {self.what} ended before it was renewed"))
                return
            try:
                renewed = await self.renew(self.deadline)
            except E.LockdError as e:
                if self.stopped:
                    return
                if C.is_refusal(e):
                    self.lose(e)
                    return
                if time.monotonic() >= self.deadline:
                    self.lose(E.LeaseEnded(f"the lease of {self.what} ended before it was renewed: {e}"))
                    return
                next_at = time.monotonic() + min(every, 0.05)
                continue
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self.lose(e)
                return
            self.deadline = now + min(renewed, self.lease)
            next_at = now + every


def _start(r: _Renewal, owner: Any) -> "asyncio.Task[None]":
    """Run ``r`` as a task that ends when ``owner`` is dropped."""
    loop = asyncio.get_running_loop()
    task = loop.create_task(r.run(), name=f"lockd-keepalive {r.what}")
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)
    weakref.finalize(owner, _cancel, task, loop)
    return task


def _cancel(task: "asyncio.Task[None]", loop: asyncio.AbstractEventLoop) -> None:
    if not task.done() and not loop.is_closed():
        try:
            loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:
            pass


class _Held:
    """What a held lock and an open session share (see
    :class:`lockd_client.client._Held`), for asyncio."""

    _r: _Renewal

    @property
    def lost_reason(self) -> Optional[BaseException]:
        return self._r.reason

    @property
    def deadline(self) -> float:
        return self._r.deadline

    async def _end(self) -> None:
        raise NotImplementedError

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            await self._end()
        except E.NotHeld as e:
            self._r.lose(e)
        except E.LockdError:
            if exc_type is None:
                raise


class AsyncLock(_Held):
    """A held lock (see :class:`lockd_client.Lock`); ``lost`` is an
    :class:`asyncio.Event`, the keepalive an asyncio task."""

    def __init__(
        self, client: AsyncClient, g: C.Grant, keepalive: bool = True, session: Optional["AsyncSession"] = None
    ) -> None:
        self._client = client
        self.key: str = g.key
        self.token: int = g.token
        self.lease: float = g.lease
        self.mode: str = g.mode
        # None: the server chose it (the mode's default; see lock()).
        self.limit: Optional[int] = g.limit
        self.owner: str = g.owner
        self.request_id: Optional[str] = g.request_id
        self.count: int = g.count
        self.session: Optional[int] = g.session
        self.value: Optional[str] = g.value
        self._released = False
        self._task: Optional["asyncio.Task[None]"] = None
        if session is not None:
            # Its session's lease is its lease: lost when the session is.
            self._r = session._r
        else:
            key, token = g.key, g.token

            async def renew(until: float) -> float:
                op = C.keepalive_op(key, token, until=until)
                return C.renewed_lease(op, await client._call(op))

            self._r = _Renewal(f"{key!r} (token {token})", g.lease, g.deadline, renew)
            if keepalive:
                self._task = _start(self._r, self)
        self.lost: asyncio.Event = self._r.lost

    def valid(self) -> bool:
        return not self.lost.is_set() and time.monotonic() < self._r.deadline

    def _stop(self) -> None:
        if self._task is None:
            return  # a session's holding, or no keepalive: nothing of its own
        self._r.stopped = True
        if not self._task.done():
            self._task.cancel()

    async def release(self) -> int:
        """Stop renewing and release the lock (once; later calls do nothing
        and answer 0); answers what is left (see :meth:`lockd_client.Lock.release`)."""
        if self._released:
            return 0
        self._released = True
        self._stop()
        left = await self._client.release(self.key, self.token)
        self.count = left
        return left

    async def proclaim(self, value: str) -> None:
        """Publish ``value`` with this holding (a leader's new value)."""
        await self._client.proclaim(self.key, self.token, value)
        self.value = value

    async def __aenter__(self) -> "AsyncLock":
        return self

    async def _end(self) -> None:
        await self.release()

    def __repr__(self) -> str:
        state = "lost" if self.lost.is_set() else ("released" if self._released else "held")
        return f"<AsyncLock {self.key!r} token {self.token} lease {self.lease:g}s {state}>"


class AsyncSession(_Held):
    """An open session (see :class:`lockd_client.Session`): ``lost`` is an
    :class:`asyncio.Event`, the keepalive an asyncio task;
    ``async with`` closes it at the end of the block."""

    def __init__(self, client: AsyncClient, sid: int, ttl: float, sent: float, owner: str, keepalive: bool) -> None:
        self._client = client
        self.id: int = sid
        self.ttl: float = ttl
        self.owner: str = owner

        async def renew(until: float) -> float:
            return S.opened(await client._call(S.keepalive_op(sid, until)))[1]

        self._r = _Renewal(f"session {sid}", ttl, sent + ttl, renew)
        self.lost: asyncio.Event = self._r.lost
        self._closed = False
        self._task: Optional["asyncio.Task[None]"] = _start(self._r, self) if keepalive else None

    def valid(self) -> bool:
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
    ) -> "_PendingLock":
        """Hold ``key`` in this session (see :meth:`lockd_client.Session.lock`)."""
        return self._client.lock(
            key, self.ttl, wait, mode=mode, limit=limit, request_id=request_id,
            reentrant=reentrant, value=value, session=self,
        )

    async def keepalive(self) -> float:
        now = time.monotonic()
        ttl = S.opened(await self._client._call(S.keepalive_op(self.id, None)))[1]
        self._r.deadline = max(self._r.deadline, now + min(ttl, self.ttl))
        return ttl

    async def info(self) -> S.SessionInfo:
        return await self._client.session_info(self.id)

    async def close(self) -> None:
        """Stop renewing and close the session: every holding in it is
        released (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        self._r.stopped = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
        await self._client._call(S.close_op(self.id))

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def _end(self) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "lost" if self.lost.is_set() else ("closed" if self._closed else "open")
        return f"<AsyncSession {self.id} ttl {self.ttl:g}s {state}>"


class AsyncObserve:
    """The leaders of one election (see :class:`lockd_client.Observe`), as
    an async iterator."""

    def __init__(self, watch: AsyncWatch, fold: S.LeaderFold) -> None:
        self._watch = watch
        self._fold = fold
        self._first = True

    def __aiter__(self) -> "AsyncObserve":
        return self

    async def __anext__(self) -> Optional[S.Leader]:
        if self._first:
            self._first = False
            return self._fold.current
        while True:
            got = self._fold.apply(await self._watch.__anext__())
            if got is not S.SAME:
                return got

    async def aclose(self) -> None:
        await self._watch.aclose()

    async def __aenter__(self) -> "AsyncObserve":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
