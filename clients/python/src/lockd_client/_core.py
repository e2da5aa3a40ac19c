"""What the blocking and the asyncio client share, with no I/O of its own.

The request logic (which node to ask, what an answer means, what may be
repeated) is written once, as generators that *yield* the I/O they need
(:class:`Exchange`, :class:`Sleep`) and are driven by the blocking client
(``http.client``, threads) or by the asyncio client (asyncio streams). So
both clients retry, follow the leader and report ambiguous outcomes in
exactly the same way.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generator, List, Mapping, Optional, Tuple, Union
from urllib.parse import quote, urlencode, urlsplit

from . import errors as E

VERSION = "0.1.0"
DEFAULT_PORT = 7400
DEFAULT_ENDPOINT = "http://127.0.0.1:7400"

# A "not_leader" answer was refused before anything was proposed, so it
# is safe to send again anywhere. Any other 503 may come after the request
# reached the leader (a follower that lost its forward, a leader that lost
# office while the entry was in flight), so it is ambiguous for a request
# that is not idempotent. The node's error codes are listed in docs/api.md.
NOT_LEADER = "not_leader"

# The exception for each error code a node sends (docs/api.md, "Error
# codes"); a code this client does not know falls back on the HTTP status.
_BY_CODE = {
    "bad_request": E.BadRequest,
    "invalid_key": E.BadRequest,
    "invalid_lease": E.BadRequest,
    "invalid_wait": E.BadRequest,
    "invalid_limit": E.BadRequest,
    "field_too_long": E.BadRequest,
    "body_too_large": E.BadRequest,
    "bad_content_type": E.BadRequest,
    "unauthenticated": E.Unauthenticated,
    "forbidden": E.Forbidden,
    "held": E.Held,
    "not_held": E.NotHeld,
    "wrong_token": E.WrongToken,
    "not_holder": E.Forbidden,
    "unsupported": E.Unsupported,
    "too_many_waiters": E.TooManyRequests,
    "overloaded": E.TooManyRequests,
    "capacity": E.CapacityExceeded,
    "internal": E.ServerError,
    "no_session": E.NoSession,
    "invalid_ttl": E.BadRequest,
    "not_session_holder": E.Forbidden,
    "module_failed": E.ServerError,
}

# The longest single wait one request asks for when the caller waits
# without a bound (the node's own maximum is 600 s by default).
WAIT_CHUNK = 30.0

# The longest value a holding may publish (an election's leader value),
# as the nodes bound it.
MAX_VALUE_CHARS = 1024

# A node that refused a connection is skipped for this long when another
# one may be tried.
DOWN_FOR = 1.0


class _Auto:
    """The default request id: a fresh random one for each acquire."""

    def __repr__(self) -> str:
        return "AUTO"


AUTO: Any = _Auto()


def random_id() -> str:
    """128 random bits from the OS, as hex (as the Rust client's ids)."""
    return os.urandom(16).hex()


# ---------------------------------------------------------------- endpoints


@dataclass(frozen=True)
class Endpoint:
    """One node's HTTP address."""

    scheme: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __str__(self) -> str:
        return self.url


def parse_endpoint(text: str, default_scheme: str) -> Endpoint:
    """``http://host:port``, ``https://host:port`` or ``host:port``."""
    if not isinstance(text, str):
        raise TypeError(f"an endpoint is a string like 'http://127.0.0.1:7401', not {type(text).__name__}")
    raw = text.strip()
    if not raw:
        raise ValueError("an endpoint must not be empty")
    if "://" not in raw:
        raw = f"{default_scheme}://{raw}"
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"endpoint {text!r}: the scheme must be http or https, not {parts.scheme!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"endpoint {text!r}: credentials do not belong in the address (use token=)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"endpoint {text!r}: expected scheme://host:port with no path")
    if not parts.hostname:
        raise ValueError(f"endpoint {text!r} names no host")
    try:
        port = parts.port
    except ValueError as e:
        raise ValueError(f"endpoint {text!r}: {e}") from None
    return Endpoint(parts.scheme, parts.hostname, port or DEFAULT_PORT)


def may_carry_token(ep: Endpoint) -> bool:
    """Whether a bearer token may go to ``ep``: over TLS, or in the clear
    only to a loopback address, where nothing else can read it."""
    if ep.tls or ep.host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(ep.host).is_loopback
    except ValueError:
        return False


def headers_for(headers: Dict[str, str], ep: Endpoint) -> Dict[str, str]:
    """``headers`` as sent to ``ep``: without the token where it may not go
    (a leader named at an address the endpoints did not list)."""
    if "Authorization" in headers and not may_carry_token(ep):
        return {k: v for k, v in headers.items() if k != "Authorization"}
    return dict(headers)


def parse_endpoints(endpoints: Any, default_scheme: str) -> List[Endpoint]:
    if endpoints is None:
        endpoints = [DEFAULT_ENDPOINT.replace("http", default_scheme, 1)]
    if isinstance(endpoints, str):
        endpoints = [e for e in endpoints.split(",") if e.strip()]
    eps: List[Endpoint] = []
    for e in endpoints:
        ep = parse_endpoint(e, default_scheme)
        if ep not in eps:
            eps.append(ep)
    if not eps:
        raise ValueError("no endpoints given")
    return eps


def ssl_context(
    cafile: Optional[str], certfile: Optional[str], keyfile: Optional[str]
) -> Optional[ssl.SSLContext]:
    """The TLS context: the CA to trust (default: the system's) and the
    client certificate, if any. ``None`` when nothing asks for TLS."""
    if keyfile and not certfile:
        raise ValueError("keyfile given without certfile")
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if certfile:
        ctx.load_cert_chain(certfile, keyfile)
    # The node tells HTTP from its other protocols by ALPN.
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class Router:
    """Which node to ask next.

    The node believed to lead (learned from ``/v1/status``: ``leader`` and
    ``members``) is asked first; any node would do, since followers forward
    lock requests to the leader, but asking the leader saves a hop and keeps
    a request's fate tied to one connection. When a node cannot be reached
    the next one is tried (the endpoints given, then members learned from
    status), skipping nodes that refused a connection in the last second.
    """

    def __init__(self, endpoints: List[Endpoint]) -> None:
        self._mu = threading.Lock()
        self._given = list(endpoints)
        self._learned: List[Endpoint] = []
        self._members: Dict[int, Endpoint] = {}
        self._preferred: Optional[Endpoint] = None
        self._next = 0
        self._down: Dict[Endpoint, float] = {}
        # Turned off when status is not allowed for these credentials
        # (a token with lock rights only): then the client relies on the
        # nodes forwarding to the leader.
        self.discovery = True

    @property
    def endpoints(self) -> List[Endpoint]:
        with self._mu:
            return self._given + self._learned

    def _candidates(self) -> List[Endpoint]:
        return self._given + self._learned

    def pick(self) -> Endpoint:
        with self._mu:
            if self._preferred is not None:
                return self._preferred
            cands = self._candidates()
            now = time.monotonic()
            for i in range(len(cands)):
                ep = cands[(self._next + i) % len(cands)]
                if now - self._down.get(ep, -math.inf) >= DOWN_FOR:
                    self._next = (self._next + i) % len(cands)
                    return ep
            return cands[self._next % len(cands)]

    def needs_discovery(self) -> bool:
        with self._mu:
            return self.discovery and self._preferred is None

    def failed(self, ep: Endpoint, down: bool) -> None:
        """``ep`` did not serve a request; ``down``: it could not be reached."""
        with self._mu:
            if self._preferred == ep:
                self._preferred = None
            cands = self._candidates()
            if ep in cands and cands[self._next % len(cands)] == ep:
                self._next = (self._next + 1) % len(cands)
            if down:
                self._down[ep] = time.monotonic()

    def succeeded(self, ep: Endpoint) -> None:
        with self._mu:
            self._down.pop(ep, None)
            if self._preferred is None and not self.discovery:
                self._preferred = ep

    def learn(self, via: Endpoint, status: Mapping[str, Any]) -> None:
        """Members and leader from a node's status (answered by ``via``)."""
        members = status.get("members")
        leader = status.get("leader")
        with self._mu:
            if isinstance(members, list):
                for m in members:
                    if not isinstance(m, dict):
                        continue
                    mid, addr = m.get("id"), m.get("addr")
                    if not isinstance(mid, int) or not isinstance(addr, str):
                        continue
                    try:
                        ep = parse_endpoint(addr, via.scheme)
                    except ValueError:
                        continue
                    ep = Endpoint(via.scheme, ep.host, ep.port)
                    self._members[mid] = ep
                    if ep not in self._given and ep not in self._learned:
                        self._learned.append(ep)
            if isinstance(leader, int) and leader in self._members:
                self._prefer(self._members[leader])

    def _prefer(self, ep: Endpoint) -> bool:
        if time.monotonic() - self._down.get(ep, -math.inf) < DOWN_FOR:
            return False
        changed = self._preferred != ep
        self._preferred = ep
        return changed

    def hint(self, leader: Any) -> bool:
        """A node named ``leader`` as the leader: go there next (True if that
        is a different node than before)."""
        with self._mu:
            if isinstance(leader, int) and leader in self._members:
                return self._prefer(self._members[leader])
            return False


# --------------------------------------------------------------- arguments


def check_key(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"a lock key is a str, not {type(key).__name__}")
    if not key:
        raise ValueError("a lock key must not be empty")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"lock key {key!r} is not valid UTF-8: {e.reason}") from None
    return key


def _seconds(name: str, value: Any, allow_zero: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} is a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, not {value}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'at least' if allow_zero else 'above'} 0 s, not {value}")
    return float(value)


def lease_ms(lease: Any) -> int:
    s = _seconds("lease", lease, allow_zero=False)
    ms = int(round(s * 1000))
    if ms < 1:
        raise ValueError(f"lease {lease} s is under the 1 ms a lease can be")
    return ms


def wait_seconds(wait: Any) -> Optional[float]:
    if wait is None:
        return None
    return _seconds("wait", wait, allow_zero=True)


def idle_seconds(idle: Any) -> float:
    return _seconds("idle_timeout", idle, allow_zero=False)


def check_mode(mode: Any) -> str:
    if mode not in ("exclusive", "shared"):
        raise ValueError(f"mode must be 'exclusive' or 'shared', not {mode!r}")
    return str(mode)


def check_acquire_limit(limit: Any) -> Optional[int]:
    """An acquire's ``limit``: ``None`` leaves it to the server (exclusive:
    1; shared: the key's readers' limit, else 1024 or the prefix policy's
    max-holders)."""
    return None if limit is None else check_limit(limit)


def check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit is an int, not {type(limit).__name__}")
    if not 1 <= limit <= 0xFFFFFFFF:
        raise ValueError(f"limit must be from 1 to {0xFFFFFFFF}, not {limit}")
    return limit


def check_token(token: Any) -> int:
    if isinstance(token, bool) or not isinstance(token, int):
        raise TypeError(f"a fencing token is an int, not {type(token).__name__}")
    if not 0 <= token < 2**64:
        raise ValueError(f"a fencing token is from 0 to 2**64-1, not {token}")
    return token


def check_text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} is a str, not {type(value).__name__}")
    return value


def lock_path(key: str, action: Optional[str] = None) -> str:
    """The key in a lock route's path: segment by segment, or, when a
    segment is empty, ``.`` or ``..`` (which the node refuses in a path:
    proxies rewrite them), as one segment with its slashes encoded."""
    plain = not any(seg in ("", ".", "..") for seg in key.split("/"))
    path = "/v1/locks/" + quote(key, safe="/" if plain else "")
    return f"{path}/{action}" if action else path


# --------------------------------------------------------------- requests


@dataclass
class Op:
    """One logical request.

    ``idempotent``: repeating it after an answer that never came is safe
    (reads, keepalive, an acquire that carries a request id). ``body`` is
    called before every attempt with the time left of the acquire's wait.
    ``until``: no attempt is made, and none may last, past this monotonic
    time (a keepalive is pointless once the lease is over).
    """

    method: str
    path: str
    what: str
    kind: str  # acquire | release | keepalive | read | admin
    idempotent: bool
    body: Optional[Callable[[float], Any]] = None
    wait: float = 0.0
    until: Optional[float] = None


@dataclass
class Exchange:
    """I/O asked for by a plan: one HTTP request to one node.

    The driver sends it back as ``(status, headers, body bytes)`` or throws
    :class:`NotSent` / :class:`NoAnswer` into the plan.
    """

    endpoint: Endpoint
    method: str
    path: str
    body: Optional[bytes]
    timeout: float
    reuse: bool


@dataclass
class Sleep:
    seconds: float


class NotSent(Exception):
    """The request certainly did not reach the node (no connection)."""


class NoAnswer(Exception):
    """The request was (or may have been) sent, and no whole answer came."""

    def __init__(self, cause: BaseException, pooled: bool) -> None:
        super().__init__(str(cause) or type(cause).__name__)
        self.pooled = pooled


Reply = Tuple[int, Dict[str, str], bytes]
Plan = Generator[Union[Exchange, Sleep], Any, Any]


@dataclass
class Settings:
    timeout: float
    connect_timeout: float
    retry_for: float


@dataclass
class Config:
    """A client's checked arguments."""

    endpoints: List[Endpoint]
    settings: Settings
    ctx: Optional[ssl.SSLContext]
    headers: Dict[str, str]
    owner: str


def configure(
    endpoints: Any,
    token: Optional[str],
    cafile: Optional[str],
    certfile: Optional[str],
    keyfile: Optional[str],
    timeout: Any,
    connect_timeout: Any,
    retry_for: Any,
    owner: Optional[str],
) -> Config:
    tls = bool(cafile or certfile)
    eps = parse_endpoints(endpoints, "https" if tls else "http")
    ctx = ssl_context(cafile, certfile, keyfile) if tls or any(ep.tls for ep in eps) else None
    settings = Settings(
        timeout=_seconds("timeout", timeout, allow_zero=False),
        connect_timeout=_seconds("connect_timeout", connect_timeout, allow_zero=False),
        retry_for=_seconds("retry_for", retry_for, allow_zero=True),
    )
    headers = {"Accept": "application/json", "User-Agent": f"lockd-client-python/{VERSION}"}
    if token is not None:
        check_text("token", token)
        if not token.strip() or any(c in token for c in "\r\n"):
            raise ValueError("token must be one non-empty line")
        clear = [str(ep) for ep in eps if not may_carry_token(ep)]
        if clear:
            raise ValueError(
                "a token is sent only over TLS (https://, cafile=) or to a loopback address, "
                f"not in the clear to {', '.join(clear)}"
            )
        headers["Authorization"] = f"Bearer {token.strip()}"
    owner = check_text("owner", owner) if owner is not None else f"py-{random_id()}"
    return Config(eps, settings, ctx, headers, owner)


def _json(data: bytes) -> Any:
    if not data:
        return {}
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return {"error": data.decode("utf-8", "replace").strip()}


def _retry_after(headers: Mapping[str, str]) -> Optional[float]:
    v = headers.get("retry-after")
    if v is None:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        return None


def error_of(op: Op, ep: Endpoint, status: int, headers: Mapping[str, str], data: Any) -> E.LockdError:
    """The exception for a refusal (a status that is not 2xx or 503)."""
    body = data if isinstance(data, dict) else {}
    msg = body.get("error")
    if not isinstance(msg, str) or not msg:
        msg = f"{op.what}: HTTP {status}"
    kw = dict(status=status, body=body, endpoint=ep.url)
    by_code = _BY_CODE.get(body.get("code"))  # type: ignore[arg-type]
    if by_code is E.TooManyRequests:
        return E.TooManyRequests(msg, retry_after=_retry_after(headers), **kw)
    if by_code is not None:
        return by_code(msg, **kw)
    if status in (400, 413):
        return E.BadRequest(msg, **kw)
    if status == 401:
        return E.Unauthenticated(msg, **kw)
    if status == 403:
        return E.Forbidden(msg, **kw)
    if status == 404 and op.kind in ("release", "keepalive"):
        return E.NotHeld(msg, **kw)
    if status == 409 and op.kind in ("release", "keepalive"):
        return E.WrongToken(msg, **kw)
    if status == 409 and op.kind == "acquire":
        return E.Held(msg, **kw)
    if status == 422:
        return E.Unsupported(msg, **kw)
    if status == 429:
        return E.TooManyRequests(msg, retry_after=_retry_after(headers), **kw)
    if status == 507:
        return E.CapacityExceeded(msg, **kw)
    if status == 404:
        return E.LockdError(msg, **kw)
    if 400 <= status < 500:
        return E.LockdError(msg, **kw)
    return E.ServerError(msg, **kw)


def call_plan(router: Router, s: Settings, op: Op) -> Plan:
    """Send ``op`` to the leader, retrying where that is safe; returns the
    JSON body of the answer.

    Retried, whatever the request: no connection could be made (nothing
    was sent), "not the leader" (refused before anything was proposed), a
    503 with ``Retry-After`` (a bound reached before the request was let
    in). Retried only when the request is idempotent: the connection broke
    or timed out after the request was sent, or any other 503 (the node
    may have passed it on to a leader that then failed); for any other
    request that is :class:`OutcomeUnknown`. Every other answer is final.
    Gives up with :class:`Unavailable` after ``retry_for``, or at
    ``op.until``. An acquire's wait extends that by the time nodes held its
    attempts (up to the wait): a wait interrupted by a leader change goes
    on with ``retry_for`` to spare, as the Rust client's ``retry_for`` plus
    the wait, but a cluster that is not there at all is reported after
    ``retry_for``, not after the wait too.
    """
    start = time.monotonic()
    held = 0.0  # time nodes held this request's attempts

    def deadline() -> float:
        d = start + s.retry_for + min(op.wait, held)
        return d if op.until is None else min(d, op.until)

    wait_until = start + op.wait
    attempt = 0
    unreachable = 0  # nodes in a row that could not be reached
    last = "nothing answered"
    tried: List[str] = []
    while True:
        now = time.monotonic()
        if now >= deadline():
            break
        if router.needs_discovery():
            failure = yield from _discover(router, s, deadline())
            if failure is not None:
                url, last = failure
                if url not in tried:
                    tried.append(url)
        ep = router.pick()
        now = time.monotonic()
        wait_left = max(0.0, wait_until - now)
        body = op.body(wait_left) if op.body is not None else None
        timeout = s.timeout + wait_left
        if op.until is not None:
            timeout = min(timeout, op.until - now)
        if timeout <= 0:
            break
        payload = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        if ep.url not in tried:
            tried.append(ep.url)
        delay: Optional[float] = None
        sent = time.monotonic()
        try:
            status, headers, raw = yield Exchange(ep, op.method, op.path, payload, timeout, op.idempotent)
        except NotSent as e:
            router.failed(ep, down=True)
            last = f"{ep.url}: {e}"
            unreachable += 1
            # The next node at once; a pause only after trying them all.
            if unreachable % len(router.endpoints):
                delay = 0.0
        except NoAnswer as e:
            unreachable = 0
            held += time.monotonic() - sent
            router.failed(ep, down=False)
            if not op.idempotent:
                raise E.OutcomeUnknown(
                    f"{op.what}: sent to {ep.url}, but no answer came ({e}); it may or may not have taken effect",
                    endpoint=ep.url,
                ) from None
            last = f"{ep.url}: no answer ({e})"
            if e.pooled:
                delay = 0.0  # a kept-alive connection the node had closed
        else:
            unreachable = 0
            held += time.monotonic() - sent
            data = _json(raw)
            if 200 <= status < 300:
                router.succeeded(ep)
                if not isinstance(data, dict):
                    raise E.ProtocolError(f"{op.what}: expected a JSON object, got {raw[:200]!r}", status=status, endpoint=ep.url)
                return data
            if status != 503:
                raise error_of(op, ep, status, headers, data)
            body_d = data if isinstance(data, dict) else {}
            msg = str(body_d.get("error") or f"HTTP {status}")
            leader = body_d.get("leader")
            retry_after = _retry_after(headers)
            safe = body_d.get("code") == NOT_LEADER or retry_after is not None
            if not safe and not op.idempotent:
                raise E.OutcomeUnknown(
                    f"{op.what}: {msg}; it may or may not have taken effect",
                    status=status,
                    body=body_d,
                    endpoint=ep.url,
                )
            last = f"{ep.url}: {msg}"
            if router.hint(leader):
                delay = 0.0
            else:
                router.failed(ep, down=False)
            if retry_after is not None:
                delay = min(retry_after, 1.0)
        attempt += 1
        if delay is None:
            # Short steps: an election takes well under a second here, and
            # the client should notice the new leader soon after it exists.
            delay = min(0.01 * attempt, 0.1)
        delay = min(delay, deadline() - time.monotonic())
        if delay > 0:
            yield Sleep(delay)
    raise E.Unavailable(
        f"{op.what}: no node served it within {time.monotonic() - start:.1f} s "
        f"(tried {', '.join(tried) or 'nothing'}); last error: {last}"
    )


def _discover(router: Router, s: Settings, deadline: float) -> Plan:
    """Ask one node for its status, to learn the leader and the members;
    returns (node, error) when it could not be asked."""
    ep = router.pick()
    # Short: it only saves a hop, and must not eat the request's own time
    # (a follower's status can stall behind its apply, e.g. of an upgrade).
    timeout = min(s.connect_timeout, s.timeout, 1.0, max(0.001, (deadline - time.monotonic()) / 2))
    try:
        status, _, raw = yield Exchange(ep, "GET", "/v1/status", None, timeout, True)
    except NotSent as e:
        router.failed(ep, down=True)
        return ep.url, f"{ep.url}: {e}"
    except NoAnswer as e:
        router.failed(ep, down=False)
        return ep.url, f"{ep.url}: no answer ({e})"
    if status in (401, 403):
        # These credentials may lock but not read status: rely on forwarding.
        router.discovery = False
        return None
    if status == 200:
        data = _json(raw)
        if isinstance(data, dict):
            router.learn(ep, data)
    return None


# ---------------------------------------------------------------- answers


@dataclass(frozen=True)
class Holder:
    """One holding of a key. ``token`` is ``None`` when the node does not
    show it to this caller (another principal's holding); ``principal`` and
    ``owner`` are ``None`` when the holder was not recorded (a holding from
    a world-0.1 module)."""

    token: Optional[int]
    lease: float
    mode: str
    limit: int
    principal: Optional[str]
    owner: Optional[str]
    request_id: str = ""
    #: Seconds left of the lease on the leader's clock when it answered
    #: (``None`` when the leader has not timed it yet: a grant committed an
    #: instant before, or a holding a new leader has not loaded).
    lease_left: Optional[float] = None
    #: Times its holder entered it (1 unless reentrant).
    count: int = 1
    #: The session it lives in (``None``: on a lease of its own).
    session: Optional[int] = None
    #: The value it published (``None``: none), e.g. an election's leader's.
    value: Optional[str] = None


@dataclass(frozen=True)
class LockInfo:
    """A key as ``GET /v1/locks/{key}`` reports it (read linearizably)."""

    key: str
    held: bool
    token: Optional[int]
    lease: Optional[float]
    holders: List[Holder] = field(default_factory=list)


@dataclass(frozen=True)
class ListPage:
    """One page of held keys; ``next`` is the ``after`` of the next page.
    ``index`` is the log index the page was read at (``None`` from a node
    that does not say): a watch from ``index + 1`` misses no change after
    it (docs/watch.md)."""

    locks: List[LockInfo]
    next: Optional[str]
    index: Optional[int] = None


def _holder(h: Any) -> Holder:
    if not isinstance(h, dict):
        raise E.ProtocolError(f"a holder is a JSON object, not {h!r}")
    who = h.get("holder")
    return Holder(
        token=h.get("token"),
        lease=float(h.get("lease_ms", 0)) / 1000.0,
        mode=str(h.get("mode", "exclusive")),
        limit=int(h.get("limit", 1)),
        principal=who.get("principal") if isinstance(who, dict) else None,
        owner=who.get("owner") if isinstance(who, dict) else None,
        request_id=str(h.get("request_id", "")),
        lease_left=float(h["lease_left_ms"]) / 1000.0 if isinstance(h.get("lease_left_ms"), (int, float)) else None,
        count=int(h.get("count", 1)),
        session=h["session"] if isinstance(h.get("session"), int) and h["session"] > 0 else None,
        value=h["value"] if isinstance(h.get("value"), str) else None,
    )


def lock_info(key: str, data: Mapping[str, Any]) -> LockInfo:
    holders = [_holder(h) for h in data.get("holders", [])]
    lease = data.get("lease_ms")
    return LockInfo(
        key=key,
        held=bool(data.get("held", bool(holders))),
        token=data.get("token"),
        lease=float(lease) / 1000.0 if isinstance(lease, (int, float)) else None,
        holders=holders,
    )


def list_page(data: Mapping[str, Any]) -> ListPage:
    locks = []
    for k in data.get("locks", []):
        holders = [_holder(h) for h in k.get("holders", [])]
        first = holders[0] if holders else None
        locks.append(
            LockInfo(
                key=str(k.get("key")),
                held=bool(holders),
                token=first.token if first else None,
                lease=first.lease if first else None,
                holders=holders,
            )
        )
    nxt = data.get("next")
    index = data.get("index")
    return ListPage(
        locks=locks,
        next=nxt if isinstance(nxt, str) else None,
        index=index if isinstance(index, int) and not isinstance(index, bool) else None,
    )


# ---------------------------------------------------------------- locking


@dataclass
class Grant:
    """What an acquire got: the token, the lease believed (seconds) and the
    local deadline (monotonic), counted from before a request was sent."""

    key: str
    token: int
    lease: float
    deadline: float
    mode: str
    # None: the server's default for the mode (not given).
    limit: Optional[int]
    owner: str
    request_id: Optional[str]
    #: Times this holder holds it now (above 1: a reentrant acquire entered
    #: again, with the same token).
    count: int = 1
    #: The session it lives in (``None``: on a lease of its own).
    session: Optional[int] = None
    #: The value published with it.
    value: Optional[str] = None


@dataclass(frozen=True)
class Extra:
    """World 0.3's options of an acquire (docs/sessions.md)."""

    reentrant: bool = False
    value: Optional[str] = None
    session: Optional[int] = None
    #: A priority among the key's waiters (world 0.4's election policy).
    priority: int = 0


NO_EXTRA = Extra()

#: The largest priority (the server's is a 32-bit unsigned integer).
MAX_PRIORITY = 2**32 - 1


def check_extra(reentrant: Any, value: Any, session: Any, priority: Any = 0) -> Extra:
    if not isinstance(reentrant, bool):
        raise TypeError(f"reentrant is a bool, not {reentrant!r}")
    if value is not None:
        value = check_value(value)
    if session is not None:
        session = check_session(session)
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= MAX_PRIORITY:
        raise ValueError(f"a priority is an integer from 0 to {MAX_PRIORITY}, not {priority!r}")
    return Extra(reentrant=reentrant, value=value, session=session, priority=priority)


def check_value(value: Any) -> str:
    """A holding's value: text of at most :data:`MAX_VALUE_CHARS` characters."""
    value = check_text("value", value)
    if len(value) > MAX_VALUE_CHARS:
        raise ValueError(f"value is at most {MAX_VALUE_CHARS} characters")
    return value


def check_session(session: Any) -> int:
    if isinstance(session, bool) or not isinstance(session, int) or session < 1:
        raise ValueError(f"a session id is a positive integer, not {session!r}")
    return session


def acquire_op(
    key: str,
    lease_ms_: int,
    mode: str,
    limit: Optional[int],
    owner: str,
    request_id: Optional[str],
    wait: float,
    extra: Extra = NO_EXTRA,
) -> Op:
    def body(wait_left: float) -> Dict[str, Any]:
        b: Dict[str, Any] = {"lease_ms": lease_ms_, "wait_ms": int(wait_left * 1000)}
        # Only what was asked for, so a plain exclusive lock is the seed's
        # request and works on every module.
        if mode != "exclusive":
            b["mode"] = mode
        if limit is not None:
            b["limit"] = limit
        if owner:
            b["owner"] = owner
        if request_id is not None:
            # In the body, not as an Idempotency-Key header: a follower
            # forwards the body to the leader, but not that header.
            b["request_id"] = request_id
        if extra.reentrant:
            b["reentrant"] = True
        if extra.value is not None:
            b["value"] = extra.value
        if extra.session is not None:
            b["session"] = extra.session
        if extra.priority:
            b["priority"] = extra.priority
        return b

    return Op(
        method="POST",
        path=lock_path(key, "acquire"),
        what=f"acquire {key!r}",
        kind="acquire",
        # With a request id the node answers a repeat with the grant that
        # committed (world 0.2), so the acquire is retried like a read.
        idempotent=request_id is not None,
        body=body,
        wait=wait,
    )


def keepalive_op(key: str, token: int, until: Optional[float]) -> Op:
    return Op(
        method="POST",
        path=lock_path(key, "keepalive"),
        what=f"keepalive {key!r} token {token}",
        kind="keepalive",
        idempotent=True,
        body=lambda _: {"token": token},
        until=until,
    )


def release_op(key: str, token: int) -> Op:
    return Op(
        method="POST",
        path=lock_path(key, "release"),
        what=f"release {key!r} token {token}",
        kind="release",
        # A repeat after a lost answer would say "not held" for a release
        # that worked: the caller is told the outcome is unknown instead.
        idempotent=False,
        body=lambda _: {"token": token},
    )


def force_release_op(key: str, token: int) -> Op:
    return Op(
        method="DELETE",
        path=lock_path(key) + f"/holders/{token}",
        what=f"force release {key!r} token {token}",
        kind="release",
        idempotent=False,
    )


def get_op(key: str) -> Op:
    return Op(method="GET", path=lock_path(key), what=f"get {key!r}", kind="read", idempotent=True)


def list_op(prefix: str, after: Optional[str], limit: int) -> Op:
    q: Dict[str, Any] = {"prefix": prefix, "limit": limit}
    if after is not None:
        q["after"] = after
    return Op(method="GET", path="/v1/locks?" + urlencode(q), what=f"list {prefix!r}", kind="read", idempotent=True)


def policy_get_op() -> Op:
    return Op(method="GET", path="/v1/admin/policy", what="get policy", kind="read", idempotent=True)


def policy_put_op(rules: Any) -> Op:
    return Op(
        method="PUT",
        path="/v1/admin/policy",
        what="set policy",
        kind="admin",
        # It replaces the whole policy: doing it twice is doing it once.
        idempotent=True,
        body=lambda _: {"rules": rules},
    )


def granted(key: str, asked_ms: int, sent: float, data: Mapping[str, Any], **info: Any) -> Grant:
    """The grant of an acquire's answer (the request sent at ``sent``).

    The lease believed is the smaller of the one asked for and the one
    granted (a module's policy may shorten it, never lengthen it), and the
    local deadline counts from before the request was sent, so it never
    outlasts the lease the leader keeps.
    """
    token, got_ms = data.get("token"), data.get("lease_ms")
    if not isinstance(token, int) or not isinstance(got_ms, int):
        raise E.ProtocolError(f"acquire {key!r}: expected token and lease_ms, got {dict(data)!r}")
    ms = min(asked_ms, got_ms)
    if ms <= 0:
        raise E.ProtocolError(f"acquire {key!r}: granted token {token} with a lease of {got_ms} ms")
    lease = ms / 1000.0
    count = data.get("count", 1)
    if not isinstance(count, int) or count < 1:
        raise E.ProtocolError(f"acquire {key!r}: granted token {token} with a count of {count!r}")
    return Grant(key=key, token=token, lease=lease, deadline=sent + lease, count=count, **info)


def released_count(op: Op, data: Mapping[str, Any]) -> int:
    """What is left of a holding after a release: 0 when it ended, more
    for a reentrant holding entered several times (a node that does not
    say ended it)."""
    n = data.get("count", 0)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise E.ProtocolError(f"{op.what}: answered a count of {n!r}")
    return n


def renewed_lease(op: Op, data: Mapping[str, Any]) -> float:
    ms = data.get("lease_ms")
    if not isinstance(ms, int) or ms <= 0:
        raise E.ProtocolError(f"{op.what}: answered a lease of {ms!r} ms")
    return ms / 1000.0


def acquire_plan(
    router: Router,
    s: Settings,
    key: str,
    lease: Any,
    wait: Any,
    mode: str,
    limit: Optional[int],
    owner: str,
    request_id: Any,
    extra: Extra = NO_EXTRA,
) -> Plan:
    """Acquire ``key``; returns a :class:`Grant`, or raises :class:`Held`
    (``wait`` was 0) / :class:`Timeout` (still held after ``wait``).

    ``wait=None`` waits without a bound, one request of at most
    ``WAIT_CHUNK`` seconds after another. After a long wait the local
    deadline (counted from before the request) is mostly spent although
    the lease only began at the grant, so the lease is renewed once at
    once to start the deadline afresh.
    """
    key = check_key(key)
    ms = lease_ms(lease)
    wait_s = wait_seconds(wait)
    mode = check_mode(mode)
    limit = check_acquire_limit(limit)
    owner = check_text("owner", owner)
    if request_id is AUTO:
        request_id = random_id()
    elif request_id is not None:
        request_id = check_text("request_id", request_id)
        if not request_id:
            raise ValueError("request_id must not be empty (None sends none)")
    forever = wait_s is None
    while True:
        # Without a bound: one request of WAIT_CHUNK after another.
        op = acquire_op(key, ms, mode, limit, owner, request_id, WAIT_CHUNK if forever else wait_s, extra)
        sent = time.monotonic()
        try:
            data = yield from call_plan(router, s, op)
        except E.Held as e:
            if forever:
                continue
            if wait_s:
                raise E.Timeout(
                    f"{e.message} (still held after waiting {wait_s:g} s)",
                    status=e.status,
                    body=e.body,
                    endpoint=e.endpoint,
                ) from None
            raise
        g = granted(
            key, ms, sent, data, mode=mode, limit=limit, owner=owner, request_id=request_id,
            session=extra.session, value=extra.value,
        )
        break
    if time.monotonic() - sent > g.lease / 3:
        renew_sent = time.monotonic()
        op = keepalive_op(key, g.token, until=renew_sent + g.lease)
        try:
            data = yield from call_plan(router, s, op)
        except E.NotHeld as e:
            raise E.NotHeld(
                f"{key!r} was granted (token {g.token}) but its lease ended before the answer could be used: {e.message}",
                status=e.status,
                body=e.body,
                endpoint=e.endpoint,
            ) from None
        g.deadline = renew_sent + min(renewed_lease(op, data), g.lease)
    return g


def is_refusal(e: BaseException) -> bool:
    """A keepalive answered with a refusal (4xx): renewing will not work."""
    return isinstance(e, E.LockdError) and e.status is not None and 400 <= e.status < 500


__all__ = ["AUTO", "Holder", "LockInfo", "ListPage"]
