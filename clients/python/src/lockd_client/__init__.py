"""A Python client for lockd, the Raft-replicated lock service.

Blocking::

    from lockd_client import Client

    client = Client(["http://127.0.0.1:7401", "http://127.0.0.1:7402", "http://127.0.0.1:7403"])
    with client.lock("jobs/nightly", lease=10) as lk:
        do_the_job(fencing_token=lk.token)   # renewed in the background; lk.lost says if it ended

asyncio::

    from lockd_client import AsyncClient

    async with AsyncClient([...]).lock("jobs/nightly", lease=10) as lk:
        ...

Watching a prefix (every grant, release and expiry under it, resumed on
another node when its node goes away)::

    for event in client.watch("jobs/"):
        if isinstance(event, WatchEvent):
            for change in event.changes:
                print(event.index, change.type, change.key, change.token)

Sessions (one keepalive for many holdings), reentrant locks and leader
election (docs/sessions.md)::

    with client.open_session(ttl=15) as s:
        a, b = s.lock("jobs/a"), s.lock("jobs/b")   # both end with the session

    with client.campaign("db-primary", "10.0.0.1", ttl=5) as leadership:
        serve(epoch=leadership.token)               # resign: the block's end

    for leader in client.observe("db-primary"):
        print(leader and (leader.epoch, leader.value))

Standard library only. See the README for errors and retries.
"""

from ._core import AUTO, Holder, ListPage, LockInfo, VERSION as __version__
from ._session import Leader, SessionInfo
from ._watch import Change, Progress, WatchEvent
from .aio import AsyncClient, AsyncLock, AsyncObserve, AsyncSession, AsyncWatch
from .client import Client, Lock, Observe, Session, Watch
from .errors import (
    BadRequest,
    CapacityExceeded,
    Forbidden,
    Held,
    LeaseEnded,
    LockdError,
    NoSession,
    NotHeld,
    OutcomeUnknown,
    ProtocolError,
    ServerError,
    Timeout,
    TooManyRequests,
    Unauthenticated,
    Unavailable,
    Unsupported,
    WatchCut,
    WrongToken,
)

__all__ = [
    "AUTO",
    "AsyncClient",
    "AsyncLock",
    "AsyncObserve",
    "AsyncSession",
    "AsyncWatch",
    "BadRequest",
    "CapacityExceeded",
    "Change",
    "Client",
    "Forbidden",
    "Held",
    "Holder",
    "LeaseEnded",
    "ListPage",
    "Leader",
    "Lock",
    "LockInfo",
    "LockdError",
    "NoSession",
    "NotHeld",
    "Observe",
    "OutcomeUnknown",
    "Progress",
    "ProtocolError",
    "ServerError",
    "Session",
    "SessionInfo",
    "Timeout",
    "TooManyRequests",
    "Unauthenticated",
    "Unavailable",
    "Unsupported",
    "Watch",
    "WatchCut",
    "WatchEvent",
    "WrongToken",
    "__version__",
]
