"""World 0.2's options (shared locks, semaphores, owners, request ids,
listing, policy) on new clusters, which run the built-in 0.2 module."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from lockd_client import AsyncClient, Client, Forbidden, TooManyRequests


def test_the_module_is_world_0_2(cluster02):
    st = Client(cluster02.endpoints).status()
    assert "world lockd:sm@0.2.0" in st["module_version"], st["module_version"]


def test_readers_without_a_limit_share(cluster02, key):
    c = Client(cluster02.endpoints)
    a = c.lock(key, lease=10, mode="shared", owner="a")
    b = c.lock(key, lease=10, mode="shared", owner="b")
    assert a.limit is None and b.token > a.token
    assert [h.limit for h in c.holders(key)] == [1024, 1024]
    assert c.try_lock(key, lease=10) is None  # a writer waits for both
    # An explicit shared limit of 1 is sent as such: a reader of one.
    one = c.lock(key + "/one", lease=10, mode="shared", limit=1, owner="a")
    assert c.try_lock(key + "/one", lease=10, mode="shared", limit=1, owner="b") is None
    for lk in (a, b, one):
        lk.release()


def test_readers_share_and_a_writer_waits(cluster02, key):
    c = Client(cluster02.endpoints)
    readers = [c.lock(key, lease=10, mode="shared", limit=3, owner=f"r{i}") for i in range(3)]
    assert len({r.token for r in readers}) == 3
    assert all(r.mode == "shared" and r.limit == 3 for r in readers)
    assert c.try_lock(key, lease=10, mode="shared", limit=3) is None  # no fourth reader
    assert c.try_lock(key, lease=10) is None  # a writer waits for every reader
    holders = c.holders(key)
    assert [h.token for h in holders] == [r.token for r in readers]
    assert [h.owner for h in holders] == ["r0", "r1", "r2"]
    assert all(h.mode == "shared" and h.limit == 3 and h.principal == "" for h in holders)
    assert all(h.lease_left is not None and 0 < h.lease_left <= h.lease == 10 for h in holders), holders
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("w", c.lock(key, lease=10, wait=30)))
    t.start()
    for r in readers[:2]:
        r.release()
    time.sleep(0.2)
    assert "w" not in got  # one reader still holds
    readers[2].release()
    t.join(30)
    writer = got["w"]
    assert writer.token > max(r.token for r in readers)
    assert [h.mode for h in c.holders(key)] == ["exclusive"]
    writer.release()


def test_a_semaphore_has_its_slots(cluster02, key):
    c = Client(cluster02.endpoints)
    a = c.lock(key, lease=10, limit=2)
    b = c.lock(key, lease=10, limit=2)
    assert c.try_lock(key, lease=10, limit=2) is None
    assert {h.token for h in c.holders(key)} == {a.token, b.token}
    a.release()
    third = c.try_lock(key, lease=10, limit=2)
    assert third is not None and third.token > b.token
    b.release()
    third.release()
    assert not c.get(key).held


def test_the_same_request_id_gets_the_same_grant(cluster02, key):
    """What makes the client's retries of an acquire safe: the module
    answers a repeat (same owner, same request id) with the grant that
    committed, never a second one."""
    c = Client(cluster02.endpoints, owner="idem")
    first = c.lock(key, lease=10, request_id="req-1", keepalive=False)
    again = c.lock(key, lease=10, request_id="req-1", wait=0, keepalive=False)
    assert again.token == first.token
    assert [h.request_id for h in c.holders(key)] == ["req-1"]
    assert c.try_lock(key, lease=10, request_id="req-2") is None  # another request waits
    other_owner = Client(cluster02.endpoints, owner="someone-else")
    assert other_owner.try_lock(key, lease=10, request_id="req-1") is None
    first.release()


def test_listing_pages(cluster02, key):
    c = Client(cluster02.endpoints)
    locks = [c.lock(f"{key}/{i}", lease=10) for i in range(5)]
    page = c.list(prefix=key + "/", limit=2)
    seen = [i.key for i in page.locks]
    while page.next is not None:
        page = c.list(prefix=key + "/", after=page.next, limit=2)
        seen += [i.key for i in page.locks]
    assert seen == [f"{key}/{i}" for i in range(5)]
    assert all(i.held and i.holders for i in c.list(prefix=key + "/").locks)
    for lk in locks:
        lk.release()
    assert c.list(prefix=key + "/").locks == []


def test_policy_caps_refuses_and_counts(cluster02, key):
    c = Client(cluster02.endpoints)
    rules = [
        {"prefix": f"{key}/capped/", "max_lease_ms": 2000},
        {"prefix": f"{key}/frozen/", "reserved": True},
        {"prefix": f"{key}/quota/", "max_held": 1},
    ]
    c.set_policy(rules)
    try:
        assert [r["prefix"] for r in c.policy()] == sorted(r["prefix"] for r in rules)
        with c.lock(f"{key}/capped/x", lease=60) as lk:
            assert lk.lease == 2.0  # shortened by the policy, renewed at its pace
            assert lk.deadline - time.monotonic() <= 2.0
        with pytest.raises(Forbidden) as e:
            c.lock(f"{key}/frozen/x", lease=5)
        assert "reserved" in e.value.message
        with c.lock(f"{key}/quota/a", lease=5):
            with pytest.raises(TooManyRequests) as e:
                c.lock(f"{key}/quota/b", lease=5)
            assert e.value.status == 429 and "quota" in e.value.message
    finally:
        c.set_policy([])
    assert c.policy() == []


def test_async_shared_and_semaphore(cluster02, key):
    async def main():
        c = AsyncClient(cluster02.endpoints)
        async with c.lock(key, lease=5, mode="shared", limit=2, owner="a") as r1:
            async with c.lock(key, lease=5, mode="shared", limit=2, owner="b") as r2:
                assert await c.try_lock(key, lease=5) is None
                hs = await c.holders(key)
                assert sorted(h.owner for h in hs) == ["a", "b"]
                assert {h.token for h in hs} == {r1.token, r2.token}
        slots = [await c.lock(key + "/sem", lease=5, limit=3) for _ in range(3)]
        assert await c.try_lock(key + "/sem", lease=5, limit=3) is None
        for s in slots:
            await s.release()
        page = await c.list(prefix=key)
        assert page.locks == []

    asyncio.run(asyncio.wait_for(main(), 60))


def test_leader_killed_during_idempotent_acquires(new_cluster, key):
    """On world 0.2 an acquire carries a request id: through a leader kill
    every acquire ends with a grant (none reported unknown), and each key
    has exactly one holder, the one that got its token."""
    cl = new_cluster()
    cl.wait_first_module()
    leader = cl.wait_leader()
    endpoints = [cl.url(leader)] + [cl.url(i) for i in cl.nodes if i != leader]
    results, errors = [], []
    stop = threading.Event()
    n_keys = 6

    def worker(w):
        c = Client(endpoints, retry_for=20)
        i = 0
        while not stop.is_set():
            k = f"{key}/{w}/{i}"
            try:
                lk = c.lock(k, lease=30, wait=0, keepalive=False)
                results.append((k, lk.token))
            except Exception as e:
                errors.append(f"{k}: {e!r}")
                return
            i += 1
            if i >= 200:
                return

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(n_keys)]
    for t in threads:
        t.start()
    end = time.monotonic() + 30
    while len(results) < 30 and time.monotonic() < end and not errors:
        time.sleep(0.01)
    cl.kill(leader)
    at_kill = len(results)
    cl.wait_leader(without=leader)
    while len(results) < at_kill + 30 and time.monotonic() < end + 30 and not errors:
        time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(results) >= at_kill + 30
    c = Client([cl.url(i) for i in cl.nodes if i != leader])
    for k, token in results:
        hs = c.holders(k)
        assert [h.token for h in hs] == [token], (k, token, hs)
