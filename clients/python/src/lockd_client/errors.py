"""The exceptions of the client: one class per kind of answer.

Every exception the client raises for a node's answer or for the cluster
being out of reach is a :class:`LockdError`. Bad arguments (an empty key, a
lease of 0, an unknown mode) raise :class:`ValueError` or :class:`TypeError`
before anything is sent.

=====================  ======  ===============================================
class                  HTTP    meaning
=====================  ======  ===============================================
``BadRequest``         400     the node refused the request as malformed or
                       413     past a bound (key too long, lease or wait above
                               the cluster's maximum, plaintext to a TLS node)
``Unauthenticated``    401     no credentials the node accepts
``Forbidden``          403     the caller's roles do not allow it, another
                               principal holds the lock, or the lock module's
                               policy refused the grant
``NotHeld``            404     release / keepalive: the token holds nothing
                                (the lease ended, or the lock was released)
``WrongToken``         409     release / keepalive: the key is held under
                               another token (a subclass of ``NotHeld``)
``NoSession``          404     the session is gone (closed, expired) or was
                               never opened (a subclass of ``NotHeld``)
``Held``               409     acquire: still busy (``try_lock`` returns None)
``Timeout``            409     acquire: still busy after the wait asked for
                               (a subclass of ``Held``)
``Unsupported``        422     the active lock module cannot do what was asked
                               (a mode or limit of world 0.2 on a 0.1 module)
``TooManyRequests``    429     a quota of the module is used up, or too many
                               callers wait (``retry_after`` when the node
                               said when to come back)
``CapacityExceeded``   507     the cluster's capacity bound is reached
``ServerError``        500     the node failed (e.g. a poisoned lock module)
``Unavailable``        503     no node could answer within ``retry_for``: no
                       (none)  leader, nodes down or unreachable
``OutcomeUnknown``     (none)  a request that is not safe to repeat was sent
                               but no answer came: it may or may not have
                               taken effect
``LeaseEnded``         (none)  a held lock's lease ended (locally) before a
                               renewal got through: ``lost`` is set
``WatchCut``           410     a watch cannot go on from where it is
                       (none)  (``compacted``, ``watch_behind``): list the
                               prefix, then watch from the list's index
``ProtocolError``      (any)   an answer this client does not understand
=====================  ======  ===============================================
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

__all__ = [
    "LockdError",
    "BadRequest",
    "Unauthenticated",
    "Forbidden",
    "NotHeld",
    "WrongToken",
    "NoSession",
    "Held",
    "Timeout",
    "Unsupported",
    "TooManyRequests",
    "CapacityExceeded",
    "ServerError",
    "Unavailable",
    "OutcomeUnknown",
    "LeaseEnded",
    "WatchCut",
    "ProtocolError",
]


class LockdError(Exception):
    """Base class of every error the client raises for the cluster.

    ``status`` is the HTTP status of the answer (``None`` when no answer
    came), ``code`` the node's stable error code (``"held"``,
    ``"not_leader"``, ...; the list is in docs/api.md; ``None`` when the
    client raised it on its own), ``message`` the node's ``error`` text (or
    the client's own), ``body`` the whole JSON body of the answer,
    ``endpoint`` the node that answered or was tried last.
    """

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        body: Optional[Mapping[str, Any]] = None,
        endpoint: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.body = dict(body) if body else {}
        self.endpoint = endpoint
        c = self.body.get("code")
        self.code: Optional[str] = c if isinstance(c, str) else None

    def __str__(self) -> str:
        where = f" ({self.endpoint}, HTTP {self.status})" if self.status else ""
        return f"{self.message}{where}"


class BadRequest(LockdError):
    """400 or 413: the request is malformed or past one of the cluster's bounds."""


class Unauthenticated(LockdError):
    """401: no credentials, an unknown token, or no client certificate the node accepts."""


class Forbidden(LockdError):
    """403: not allowed (roles, holder-bound lock, or the module's policy)."""


class NotHeld(LockdError):
    """404 on release or keepalive: the token holds nothing (any more)."""


class WrongToken(NotHeld):
    """409 on release or keepalive: the key is held, under another token."""


class NoSession(NotHeld):
    """The session named does not exist: closed, expired, or never opened."""


class Held(LockdError):
    """409 on acquire: the key is still busy."""


class Timeout(Held):
    """The key was still busy when the wait asked for ended."""


class Unsupported(LockdError):
    """422: the active lock module cannot do this (mode, limit, policy data)."""


class TooManyRequests(LockdError):
    """429: a quota is used up or too many callers wait; ``retry_after`` in seconds if given."""

    def __init__(self, message: str, *, retry_after: Optional[float] = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class CapacityExceeded(LockdError):
    """507: the cluster holds as many locks (or key bytes) as its capacity bound allows."""


class ServerError(LockdError):
    """500, or another status this client does not expect."""


class Unavailable(LockdError):
    """No node answered the request within ``retry_for`` (no leader, nodes down)."""


class OutcomeUnknown(LockdError):
    """A request that is not safe to repeat was sent, and no answer came.

    It may have taken effect or not. After an acquire that ended like this,
    a lock may be held that nobody knows the token of: its lease frees it.
    After a release, calling ``release`` again is safe (a release names its
    token, so it can never free another holder's lock): it answers
    ``NotHeld`` if the first one worked.
    """


class LeaseEnded(LockdError):
    """A held lock's local deadline passed before a renewal got through
    (the cluster could not be reached in time, or the process was paused):
    it must be taken as lost. The reason a lock's ``lost`` event was set,
    beside a refused keepalive (``NotHeld``, ``WrongToken``, ``Forbidden``)."""


class WatchCut(LockdError):
    """A watch ended where resuming cannot mend it; the changes after
    ``resume_from`` (the next log index the watch wanted) are gone.

    ``code``: ``"compacted"`` (the node no longer keeps changes that old:
    410 for a ``from`` older than it keeps, with ``first``, the first index
    kept, and ``applied``, the index its state is at; or a snapshot it
    installed past the stream's position) or ``"watch_behind"`` (the caller
    read so slowly that the changes it had not read were dropped) or
    ``"revoked"`` (the caller may no longer watch the prefix: a reload
    removed its token or role, or its certificate expired; watching again
    needs valid credentials). Resync:
    list the prefix (``ListPage.index``), then watch from ``index + 1``.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str,
        resume_from: Optional[int] = None,
        first: Optional[int] = None,
        applied: Optional[int] = None,
        **kw: Any,
    ) -> None:
        super().__init__(message, **kw)
        self.code = code
        self.resume_from = resume_from
        self.first = first
        self.applied = applied


class ProtocolError(LockdError):
    """The node answered something this client does not understand."""
