"""Watch: the Server-Sent Events parser, and watches on real clusters (order,
prefixes, resumes without a gap or a duplicate, a node killed or stopped
under a watcher, a node gone silent, compaction, the watcher bound, closing,
TLS and tokens, the asyncio twin)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

import pytest

from lockd_client import (
    AsyncClient,
    Change,
    Client,
    Forbidden,
    NotHeld,
    OutcomeUnknown,
    Progress,
    TooManyRequests,
    Unavailable,
    WatchCut,
    WatchEvent,
)
from lockd_client import _core as C
from lockd_client import _watch as W
from lockd_cluster import Cluster, free_port, poll

Seen = Tuple[str, str, Optional[int]]


def changes_of(events: List[Any]) -> List[Seen]:
    """(type, key, token) of every change of every WatchEvent, in order."""
    return [(ch.type, ch.key, ch.token) for ev in events if isinstance(ev, WatchEvent) for ch in ev.changes]


def batches(events: List[Any]) -> List[WatchEvent]:
    return [ev for ev in events if isinstance(ev, WatchEvent)]


def cycle(c: Client, key: str) -> List[Seen]:
    """Take and free ``key``: the two changes that makes."""
    lk = c.lock(key, lease=30, keepalive=False)
    try:
        c.release(key, lk.token)
    except OutcomeUnknown:  # a leader change under the release: it worked once, or now
        try:
            c.release(key, lk.token)
        except NotHeld:
            pass
    return [("granted", key, lk.token), ("released", key, lk.token)]


def read_until(w: Any, done: Callable[[List[Any]], bool], within: float = 30.0) -> List[Any]:
    """Events of the blocking watch ``w`` until ``done`` holds of them."""
    got: List[Any] = []
    end = time.monotonic() + within
    while not done(got):
        assert time.monotonic() < end, f"the watch did not get there within {within} s: {got}"
        got.append(next(w))
    return got


async def aread_until(w: Any, done: Callable[[List[Any]], bool], within: float = 30.0) -> List[Any]:
    got: List[Any] = []
    end = time.monotonic() + within
    while not done(got):
        left = end - time.monotonic()
        assert left > 0, f"the watch did not get there within {within} s: {got}"
        got.append(await asyncio.wait_for(w.__anext__(), left))
    return got


def strictly_increasing(events: List[Any]) -> bool:
    idx = [ev.index for ev in batches(events)]
    return all(a < b for a, b in zip(idx, idx[1:]))


# ------------------------------------------------------------------ parser


def sse(data: bytes, pieces: Optional[int] = None) -> List[W.SSEMessage]:
    """What the parser makes of ``data`` fed whole, or in pieces of ``pieces`` bytes."""
    p = W.SSEParser()
    if pieces is None:
        return p.feed(data)
    out: List[W.SSEMessage] = []
    for i in range(0, len(data), pieces):
        out += p.feed(data[i : i + pieces])
    return out


STREAM = (
    b"\xef\xbb\xbf: a comment\r\n"
    b"event: progress\r\nid: 41\r\ndata: {\"index\":41}\r\n\r\n"
    b"event: changes\nid: 42\ndata: {\"index\":42,\n:between the lines\ndata:\"changes\":[]}\n\n"
    b"event:cut\rdata:{\"code\":\"compacted\"}\r\r"
    b"data: plain \xc3\xa9\n\n"
    b"event: changes\ndata: unfinished\n"
)
PARSED = [
    W.SSEMessage("progress", '{"index":41}', "41"),
    W.SSEMessage("changes", '{"index":42,\n"changes":[]}', "42"),
    W.SSEMessage("cut", '{"code":"compacted"}', None),
    W.SSEMessage("message", "plain \u00e9", None),
]


@pytest.mark.parametrize("pieces", [None, 1, 2, 3, 7])
def test_the_parser_reads_crlf_cr_lf_comments_and_data_lines_in_any_pieces(pieces):
    # CRLF, LF and CR line ends; a CRLF split between pieces is one line
    # end; comments; two data lines; a BOM; a message the stream ends in
    # the middle of is not returned.
    assert sse(STREAM, pieces) == PARSED


def test_the_parser_edge_cases():
    assert sse(b"data\n\n") == [W.SSEMessage("message", "", None)]  # a field without a colon
    assert sse(b"data:\ndata:\n\n") == [W.SSEMessage("message", "\n", None)]
    assert sse(b"data:  two spaces\n\n") == [W.SSEMessage("message", " two spaces", None)]
    assert sse(b"event: progress\nid: 3\n\n") == []  # no data: no message
    assert sse(b"retry: 10\nfoo: bar\ndata: x\n\n") == [W.SSEMessage("message", "x", None)]
    assert sse(b"data: x\r\r\n") == [W.SSEMessage("message", "x", None)]  # CR, then a blank CRLF line
    assert sse(b"id: a\0b\ndata: x\n\n") == [W.SSEMessage("message", "x", None)]  # an id with NUL is ignored
    assert sse(b"data: \xff\n\n") == [W.SSEMessage("message", "\ufffd", None)]
    # Each message has its own event name and id.
    assert sse(b"event: a\nid: 1\ndata: x\n\ndata: y\n\n") == [
        W.SSEMessage("a", "x", "1"),
        W.SSEMessage("message", "y", None),
    ]


def test_watch_messages_are_read_into_events():
    ep = C.parse_endpoint("127.0.0.1:1", "http")
    m = W.watch_message(
        W.SSEMessage(
            "changes",
            '{"index":45,"changes":[{"type":"granted","key":"k","lease_ms":1500,"mode":"shared","limit":3,'
            '"principal":"p","owner":"o"},{"type":"released","key":"k","token":17}]}',
            "45",
        ),
        "watch",
        ep,
    )
    assert m == WatchEvent(
        45,
        [
            Change("granted", "k", None, 1500, "shared", 3, "p", "o"),
            Change("released", "k", 17),
        ],
    )
    assert m.changes[0].lease == 1.5 and m.changes[1].lease is None
    assert W.watch_message(W.SSEMessage("progress", '{"index":41}', "41"), "watch", ep) == Progress(41)
    cut = W.watch_message(
        W.SSEMessage("cut", '{"code":"watch_behind","error":"behind","resume_from":9}'), "watch", ep
    )
    assert isinstance(cut, WatchCut) and cut.code == "watch_behind" and cut.resume_from == 9
    assert W.watch_message(W.SSEMessage("message", "hello"), "watch", ep) is None  # skipped
    with pytest.raises(Exception) as e:
        W.watch_message(W.SSEMessage("changes", '{"index":1}'), "watch", ep)
    assert type(e.value).__name__ == "ProtocolError"


SSE_HEAD = {"content-type": "text/event-stream"}


def test_the_plan_resumes_on_the_next_node_after_a_shutdown_or_a_break():
    """The watch plan driven by hand: what it asks for, given what nodes answer."""
    eps = C.parse_endpoints(["127.0.0.1:1", "127.0.0.1:2"], "http")
    s = C.Settings(timeout=5, connect_timeout=2, retry_for=10)
    plan = W.watch_plan(C.Router(eps), s, "jobs/", None, 30.0)
    step = next(plan)
    assert isinstance(step, W.OpenStream) and step.endpoint == eps[0]
    assert step.path == "/v1/watch?prefix=jobs%2F" and step.idle == 30.0
    assert isinstance(plan.send((200, SSE_HEAD, b"")), W.ReadStream)
    assert plan.send(b'event: progress\nid: 41\ndata: {"index":41}\n\n') == Progress(41)
    assert isinstance(plan.send(None), W.ReadStream)
    ev = plan.send(
        b'event: changes\r\nid: 42\r\ndata: {"index":42,"changes":[{"type":"released","key":"jobs/a","token":7}]}\r\n\r\n'
        b'event: cut\r\ndata: {"code":"shutting_down","error":"bye","resume_from":44}\r\n\r\n'
    )
    assert ev == WatchEvent(42, [Change("released", "jobs/a", 7)])
    # The node shuts down: the next node, from the index the cut names.
    assert isinstance(plan.send(None), W.CloseStream)
    step = plan.send(None)
    assert isinstance(step, W.OpenStream) and step.endpoint == eps[1] and step.path.endswith("&from=44")
    # A 503: every node failed in a row, so a short pause, then the next
    # node (the first again), from the same index.
    step = plan.send((503, {}, b'{"error":"the node is shutting down"}'))
    assert isinstance(step, C.Sleep) and 0 < step.seconds <= 0.25
    step = plan.send(None)
    assert isinstance(step, W.OpenStream) and step.endpoint == eps[0] and step.path.endswith("&from=44")
    assert isinstance(plan.send((200, SSE_HEAD, b"")), W.ReadStream)
    assert plan.send(b'event: progress\nid: 50\ndata: {"index":50}\n\n') == Progress(50)
    # A break: from the index after the last event delivered, elsewhere.
    plan.send(None)
    assert isinstance(plan.throw(C.NoAnswer(TimeoutError("timed out"), False)), W.CloseStream)
    step = plan.send(None)
    assert isinstance(step, W.OpenStream) and step.endpoint == eps[1] and step.path.endswith("&from=51")
    with pytest.raises(WatchCut) as e:
        plan.send((410, {}, b'{"error":"gone","code":"compacted","first":60,"applied":70}'))
    assert (e.value.code, e.value.resume_from, e.value.first, e.value.applied, e.value.status) == (
        "compacted", 51, 60, 70, 410,
    )

    plan = W.watch_plan(C.Router(eps), s, "", 5, 30.0)
    assert next(plan).path == "/v1/watch?prefix=&from=5"
    plan.send((200, SSE_HEAD, b""))
    with pytest.raises(WatchCut) as e:
        plan.send(b'event: cut\ndata: {"code":"watch_behind","error":"behind","resume_from":9}\n\n')
    assert (e.value.code, e.value.resume_from, e.value.status) == ("watch_behind", 9, None)

    plan = W.watch_plan(C.Router(eps), s, "", None, 30.0)
    next(plan)
    with pytest.raises(TooManyRequests):
        plan.send((429, {"retry-after": "1"}, b'{"error":"too many","code":"too_many_watchers"}'))


def test_bad_watch_arguments_raise_before_anything_is_sent():
    c = Client([f"127.0.0.1:{free_port()}"])
    with pytest.raises(TypeError):
        c.watch(b"jobs/")
    with pytest.raises(TypeError):
        c.watch("jobs/", from_index="7")
    with pytest.raises(TypeError):
        c.watch("jobs/", from_index=True)
    with pytest.raises(ValueError):
        c.watch("jobs/", from_index=-1)
    with pytest.raises(ValueError):
        c.watch("jobs/", idle_timeout=0)
    with pytest.raises(TypeError):
        AsyncClient([f"127.0.0.1:{free_port()}"]).watch("jobs/", from_index=1.5)


def test_a_watch_with_no_node_is_unavailable_after_retry_for():
    c = Client([f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"], retry_for=0.3)
    t0 = time.monotonic()
    with pytest.raises(Unavailable) as e:
        next(c.watch("jobs/"))
    assert time.monotonic() - t0 < 3
    assert "watch 'jobs/'" in e.value.message and "refused" in e.value.message.lower()


# ----------------------------------------------------------------- clusters


def test_a_watch_sees_grants_releases_and_expiries_under_its_prefix_in_order(cluster02, key):
    c = Client(cluster02.endpoints)
    prefix = key + "/"
    with c.watch(prefix) as w:
        first = next(w)
        # A watch from now starts with where it is: the changes below come after it.
        assert isinstance(first, Progress), first
        want: List[Seen] = []
        for i in range(3):
            want += cycle(c, f"{prefix}{i}")
            cycle(c, f"{key}x/{i}")  # outside the prefix, though it starts the same
            cycle(c, f"elsewhere/{key}/{i}")
        short = c.lock(f"{prefix}short", lease=0.5, keepalive=False)
        want += [("granted", f"{prefix}short", short.token), ("expired", f"{prefix}short", short.token)]
        got = read_until(w, lambda evs: len(changes_of(evs)) >= len(want))
        assert w.last_index == got[-1].index
    assert changes_of(got) == want
    assert strictly_increasing(got) and batches(got)[0].index > first.index
    grant = batches(got)[0].changes[0]
    assert (grant.lease_ms, grant.lease, grant.mode, grant.limit, grant.principal, grant.owner) == (
        30000, 30.0, "exclusive", 1, "", c.owner,
    )
    release = batches(got)[1].changes[0]
    assert (release.lease_ms, release.mode, release.limit, release.principal, release.owner) == (None,) * 5


def test_a_resume_from_an_index_gets_exactly_the_rest_on_every_node(cluster02, key):
    c = Client(cluster02.endpoints)
    prefix = key + "/"
    with c.watch(prefix) as w:
        start = next(w)
        made: List[Seen] = []
        for i in range(4):
            made += cycle(c, f"{prefix}{i}")
        got = batches(read_until(w, lambda evs: len(changes_of(evs)) >= len(made)))
    assert changes_of(got) == made and len(got) == 8
    last = got[-1].index

    def through_last(evs: List[Any]) -> bool:
        return any(ev.index >= last for ev in evs)

    for node in cluster02.nodes:
        one = Client([cluster02.url(node)])
        # From the middle: exactly the rest, no gap, no duplicate.
        with one.watch(prefix, from_index=got[2].index + 1) as r:
            assert batches(read_until(r, through_last)) == got[3:]
        # From the watch's start: all of it.
        with one.watch(prefix, from_index=start.index + 1) as r:
            assert batches(read_until(r, through_last)) == got
        # From just after the last: nothing, and where it is.
        with one.watch(prefix, from_index=last + 1) as r:
            ev = next(r)
            assert isinstance(ev, Progress) and ev.index >= last, ev


def _through_a_stop(cl: Cluster, key: str, how: str, follow: Callable[..., Optional[str]]) -> None:
    """A watcher on a follower (its first endpoint) while changes go
    through the leader; after the first ten changes the follower is killed
    (or stopped: SIGTERM), and the changes go on. The watcher must see
    every change once, in order, the later ones from another node.

    ``follow(endpoints, prefix, seen, ready, until)`` runs the watcher:
    appends its events to ``seen``, sets ``ready`` after the first, stops
    when ``until()`` holds; returns the endpoint it is on at the end.
    """
    leader = cl.wait_leader()
    watched = next(i for i in cl.nodes if i != leader)
    endpoints = [cl.url(watched)] + [cl.url(i) for i in cl.nodes if i != watched]
    made: List[Seen] = []
    seen: List[Any] = []
    errors: List[BaseException] = []
    ready = threading.Event()
    cycles = 16

    def change() -> None:
        try:
            assert ready.wait(30), "the watch never started"
            c = Client([cl.url(leader)] + [cl.url(i) for i in cl.nodes if i != leader], retry_for=20)
            for i in range(cycles):
                made.extend(cycle(c, f"{key}/{i}"))
                if i == 4:
                    poll("the watcher sees the first changes", lambda: len(changes_of(seen)) >= 10)
                    (cl.kill if how == "kill" else cl.terminate)(watched)
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=change, daemon=True)
    t.start()
    deadline = time.monotonic() + 60

    def until() -> bool:
        assert not errors, errors
        assert time.monotonic() < deadline, f"not every change seen: {changes_of(seen)} of {made}"
        return len(changes_of(seen)) >= 2 * cycles

    try:
        at_end = follow(endpoints, key + "/", seen, ready, until)
    finally:
        ready.set()
        t.join(60)
    assert not errors, errors
    assert changes_of(seen) == made
    assert strictly_increasing(seen)
    idx = [ev.index for ev in seen]
    assert idx == sorted(idx)
    assert at_end is not None and at_end != cl.url(watched)


def _follow(endpoints, prefix, seen, ready, until) -> Optional[str]:
    with Client(endpoints).watch(prefix) as w:
        seen.append(next(w))
        assert w.endpoint == endpoints[0]
        ready.set()
        while not until():
            seen.append(next(w))
        return w.endpoint


def _follow_async(endpoints, prefix, seen, ready, until) -> Optional[str]:
    async def main() -> Optional[str]:
        async with AsyncClient(endpoints).watch(prefix) as w:
            seen.append(await asyncio.wait_for(w.__anext__(), 30))
            assert w.endpoint == endpoints[0]
            ready.set()
            while not until():
                seen.append(await asyncio.wait_for(w.__anext__(), 30))
            return w.endpoint

    return asyncio.run(main())


@pytest.mark.parametrize("how", ["kill", "terminate"])
def test_a_watch_goes_on_from_another_node_when_its_node_goes(new_cluster, key, how):
    _through_a_stop(new_cluster(), key, how, _follow)


def test_an_async_watch_goes_on_from_another_node_when_its_node_is_killed(new_cluster, key):
    _through_a_stop(new_cluster(), key, "kill", _follow_async)


def test_a_silent_stream_is_resumed_elsewhere(new_cluster, key):
    """A node that stops answering (paused) keeps the connection open; the
    watch takes the silence for a break and goes on from another node."""
    cl = new_cluster()
    leader = cl.wait_leader()
    watched = next(i for i in cl.nodes if i != leader)
    c = Client([cl.url(leader)] + [cl.url(i) for i in cl.nodes if i != leader])
    w = Client([cl.url(watched)] + [cl.url(i) for i in cl.nodes if i != watched]).watch(key + "/", idle_timeout=2)
    try:
        assert isinstance(next(w), Progress) and w.endpoint == cl.url(watched)
        cl.pause(watched)
        made: List[Seen] = []
        for i in range(3):
            made += cycle(c, f"{key}/{i}")
        got = read_until(w, lambda evs: len(changes_of(evs)) >= len(made))
        assert changes_of(got) == made
        assert w.endpoint != cl.url(watched)
    finally:
        w.close()
        cl.resume(watched)


def test_a_from_older_than_the_node_keeps_is_compacted_then_resync(new_cluster, key):
    cl = new_cluster(n=1, extra=["--watch-history", "4"])
    c = Client(cl.endpoints)
    prefix = key + "/"
    made: List[Seen] = []
    for i in range(3):
        made += cycle(c, f"{prefix}{i}")  # 6 changes: more than the 4 kept
    with pytest.raises(WatchCut) as e:
        next(c.watch(prefix, from_index=1))
    cut = e.value
    assert (cut.code, cut.status, cut.resume_from) == ("compacted", 410, 1), cut
    assert isinstance(cut.first, int) and isinstance(cut.applied, int) and 1 < cut.first <= cut.applied, cut
    assert cut.body.get("code") == "compacted"

    async def cut_async() -> WatchCut:
        with pytest.raises(WatchCut) as e:
            async for _ in AsyncClient(cl.endpoints).watch(prefix, from_index=1):
                pass
        return e.value

    acut = asyncio.run(asyncio.wait_for(cut_async(), 30))
    assert (acut.code, acut.status, acut.resume_from, acut.first) == ("compacted", 410, 1, cut.first)

    # From the first index kept: what is kept, the end of what was made.
    with c.watch(prefix, from_index=cut.first) as w:
        tail = changes_of(read_until(w, lambda evs: any(ev.index >= cut.applied for ev in evs)))
    assert 0 < len(tail) <= 4 and tail == made[-len(tail):], tail

    # Resync: list the prefix, then watch from the list's index + 1: the
    # next change, and nothing before it.
    page = c.list(prefix)
    assert page.locks == [] and isinstance(page.index, int) and page.index >= cut.applied
    with c.watch(prefix, from_index=page.index + 1) as w:
        more = cycle(c, f"{prefix}more")
        got = read_until(w, lambda evs: len(changes_of(evs)) >= 2)
    assert changes_of(got) == more


def test_the_async_watch_sees_what_the_blocking_one_sees(cluster02, key):
    c = Client(cluster02.endpoints)
    prefix = key + "/"
    with c.watch(prefix) as w:
        start = next(w)
        made: List[Seen] = []
        for i in range(3):
            made += cycle(c, f"{prefix}{i}")
        readers = [c.lock(f"{prefix}shared", lease=30, mode="shared", limit=2, keepalive=False) for _ in range(2)]
        for r in readers:
            r.release()
        got = batches(read_until(w, lambda evs: len(changes_of(evs)) >= len(made) + 4))
    assert [ch.mode for ev in got[-4:] for ch in ev.changes if ch.type == "granted"] == ["shared", "shared"]

    async def main() -> List[Any]:
        out: List[Any] = []
        async with AsyncClient(cluster02.endpoints).watch(prefix, from_index=start.index + 1) as aw:
            async for ev in aw:
                out.append(ev)
                if ev.index >= got[-1].index:
                    break
            assert aw.last_index == out[-1].index
        return out

    assert batches(asyncio.run(asyncio.wait_for(main(), 60))) == got


def test_closing_a_watch_closes_its_connection(new_cluster, key):
    """The node counts open streams (lockd_watchers) and refuses one past
    --max-watchers (429): close(), a with block, a for loop left, another
    thread's close() and an async watch dropped or cancelled each free it."""
    cl = new_cluster(n=1, extra=["--max-watchers", "1"])
    c = Client(cl.endpoints)

    def watchers() -> Optional[float]:
        return cl.metric(1, "lockd_watchers")

    def freed() -> None:
        poll("the node sees the watch closed", lambda: watchers() == 0)

    w = c.watch(key)
    assert isinstance(next(w), Progress) and watchers() == 1
    with pytest.raises(TooManyRequests) as e:
        next(c.watch(key))
    assert e.value.status == 429 and e.value.body.get("code") == "too_many_watchers"
    w.close()
    freed()
    with pytest.raises(StopIteration):
        next(w)

    for _ in c.watch(key):
        break  # the watch, referenced by nothing now, closes its connection
    freed()

    with c.watch(key) as w:
        next(w)
        assert watchers() == 1
    freed()

    # Another thread's close() ends a next() waiting in this one.
    w = c.watch(key)
    next(w)
    waiting = threading.Event()
    closer = threading.Thread(target=lambda: (waiting.wait(10), w.close()))
    closer.start()
    t0 = time.monotonic()
    waiting.set()
    with pytest.raises(StopIteration):
        next(w)  # the next progress would be 5 s away
    closer.join(10)
    assert time.monotonic() - t0 < 4
    freed()

    async def afreed() -> None:
        # The loop closes an aborted connection: wait without blocking it.
        end = time.monotonic() + 15
        while watchers() != 0:
            assert time.monotonic() < end, "the node never saw the async watch closed"
            await asyncio.sleep(0.02)

    async def main() -> None:
        ac = AsyncClient(cl.endpoints)
        async for _ in ac.watch(key):
            break
        await afreed()
        aw = ac.watch(key)
        first = await aw.__anext__()
        assert watchers() == 1
        # A cancelled read closes the stream; the next one resumes from
        # the index after the last event.
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(aw.__anext__(), 0.3)
        await afreed()
        again = await asyncio.wait_for(aw.__anext__(), 10)
        assert isinstance(again, Progress) and again.index >= first.index
        assert watchers() == 1
        await aw.aclose()
        await afreed()
        with pytest.raises(StopAsyncIteration):
            await aw.__anext__()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_watch_over_tls_with_tokens(secure_cluster, key):
    """A token's own grants show their tokens; another principal's grant
    does not (its release does); a principal that may not list a prefix
    may not watch it."""
    s = secure_cluster.secure
    eps = secure_cluster.endpoints
    worker = Client(eps, cafile=s.ca, token=s.tokens["worker"])
    ci_cert, ci_key = s.cert("ci")
    ci = Client(eps, cafile=s.ca, certfile=ci_cert, keyfile=ci_key)
    prefix = f"jobs/{key}/"
    with worker.watch(prefix) as w:
        assert isinstance(next(w), Progress)
        assert w.endpoint is not None and w.endpoint.startswith("https://")
        mine = cycle(worker, prefix + "mine")
        theirs = cycle(ci, prefix + "theirs")
        got = read_until(w, lambda evs: len(changes_of(evs)) >= 4)
    their_token = theirs[0][2]
    assert changes_of(got) == mine + [("granted", prefix + "theirs", None), ("released", prefix + "theirs", their_token)]
    assert [ch.principal for ev in batches(got) for ch in ev.changes if ch.type == "granted"] == ["worker", "ci"]
    deployer = Client(eps, cafile=s.ca, token=s.tokens["deployer"])
    with pytest.raises(Forbidden):
        next(deployer.watch("elsewhere/"))

    async def main() -> None:
        aw = AsyncClient(eps, cafile=s.ca, token=s.tokens["worker"]).watch(prefix, from_index=batches(got)[0].index)
        async with aw:
            again = await aread_until(aw, lambda evs: any(ev.index >= got[-1].index for ev in evs))
        assert batches(again) == batches(got)

    asyncio.run(asyncio.wait_for(main(), 60))
