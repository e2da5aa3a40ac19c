"""The asyncio client against a real 3-node cluster."""

from __future__ import annotations

import asyncio
import time

import pytest

from lockd_client import AsyncClient, AsyncLock, Held, NotHeld, Timeout, Unavailable, WrongToken
from lockd_cluster import free_port


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_async_lock_cycles(cluster, key):
    async def main():
        async with AsyncClient(cluster.endpoints) as c:
            tokens = []
            for _ in range(3):
                async with c.lock(key, lease=5) as lk:
                    assert isinstance(lk, AsyncLock) and lk.valid()
                    assert isinstance(lk.lost, asyncio.Event)
                    assert (await c.get(key)).token == lk.token
                    assert await c.try_lock(key, lease=5) is None
                    tokens.append(lk.token)
                assert not (await c.get(key)).held
            assert tokens == sorted(set(tokens))
            lk = await c.lock(key, lease=5, keepalive=False)  # awaited, no block
            with pytest.raises(WrongToken):
                await c.release(key, lk.token + 7)
            await lk.release()
            with pytest.raises(NotHeld):
                await c.keepalive(key, lk.token)
            with pytest.raises(Held):
                async with c.lock(key, lease=5):
                    await c.lock(key, lease=5, wait=0)

    run(main())


def test_async_waiter_and_timeout(cluster, key):
    async def main():
        a, b = AsyncClient(cluster.endpoints), AsyncClient(cluster.endpoints)
        first = await a.lock(key, lease=10)
        waiter = asyncio.ensure_future(b.lock(key, lease=10, wait=30))
        leader = cluster.wait_leader()
        end = time.monotonic() + 15
        while (cluster.metric(leader, "lockd_lock_waiters") or 0) < 1:
            assert time.monotonic() < end, "the waiter never queued"
            await asyncio.sleep(0.02)
        assert not waiter.done()
        with pytest.raises(Timeout):
            await a.lock(key, lease=10, wait=0.3)
        await first.release()
        second = await waiter
        assert second.token > first.token
        await second.release()
        await a.close()
        await b.close()

    run(main())


def test_async_keepalive_past_several_leases(cluster, key):
    async def main():
        c, other = AsyncClient(cluster.endpoints), AsyncClient(cluster.endpoints)
        t0 = time.monotonic()
        async with c.lock(key, lease=1.5) as lk:
            first_deadline = lk.deadline
            while time.monotonic() - t0 < 4.5:
                assert lk.valid(), lk.lost_reason
                await asyncio.sleep(0.1)
            assert lk.deadline > first_deadline + 2.5
            assert (await other.get(key)).token == lk.token
        assert not (await other.get(key)).held

    run(main())


def test_async_lost_when_renewal_refused(cluster, key):
    async def main():
        c = AsyncClient(cluster.endpoints)
        async with c.lock(key, lease=1.5) as lk:
            await c.force_release(key, lk.token)
            await asyncio.wait_for(lk.lost.wait(), 5)
            assert isinstance(lk.lost_reason, NotHeld)
        assert lk.lost.is_set()

    run(main())


def test_a_cancelled_wait_leaves_no_lock(cluster, key):
    """Cancelling a waiting acquire closes its connection: the leader drops
    the waiter, so the key goes to the next caller, not to nobody."""

    async def main():
        c = AsyncClient(cluster.endpoints)
        holder = await c.lock(key, lease=10)
        leader = cluster.wait_leader()
        waiter = asyncio.ensure_future(AsyncClient(cluster.endpoints).lock(key, lease=30, wait=30))
        end = time.monotonic() + 15
        while (cluster.metric(leader, "lockd_lock_waiters") or 0) < 1:
            assert time.monotonic() < end, "the waiter never queued"
            await asyncio.sleep(0.02)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        end = time.monotonic() + 15
        while (cluster.metric(leader, "lockd_lock_waiters") or 0) > 0:
            assert time.monotonic() < end, "the cancelled waiter stayed queued"
            await asyncio.sleep(0.02)
        await holder.release()
        nxt = await c.try_lock(key, lease=5)
        assert nxt is not None and nxt.token > holder.token
        await nxt.release()

    run(main())


def test_async_unavailable():
    async def main():
        c = AsyncClient([f"127.0.0.1:{free_port()}"], retry_for=0.3)
        t0 = time.monotonic()
        with pytest.raises(Unavailable) as e:
            await c.lock("k", 1, wait=0)
        assert time.monotonic() - t0 < 3
        assert "connect call failed" in str(e.value).lower()
        with pytest.raises(ValueError):
            c.lock("", 1)  # checked at the call, before anything is awaited
        with pytest.raises(ValueError):
            c.lock("k", 1, mode="both")

    run(main())
