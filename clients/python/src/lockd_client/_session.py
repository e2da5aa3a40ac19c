"""Sessions, proclaim and leader election without I/O (docs/sessions.md):
the requests, the answers, and how a watch's changes become leaders. The
blocking and asyncio clients drive them.

An election named NAME is the exclusive lock of key NAME: its holder is
the leader, its fencing token the leadership's epoch, its value what the
leader publishes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

from . import _core as C
from . import _watch as W
from . import errors as E


def session_path(session: int, action: Optional[str] = None) -> str:
    path = f"/v1/sessions/{session}"
    return f"{path}/{action}" if action else path


def open_op(ttl_ms: int, owner: str, request_id: Optional[str]) -> C.Op:
    body: dict = {"ttl_ms": ttl_ms}
    if owner:
        body["owner"] = owner
    if request_id is not None:
        body["request_id"] = request_id
    return C.Op(
        method="POST",
        path="/v1/sessions",
        what="open a session",
        kind="admin",
        # The same owner and request id answer the session that opened.
        idempotent=request_id is not None,
        body=lambda _: body,
    )


def keepalive_op(session: int, until: Optional[float]) -> C.Op:
    return C.Op(
        method="POST",
        path=session_path(session, "keepalive"),
        what=f"keepalive session {session}",
        kind="keepalive",
        idempotent=True,
        until=until,
    )


def close_op(session: int) -> C.Op:
    return C.Op(
        method="DELETE",
        path=session_path(session),
        what=f"close session {session}",
        kind="release",
        # A repeat after a lost answer would say "no session" for a close
        # that worked: the caller is told the outcome is unknown instead.
        idempotent=False,
    )


def get_op(session: int) -> C.Op:
    return C.Op(method="GET", path=session_path(session), what=f"get session {session}", kind="read", idempotent=True)


def proclaim_op(key: str, token: int, value: str) -> C.Op:
    return C.Op(
        method="POST",
        path=C.lock_path(key, "proclaim"),
        what=f"proclaim {key!r} token {token}",
        kind="keepalive",
        # Publishing the same value twice is publishing it once.
        idempotent=True,
        body=lambda _: {"token": token, "value": value},
    )


def opened(data: Mapping[str, Any]) -> Tuple[int, float]:
    """A session's id and TTL (seconds) from an open or keepalive answer."""
    sid, ttl = data.get("id"), data.get("ttl_ms")
    if isinstance(sid, bool) or not isinstance(sid, int) or sid < 1:
        raise E.ProtocolError(f"a session answer without an id: {dict(data)!r}")
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1:
        raise E.ProtocolError(f"session {sid}: answered a TTL of {ttl!r} ms")
    return sid, ttl / 1000.0


@dataclass(frozen=True)
class SessionInfo:
    """A session as ``GET /v1/sessions/{id}`` reports it (read
    linearizably at log index ``index``)."""

    id: int
    ttl: float
    #: Seconds left of the TTL on the leader's clock (``None``: not timed
    #: there yet).
    ttl_left: Optional[float]
    #: Its holdings: (key, token), in key order.
    holdings: List[Tuple[str, int]]
    principal: str
    owner: str
    max_holdings: int
    index: int


def session_info(data: Mapping[str, Any]) -> SessionInfo:
    sid, ttl = opened(data)
    holdings = []
    for h in data.get("holdings", []):
        if not isinstance(h, dict) or not isinstance(h.get("key"), str) or not isinstance(h.get("token"), int):
            raise E.ProtocolError(f"session {sid}: a holding is a key and a token, not {h!r}")
        holdings.append((h["key"], h["token"]))
    left = data.get("ttl_left_ms")
    return SessionInfo(
        id=sid,
        ttl=ttl,
        ttl_left=left / 1000.0 if isinstance(left, int) and not isinstance(left, bool) else None,
        holdings=holdings,
        principal=str(data.get("principal", "")),
        owner=str(data.get("owner", "")),
        max_holdings=int(data.get("max_holdings", 0)),
        index=int(data.get("index", 0)),
    )


@dataclass(frozen=True)
class Leader:
    """An election's leader as observers see it: ``epoch`` is the
    leadership's fencing token (``None`` when this caller may not see
    another principal's tokens), ``value`` what it published."""

    epoch: Optional[int]
    value: str
    principal: Optional[str] = None
    owner: Optional[str] = None


def leader_of(name: str, page: C.ListPage) -> Optional[Leader]:
    """The leader of election ``name`` in a list page of prefix ``name``
    (limit 1: the key itself sorts first under its own prefix)."""
    for info in page.locks:
        if info.key == name and info.holders:
            h = info.holders[0]
            return Leader(epoch=h.token, value=h.value or "", principal=h.principal, owner=h.owner)
    return None


class LeaderFold:
    """Folds a watch of an election's key into its leaders: :meth:`apply`
    answers the new leader after one event, or :data:`SAME` when the
    event changed nothing an observer sees."""

    def __init__(self, name: str, current: Optional[Leader]) -> None:
        self.name = name
        self.current = current

    def apply(self, event: Any) -> Any:
        if not isinstance(event, W.WatchEvent):
            return SAME
        before = self.current
        # The watch is by prefix: only this election's key counts.
        for c in (c for c in event.changes if c.key == self.name):
            cur = self.current
            if c.type == "granted":
                self.current = Leader(epoch=c.token, value="", principal=c.principal, owner=c.owner)
            elif c.type == "value":
                # The key is exclusive: a value change is the leader's.
                self.current = (
                    None if cur is None else Leader(epoch=cur.epoch, value=c.value or "", principal=cur.principal, owner=cur.owner)
                )
            elif c.type in ("released", "expired"):
                self.current = None
        return SAME if self.current == before else self.current


#: :meth:`LeaderFold.apply`'s answer for an event that changed nothing.
SAME = object()
