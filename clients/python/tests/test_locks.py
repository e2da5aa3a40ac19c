"""The blocking client against a real 3-node cluster (world 0.1, plaintext)."""

from __future__ import annotations

import threading
import time

import pytest

from lockd_client import (
    BadRequest,
    Client,
    Held,
    LeaseEnded,
    NotHeld,
    Timeout,
    Unavailable,
    Unsupported,
    WrongToken,
)
from lockd_cluster import free_port, poll


def test_lock_cycles_give_increasing_tokens(cluster, key):
    c = Client(cluster.endpoints)
    other = Client(cluster.endpoints)
    tokens = []
    for _ in range(4):
        with c.lock(key, lease=5) as lk:
            assert lk.valid() and not lk.lost.is_set()
            assert lk.key == key and lk.lease == 5.0
            info = other.get(key)
            assert info.held and info.token == lk.token
            assert other.try_lock(key, lease=5) is None
            tokens.append(lk.token)
        assert not other.get(key).held
        assert not lk.lost.is_set()
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens), tokens


def test_try_lock_and_release_answers(cluster, key):
    c = Client(cluster.endpoints)
    lk = c.try_lock(key, lease=10, keepalive=False)
    assert lk is not None
    with pytest.raises(WrongToken) as e:
        c.release(key, lk.token + 1000)
    assert e.value.status == 409 and str(lk.token + 1000) in e.value.message
    assert e.value.code == "wrong_token"
    assert c.get(key).token == lk.token  # the wrong token changed nothing
    assert c.keepalive(key, lk.token) == 10.0
    lk.release()
    lk.release()  # once only: the second does nothing
    with pytest.raises(NotHeld) as e:
        c.release(key, lk.token)
    assert e.value.status == 404 and not isinstance(e.value, WrongToken)
    assert e.value.code == "not_held"
    with pytest.raises(NotHeld):
        c.keepalive(key, lk.token)
    again = c.try_lock(key, lease=10)
    assert again is not None and again.token > lk.token
    again.release()


def test_waiter_gets_the_lock_after_release(cluster, key):
    a, b = Client(cluster.endpoints), Client(cluster.endpoints)
    first = a.lock(key, lease=10)
    got = {}

    def waiter():
        try:
            got["lock"] = b.lock(key, lease=10, wait=30)
            got["at"] = time.monotonic()
        except BaseException as e:  # reported below
            got["error"] = e

    t = threading.Thread(target=waiter)
    t.start()
    leader = cluster.wait_leader()
    # The waiter is in the leader's queue before the holder lets go.
    poll("the waiter queued", lambda: (cluster.metric(leader, "lockd_lock_waiters") or 0) >= 1)
    assert "lock" not in got
    released = time.monotonic()
    first.release()
    t.join(30)
    assert "error" not in got, got.get("error")
    second = got["lock"]
    assert got["at"] >= released
    assert second.token > first.token
    assert a.get(key).token == second.token
    second.release()


def test_wait_ends_with_timeout(cluster, key):
    c = Client(cluster.endpoints)
    with c.lock(key, lease=10) as lk:
        t0 = time.monotonic()
        with pytest.raises(Timeout) as e:
            c.lock(key, lease=5, wait=0.6)
        assert time.monotonic() - t0 >= 0.6
        assert isinstance(e.value, Held) and e.value.status == 409 and "0.6 s" in str(e.value)
        assert e.value.code == "held"
        with pytest.raises(Held):
            c.lock(key, lease=5, wait=0)
        assert c.get(key).token == lk.token


def test_keepalive_holds_past_several_leases(cluster, key):
    c, other = Client(cluster.endpoints), Client(cluster.endpoints)
    t0 = time.monotonic()
    with c.lock(key, lease=1.5) as lk:
        first_deadline = lk.deadline
        while time.monotonic() - t0 < 5.0:
            assert lk.valid(), f"lost after {time.monotonic() - t0:.2f} s: {lk.lost_reason}"
            time.sleep(0.1)
        # Renewed: the local deadline moved on, and the cluster agrees.
        assert lk.deadline > first_deadline + 3.0
        assert other.get(key).token == lk.token
        assert other.try_lock(key, lease=1) is None
        assert not lk.lost.is_set()
    assert not other.get(key).held


def test_lost_when_a_renewal_is_refused(cluster, key):
    c, admin = Client(cluster.endpoints), Client(cluster.endpoints)
    with c.lock(key, lease=1.5) as lk:
        admin.force_release(key, lk.token)  # the lease is gone now
        assert lk.lost.wait(5.0), "lost was not set"
        assert isinstance(lk.lost_reason, NotHeld), lk.lost_reason
        assert not lk.valid()
        taker = admin.try_lock(key, lease=5)
        assert taker is not None and taker.token > lk.token
    # The block's release found the key held by another token: no error, lost stays set.
    assert lk.lost.is_set()
    assert admin.get(key).token == taker.token
    taker.release()


def test_a_dropped_lock_is_not_renewed(cluster, key):
    c = Client(cluster.endpoints)
    lk = c.lock(key, lease=1.0)
    token = lk.token
    del lk  # no release: the keepalive stops and the lease ends it
    other = Client(cluster.endpoints)
    got = other.lock(key, lease=5, wait=15)
    assert got.token > token
    got.release()


def test_bad_arguments_are_refused_before_sending():
    c = Client([f"127.0.0.1:{free_port()}"], retry_for=0)
    cases = [
        (lambda: c.lock("", 1), ValueError, "must not be empty"),
        (lambda: c.lock(b"k", 1), TypeError, "str"),
        (lambda: c.lock("k", 0), ValueError, "above 0"),
        (lambda: c.lock("k", -1), ValueError, "above 0"),
        (lambda: c.lock("k", float("nan")), ValueError, "finite"),
        (lambda: c.lock("k", 0.0001), ValueError, "1 ms"),
        (lambda: c.lock("k", True), TypeError, "number of seconds"),
        (lambda: c.lock("k", 1, wait=-1), ValueError, "at least 0"),
        (lambda: c.lock("k", 1, mode="excl"), ValueError, "'exclusive' or 'shared'"),
        (lambda: c.lock("k", 1, limit=0), ValueError, "from 1"),
        (lambda: c.lock("k", 1, request_id=""), ValueError, "request_id"),
        (lambda: c.lock("\ud800", 1), ValueError, "UTF-8"),
        (lambda: c.release("k", -1), ValueError, "fencing token"),
        (lambda: c.try_lock("k", 1, wait=3), TypeError, "does not wait"),
        (lambda: Client(["ftp://h:1"]), ValueError, "http or https"),
        (lambda: Client(["http://h:99999"]), ValueError, "99999"),
        (lambda: Client(["http://h:1/v1"]), ValueError, "no path"),
        (lambda: Client([]), ValueError, "no endpoints"),
        (lambda: Client(["h:1"], token="a\nb"), ValueError, "one non-empty line"),
        (lambda: Client(["h:1"], timeout=0), ValueError, "timeout"),
    ]
    for call, exc, text in cases:
        with pytest.raises(exc) as e:
            call()
        assert text in str(e.value), (text, str(e.value))


def test_bad_requests_get_the_nodes_reason(cluster, key):
    c = Client(cluster.endpoints)
    with pytest.raises(BadRequest) as e:
        c.lock("k" * 1025, lease=1)
    assert e.value.status == 400 and "1025 bytes" in e.value.message
    assert e.value.code == "invalid_key"
    with pytest.raises(BadRequest) as e:
        c.lock(key, lease=10**7)
    assert "maximum" in e.value.message and e.value.code == "invalid_lease"
    with pytest.raises(Unsupported) as e:
        c.lock(key, lease=1, mode="shared", limit=3)
    assert e.value.status == 422 and "0.1" in e.value.message
    assert e.value.code == "unsupported"
    assert not c.get(key).held


def test_keys_with_reserved_characters(cluster):
    c = Client(cluster.endpoints)
    for k in ["a/b/c", "sp ace", "q?x=1#frag", "pct%2F", "ünï/ç😀", "/lead", "x/acquire", "x/holders/1",
              "a//b", "a/./b", "../up", "trail/"]:
        with c.lock(k, lease=5) as lk:
            assert c.get(k).token == lk.token, k
            assert k in {i.key for i in c.list(prefix=k).locks}, k
        assert not c.get(k).held, k


def test_no_node_reachable_is_unavailable():
    dead = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
    c = Client(dead, retry_for=0.5, connect_timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(Unavailable) as e:
        c.lock("k", lease=1)
    assert time.monotonic() - t0 < 5
    msg = str(e.value)
    assert all(d in msg for d in dead) and "refused" in msg.lower(), msg


def test_a_follower_endpoint_finds_the_leader(cluster, key):
    leader = cluster.wait_leader()
    follower = next(i for i in cluster.nodes if i != leader)
    c = Client([cluster.url(follower)])
    with c.lock(key, lease=5) as lk:
        assert lk.token > 0
    # The members came from status: the client knows every node now.
    assert set(c.endpoints) == set(cluster.endpoints)
    assert c._router.pick().url == cluster.url(leader)


def test_lease_ended_while_unreachable(new_cluster, key):
    """A keepalive that cannot get through before the lease ends sets lost."""
    cl = new_cluster()
    c = Client(cl.endpoints, timeout=0.5)
    lk = c.lock(key, lease=1.5)
    for i in cl.nodes:
        cl.pause(i)
    try:
        assert lk.lost.wait(5.0)
        assert isinstance(lk.lost_reason, LeaseEnded), lk.lost_reason
        # Set at the local deadline, not after a long retry.
        assert time.monotonic() - lk.deadline < 1.0
    finally:
        for i in cl.nodes:
            cl.resume(i)
