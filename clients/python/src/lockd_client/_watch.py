"""The watch, with no I/O of its own: the Server-Sent Events parser, the
events a watch yields, and the plan that opens a stream on a node,
reads it and resumes on another node from the last index delivered
(driven, like every plan of :mod:`._core`, by the blocking or the
asyncio client)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Dict, Generator, List, Optional, Union
from urllib.parse import urlencode

from . import errors as E
from ._core import Endpoint, NoAnswer, NotSent, Op, Router, Settings, Sleep, _json, error_of

#: How long a watch stream may stay silent before it is taken for broken
#: and resumed elsewhere. A node sends a progress after 5 s without
#: changes, so this is six of those.
WATCH_IDLE = 30.0

# The longest line a watch stream may send (a message is a log entry's
# changes under the prefix: far less).
_MAX_LINE = 16 * 1024 * 1024

_EOL = re.compile(rb"\r\n?|\n")


@dataclass(frozen=True)
class SSEMessage:
    """One Server-Sent Events message: ``event`` (``"message"`` when it
    names none), ``data`` (its data lines joined by newlines) and ``id``
    (its own ``id`` field; ``None`` without one)."""

    event: str
    data: str
    id: Optional[str] = None


class SSEParser:
    """Server-Sent Events, read as the HTML standard reads them; fed the
    bytes of a stream as they come, in pieces of any size.

    Lines end with CRLF, LF or CR (a CRLF split between two pieces is one
    line end). A line that starts with ``:`` is a comment. ``data`` lines
    add up, joined by newlines; a blank line ends a message, and a message
    without a ``data`` line is none. One space after the colon is dropped;
    fields other than ``event``, ``data`` and ``id`` (``retry`` among them)
    are ignored; so is a byte order mark at the start. A message the stream
    ends in the middle of is never returned. Bytes that are not UTF-8 read
    as U+FFFD.

    The one parser of a watch stream, for the blocking and the asyncio
    client alike.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._skip_lf = False  # the last piece ended with a CR
        self._first = True
        self._event = ""
        self._data: List[str] = []
        self._id: Optional[str] = None

    def feed(self, piece: bytes) -> List[SSEMessage]:
        """The messages ``piece`` completes, in order."""
        out: List[SSEMessage] = []
        if self._skip_lf and piece:
            self._skip_lf = False
            if piece[:1] == b"\n":
                piece = piece[1:]
        buf = self._buf
        buf += piece
        start = 0
        while True:
            m = _EOL.search(buf, start)
            if m is None:
                break
            line = bytes(buf[start : m.start()])
            start = m.end()
            if start == len(buf) and m.end() - m.start() == 1 and buf[m.start()] == 0x0D:
                self._skip_lf = True  # an LF may begin the next piece
            msg = self._line(line)
            if msg is not None:
                out.append(msg)
        del buf[:start]
        if len(buf) > _MAX_LINE:
            raise E.ProtocolError(f"a Server-Sent Events line of more than {_MAX_LINE} bytes")
        return out

    def _line(self, raw: bytes) -> Optional[SSEMessage]:
        line = raw.decode("utf-8", "replace")
        if self._first:
            self._first = False
            if line.startswith("\ufeff"):
                line = line[1:]
        if not line:
            data, event, id_ = self._data, self._event, self._id
            self._data, self._event, self._id = [], "", None
            if not data:
                return None
            return SSEMessage(event or "message", "\n".join(data), id_)
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None


@dataclass(frozen=True)
class Change:
    """One change of a holding, as a watch reports it.

    ``type``: ``"granted"`` (a new holding), ``"released"`` (by its holder,
    an admin's force release, or its caller leaving while it waited) or
    ``"expired"``. ``token`` is ``None`` on a grant of another principal's
    (shown only to the holding's own principal and to admins, as
    :meth:`~lockd_client.Client.get` shows it); a release or expiry always
    shows it. ``lease_ms``, ``mode``, ``limit``, ``principal`` and
    ``owner`` are a grant's (``None`` on a release or an expiry).
    """

    type: str
    key: str
    token: Optional[int]
    lease_ms: Optional[int] = None
    mode: Optional[str] = None
    limit: Optional[int] = None
    principal: Optional[str] = None
    owner: Optional[str] = None
    value: Optional[str] = None

    @property
    def lease(self) -> Optional[float]:
        """``lease_ms`` in seconds (as :attr:`Holder.lease`)."""
        return None if self.lease_ms is None else self.lease_ms / 1000.0


@dataclass(frozen=True)
class WatchEvent:
    """One log entry's changes under the watched prefix, in the order the
    entry made them; ``index`` is the entry's log index."""

    index: int
    changes: List[Change]


@dataclass(frozen=True)
class Progress:
    """Everything under the prefix up to log index ``index`` has been
    delivered: the first event of a stream (when no change comes first),
    and one after 5 s without changes."""

    index: int


@dataclass
class OpenStream:
    """I/O asked for by a watch plan: ``GET path`` on ``endpoint``, its
    answer's head within ``timeout``.

    The driver sends back ``(status, headers, body)``. A 200 stays open as
    the plan's stream (body ``b""``), read by :class:`ReadStream` with
    ``idle`` as the read timeout; any other answer is read whole and its
    connection closed. Throws :class:`NotSent` / :class:`NoAnswer`.
    """

    endpoint: Endpoint
    path: str
    timeout: float
    idle: float


@dataclass
class ReadStream:
    """The next bytes of the open stream (``b""`` at its end), or
    :class:`NoAnswer` thrown in when it broke or stayed silent for
    ``idle``."""


@dataclass
class CloseStream:
    """Close the open stream. (The driver also closes it when the plan
    ends, is closed, or its caller stops waiting for a read.)"""


WatchStep = Union[OpenStream, ReadStream, CloseStream, Sleep, WatchEvent, Progress]
WatchPlan = Generator[WatchStep, Any, None]


def check_index(name: str, value: Any) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} is a log index (int), not {type(value).__name__}")
    if not 0 <= value < 2**64:
        raise ValueError(f"{name} is a log index from 0 to 2**64-1, not {value}")
    return value


def watch_path(prefix: str, from_index: Optional[int]) -> str:
    q: Dict[str, Any] = {"prefix": prefix}
    if from_index is not None:
        q["from"] = from_index
    return "/v1/watch?" + urlencode(q)


def _opt(v: Any, kind: type) -> Any:
    if isinstance(v, bool) and kind is not bool:
        return None
    return v if isinstance(v, kind) else None


def _change(c: Any, what: str) -> Change:
    if not isinstance(c, dict) or not isinstance(c.get("type"), str) or not isinstance(c.get("key"), str):
        raise E.ProtocolError(f"{what}: a change is an object with a type and a key, not {c!r}")
    return Change(
        type=c["type"],
        key=c["key"],
        token=_opt(c.get("token"), int),
        lease_ms=_opt(c.get("lease_ms"), int),
        mode=_opt(c.get("mode"), str),
        limit=_opt(c.get("limit"), int),
        principal=_opt(c.get("principal"), str),
        owner=_opt(c.get("owner"), str),
        value=_opt(c.get("value"), str),
    )


def watch_message(msg: SSEMessage, what: str, ep: Endpoint) -> Union[WatchEvent, Progress, E.WatchCut, None]:
    """What one message of a watch stream says: an event, a cut (returned,
    not raised: the plan decides), or ``None`` for a kind of message this
    client does not know (skipped)."""
    if msg.event not in ("changes", "progress", "cut"):
        return None
    try:
        data = json.loads(msg.data)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise E.ProtocolError(f"{what}: a {msg.event} message whose data is not a JSON object: {msg.data[:200]!r}", endpoint=ep.url)
    if msg.event == "cut":
        code = data.get("code")
        text = data.get("error")
        return E.WatchCut(
            f"{what}: {text if isinstance(text, str) and text else 'the node ended the stream'}",
            code=code if isinstance(code, str) else "",
            resume_from=_opt(data.get("resume_from"), int),
            body=data,
            endpoint=ep.url,
        )
    index = _opt(data.get("index"), int)
    if index is None:
        raise E.ProtocolError(f"{what}: a {msg.event} message without an index: {msg.data[:200]!r}", endpoint=ep.url)
    if msg.event == "progress":
        return Progress(index)
    changes = data.get("changes")
    if not isinstance(changes, list):
        raise E.ProtocolError(f"{what}: a changes message without changes: {msg.data[:200]!r}", endpoint=ep.url)
    return WatchEvent(index, [_change(c, what) for c in changes])


def watch_plan(router: Router, s: Settings, prefix: str, from_index: Optional[int], idle: float) -> WatchPlan:
    """Follow the changes under ``prefix`` from log index ``from_index``
    (``None``: from the next entry applied); yields :class:`WatchEvent` and
    :class:`Progress` for the caller, between the I/O it asks for.

    Any node answers a watch, and every node yields the same sequence. So
    when the stream breaks (the connection fails, the node ends it without
    a cut, nothing comes for ``idle``) or the node shuts down (cut
    ``shutting_down``), the plan watches again from the index after the
    last event delivered, on the next endpoint: no gap, no duplicate. It
    gives up with :class:`Unavailable` once ``retry_for`` has passed since
    the first failure without an event delivered. A cut that resuming
    cannot mend (``compacted``, ``watch_behind``) and a 410 raise
    :class:`WatchCut`; a 429 raises :class:`TooManyRequests`; a 503 is
    tried elsewhere; any other refusal is final, as in :func:`call_plan`.
    """
    what = f"watch {prefix!r}"
    op = Op(method="GET", path="/v1/watch", what=what, kind="read", idempotent=True)
    nxt = from_index  # the next index wanted
    attempt = 0  # which endpoint: the next one after each failure
    fails = 0  # failures in a row
    failing_since: Optional[float] = None
    last = "nothing answered"
    tried: List[str] = []
    while True:
        eps = router.endpoints
        ep = eps[attempt % len(eps)]
        if ep.url not in tried:
            tried.append(ep.url)
        try:
            status, headers, raw = yield OpenStream(ep, watch_path(prefix, nxt), s.timeout, idle)
        except NotSent as e:
            last = f"{ep.url}: {e}"
        except NoAnswer as e:
            last = f"{ep.url}: no answer ({e})"
        else:
            if status == 200:
                ctype = headers.get("content-type", "")
                if not ctype.startswith("text/event-stream"):
                    raise E.ProtocolError(f"{what}: expected text/event-stream, got {ctype!r}", status=status, endpoint=ep.url)
                parser = SSEParser()
                resumable: Optional[E.WatchCut] = None
                try:
                    while resumable is None:
                        piece = yield ReadStream()
                        if not piece:
                            last = f"{ep.url}: the stream ended without a cut"
                            break
                        for msg in parser.feed(piece):
                            ev = watch_message(msg, what, ep)
                            if isinstance(ev, E.WatchCut):
                                if ev.code != "shutting_down":
                                    if ev.resume_from is None:
                                        ev.resume_from = nxt
                                    raise ev
                                resumable = ev
                                break
                            if ev is None:
                                continue
                            nxt = ev.index + 1
                            fails, failing_since, tried = 0, None, [ep.url]
                            yield ev
                except NoAnswer as e:
                    last = f"{ep.url}: the stream broke ({e})"
                if resumable is not None:
                    last = f"{ep.url}: {resumable.message}"
                    if resumable.resume_from is not None and (nxt is None or resumable.resume_from > nxt):
                        nxt = resumable.resume_from
                yield CloseStream()
            else:
                data = _json(raw)
                body = data if isinstance(data, dict) else {}
                if status == 410:
                    msg = body.get("error")
                    raise E.WatchCut(
                        msg if isinstance(msg, str) and msg else f"{what}: HTTP 410",
                        code=str(body.get("code") or "compacted"),
                        resume_from=nxt,
                        first=_opt(body.get("first"), int),
                        applied=_opt(body.get("applied"), int),
                        status=status,
                        body=body,
                        endpoint=ep.url,
                    )
                if status != 503:
                    raise error_of(op, ep, status, headers, data)
                last = f"{ep.url}: {body.get('error') or 'HTTP 503'}"
        now = time.monotonic()
        if failing_since is None:
            failing_since = now
        if now - failing_since >= s.retry_for:
            raise E.Unavailable(
                f"{what}: no node served it within {now - failing_since:.1f} s "
                f"(tried {', '.join(tried)}); last error: {last}",
                endpoint=ep.url,
            )
        attempt += 1
        fails += 1
        # Every other node at once; a pause after trying them all.
        delay = 0.0 if fails % len(eps) else min(0.02 * fails, 0.25)
        delay = min(delay, failing_since + s.retry_for - now)
        if delay > 0:
            yield Sleep(delay)


__all__ = ["Change", "Progress", "WatchEvent"]
