"""World 0.3 on a real 3-node cluster (docs/sessions.md): sessions (many
holdings, one keepalive, released together on close or expiry),
reentrant locks, and leader election (campaign, proclaim, resign,
observe), blocking and asyncio."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, List, Optional

import pytest

from lockd_client import AsyncClient, Client, Leader, NoSession, NotHeld
from lockd_client import _session as S
from lockd_client import _watch as W
from lockd_cluster import poll


def test_the_module_is_world_0_3(cluster03):
    st = Client(cluster03.endpoints).status()
    assert "world lockd:sm@0.3.0" in st["module_version"], st["module_version"]


def test_a_session_holds_many_keys_and_its_close_releases_them_all(cluster03, key):
    c = Client(cluster03.endpoints)
    keys = [f"{key}/{i}" for i in range(5)]
    with c.open_session(ttl=10) as s:
        locks = [s.lock(k) for k in keys]
        assert len({lk.token for lk in locks}) == 5
        assert all(lk.session == s.id for lk in locks)
        info = s.info()
        assert info.id == s.id and sorted(info.holdings) == sorted((lk.key, lk.token) for lk in locks)
        assert [h.session for h in c.holders(keys[0])] == [s.id]
        # Held: another holder cannot take them.
        assert Client(cluster03.endpoints).try_lock(keys[0], lease=5) is None
    assert not any(c.get(k).held for k in keys)
    with pytest.raises(NoSession):
        c.session_info(s.id)
    assert not s.lost.is_set()


def test_one_keepalive_renews_every_holding_of_a_session(cluster03, key):
    c = Client(cluster03.endpoints)
    with c.open_session(ttl=1.0) as s:
        a, b = s.lock(key + "/a"), s.lock(key + "/b")
        first = s.deadline
        # Renewed in the background past three TTLs: both still held.
        poll("three TTLs of renewals", lambda: s.deadline > first + 3.0, timeout=30)
        assert s.valid() and not a.lost.is_set()
        assert [h.token for h in c.holders(key + "/a")] == [a.token]
        assert [h.token for h in c.holders(key + "/b")] == [b.token]


def test_an_expired_session_releases_its_holdings_to_their_waiters(cluster03, key):
    c = Client(cluster03.endpoints)
    s = c.open_session(ttl=1.0, keepalive=False)
    held = [s.lock(f"{key}/{i}") for i in range(3)]
    other = Client(cluster03.endpoints, owner="waiter")
    got: List[Any] = []

    def wait_for(k: str) -> None:
        got.append(other.lock(k, lease=10, wait=30, keepalive=False))

    threads = [threading.Thread(target=wait_for, args=(lk.key,)) for lk in held]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(got) == 3 and all(g.token > max(lk.token for lk in held) for g in got)
    with pytest.raises(NoSession):
        s.keepalive()
    for g in got:
        g.release()


def test_a_reentrant_lock_counts_its_entries(cluster03, key):
    c = Client(cluster03.endpoints, owner="reentrant")
    outer = c.lock(key, lease=10, reentrant=True)
    inner = c.lock(key, lease=10, reentrant=True, wait=0)
    assert inner.token == outer.token and (outer.count, inner.count) == (1, 2)
    assert [h.count for h in c.holders(key)] == [2]
    assert inner.release() == 1
    assert c.get(key).held
    assert outer.release() == 0
    assert not c.get(key).held
    # Without reentrant the same holder waits behind itself.
    lk = c.lock(key, lease=10)
    assert c.try_lock(key, lease=10) is None
    lk.release()


def test_a_reentrant_lock_in_a_session(cluster03, key):
    c = Client(cluster03.endpoints)
    with c.open_session(ttl=10) as s:
        a = s.lock(key, reentrant=True)
        b = s.lock(key, reentrant=True)
        assert a.token == b.token and b.count == 2
        assert b.release() == 1 and c.get(key).held
    assert not c.get(key).held


def test_candidates_lead_in_turn_and_an_observer_sees_each_leader_once(cluster03, key):
    name = key + "/election"
    c = Client(cluster03.endpoints)
    seen: List[Optional[Leader]] = []
    obs = c.observe(name)

    def observe() -> None:
        for leader in obs:
            seen.append(leader)

    t = threading.Thread(target=observe, daemon=True)
    t.start()
    first = Client(cluster03.endpoints, owner="first").campaign(name, "10.0.0.1", ttl=5)
    now = c.leader(name)
    assert now is not None and (now.epoch, now.value, now.owner) == (first.token, "10.0.0.1", "first")
    first.proclaim("10.0.0.1:8080")
    assert c.leader(name).value == "10.0.0.1:8080"
    second: List[Any] = []
    waiting = threading.Thread(
        target=lambda: second.append(Client(cluster03.endpoints, owner="second").campaign(name, "10.0.0.2", ttl=5, wait=30))
    )
    waiting.start()
    poll("the second candidate queues", lambda: cluster03.metric(cluster03.wait_leader(), "lockd_lock_waiters"))
    assert first.release() == 0  # resign: the next candidate leads in the same commit
    waiting.join(30)
    assert second and second[0].token > first.token
    assert c.leader(name).epoch == second[0].token
    second[0].release()
    poll("the observer sees the last resignation", lambda: len(seen) >= 5)
    obs.close()
    t.join(10)
    # A grant and its value come in one entry, so each leader is seen
    # once with its value; a resignation that hands over, once.
    assert [None if l is None else (l.epoch, l.value, l.owner) for l in seen] == [
        None,
        (first.token, "10.0.0.1", "first"),
        (first.token, "10.0.0.1:8080", "first"),
        (second[0].token, "10.0.0.2", "second"),
        None,
    ]


def test_a_higher_priority_leads_first_on_world_0_4(cluster04, key):
    name = key + "/election"
    first = Client(cluster04.endpoints, owner="first").campaign(name, "a", ttl=10)
    led: List[Any] = []

    def campaign(owner: str, priority: int) -> threading.Thread:
        c = Client(cluster04.endpoints, owner=owner)
        t = threading.Thread(target=lambda: led.append((owner, c.campaign(name, owner, ttl=10, wait=30, priority=priority))))
        t.start()
        return t

    waiters = lambda: cluster04.metric(cluster04.wait_leader(), "lockd_lock_waiters") or 0  # noqa: E731
    low = campaign("low", 0)
    poll("the first candidate queues", lambda: waiters() >= 1)
    high = campaign("high", 7)
    poll("the second candidate queues", lambda: waiters() >= 2)
    first.release()
    high.join(30)
    assert [o for o, _ in led] == ["high"], "priority 7 goes before the older priority 0"
    led[0][1].release()
    low.join(30)
    assert [o for o, _ in led] == ["high", "low"]
    assert led[1][1].token > led[0][1].token > first.token
    led[1][1].release()


def test_bad_session_arguments_are_refused_before_sending(cluster03):
    c = Client(cluster03.endpoints)
    with pytest.raises(ValueError):
        c.lock("k", lease=1, session=0)
    with pytest.raises(ValueError):
        c.lock("k", lease=1, value="x" * 1025)
    with pytest.raises(ValueError):
        c.open_session(ttl=0)
    for bad in (-1, 2**32, True, 1.5):
        with pytest.raises(ValueError):
            c.campaign("k", "v", ttl=1, priority=bad)
    with pytest.raises(NoSession):
        c.session_info(987654321)
    with pytest.raises(NotHeld):  # a NoSession is a NotHeld
        c.lock("k", lease=1, session=987654321, wait=0)


def test_the_leader_fold_follows_grants_values_and_ends():
    fold = S.LeaderFold("e", None)

    def ev(index: int, *changes: W.Change) -> W.WatchEvent:
        return W.WatchEvent(index=index, changes=list(changes))

    assert fold.apply(W.Progress(index=3)) is S.SAME
    assert fold.apply(ev(4, W.Change("granted", "e/other", 1))) is S.SAME
    # A grant and its value in one entry: one leader, with the value.
    assert fold.apply(ev(5, W.Change("granted", "e", 7, owner="a"), W.Change("value", "e", 7, value="v"))) == Leader(7, "v", None, "a")
    assert fold.apply(ev(6, W.Change("value", "e", 7, value="w"))) == Leader(7, "w", None, "a")
    # A resignation handing over in the same entry: the next leader at once.
    assert fold.apply(ev(7, W.Change("released", "e", 7), W.Change("granted", "e", 9, owner="b"))) == Leader(9, "", None, "b")
    assert fold.apply(ev(8, W.Change("expired", "e", 9))) is None
    assert fold.apply(ev(9, W.Change("value", "e", 9, value="late"))) is S.SAME


def test_the_asyncio_twin(cluster03, key):
    async def main() -> None:
        c = AsyncClient(cluster03.endpoints)
        async with await c.open_session(ttl=10) as s:
            a = await s.lock(key + "/a")
            b = await s.lock(key + "/b", reentrant=True)
            again = await s.lock(key + "/b", reentrant=True)
            assert again.token == b.token and again.count == 2
            assert sorted(k for k, _ in (await s.info()).holdings) == [key + "/a", key + "/b"]
            assert a.session == s.id
        assert not (await c.get(key + "/a")).held and not (await c.get(key + "/b")).held
        name = key + "/election"
        obs = await c.observe(name)
        assert await obs.__anext__() is None
        leadership = await c.campaign(name, "one", ttl=5)
        got = await asyncio.wait_for(obs.__anext__(), 30)
        assert got is not None and got.epoch == leadership.token
        await leadership.proclaim("two")
        while got is None or got.value != "two":
            got = await asyncio.wait_for(obs.__anext__(), 30)
        assert await leadership.release() == 0
        assert await asyncio.wait_for(obs.__anext__(), 30) is None
        await obs.aclose()
        await c.close()

    asyncio.run(main())
