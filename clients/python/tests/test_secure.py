"""TLS and authentication: a cluster made with `lockd certs init` and
`lockd auth token` (see lockd_cluster.Secure for its principals)."""

from __future__ import annotations

import asyncio
import time

import pytest

from lockd_client import (
    AsyncClient,
    BadRequest,
    Client,
    Forbidden,
    Unauthenticated,
    Unavailable,
)


def test_token_lock_cycle_over_tls(secure_cluster, key):
    s = secure_cluster.secure
    c = Client(secure_cluster.endpoints, cafile=s.ca, token=s.tokens["worker"])
    k = "jobs/" + key
    tokens = []
    for _ in range(2):
        with c.lock(k, lease=1.5) as lk:
            time.sleep(1.2)  # past most of a lease: renewed over TLS with the token
            assert lk.valid(), lk.lost_reason
            info = c.get(k)
            assert info.token == lk.token and info.holders[0].principal == "worker"
            tokens.append(lk.token)
    assert tokens[1] > tokens[0]
    # Bare host:port endpoints mean https once a CA is given.
    bare = Client([n.addr for n in secure_cluster.nodes.values()], cafile=s.ca, token=s.tokens["worker"])
    assert bare.endpoints[0].startswith("https://")
    with bare.lock(k, lease=5) as lk:
        assert lk.token > tokens[1]


def test_a_token_without_read_rights_still_locks(secure_cluster, key):
    """`deployer` may lock under jobs/ but not read status: the client
    cannot look the leader up and relies on the nodes forwarding."""
    s = secure_cluster.secure
    c = Client(secure_cluster.endpoints, cafile=s.ca, token=s.tokens["deployer"])
    with pytest.raises(Forbidden):
        c.status()
    with c.lock("jobs/" + key, lease=5) as lk:
        assert lk.token > 0
    assert c._router.discovery is False


def test_client_certificate(secure_cluster, key):
    s = secure_cluster.secure
    cert, keyfile = s.cert("ci")
    c = Client(secure_cluster.endpoints, cafile=s.ca, certfile=cert, keyfile=keyfile)
    with c.lock("jobs/" + key, lease=5) as lk:
        assert c.get("jobs/" + key).holders[0].principal == "ci"
        assert lk.token > 0
    cert, keyfile = s.cert("stranger")  # a certificate of the CA, with no role
    with pytest.raises(Forbidden):
        Client(secure_cluster.endpoints, cafile=s.ca, certfile=cert, keyfile=keyfile).lock("jobs/" + key, lease=5)


def test_refusals(secure_cluster, key):
    s = secure_cluster.secure
    eps = secure_cluster.endpoints
    with pytest.raises(Unauthenticated) as e:
        Client(eps, cafile=s.ca).lock("jobs/" + key, lease=5)
    assert e.value.status == 401
    with pytest.raises(Unauthenticated):
        Client(eps, cafile=s.ca, token="lkd_" + "0" * 64).lock("jobs/" + key, lease=5)
    deployer = Client(eps, cafile=s.ca, token=s.tokens["deployer"])
    with pytest.raises(Forbidden) as e:
        deployer.lock("other/" + key, lease=5)  # outside its prefix
    assert e.value.status == 403
    # Holder-bound: the token of deployer's lock is no credential for ci.
    lk = deployer.lock("jobs/" + key, lease=10)
    cert, keyfile = s.cert("ci")
    ci = Client(eps, cafile=s.ca, certfile=cert, keyfile=keyfile)
    with pytest.raises(Forbidden) as e:
        ci.release("jobs/" + key, lk.token)
    assert "only its holder" in e.value.message
    assert "deployer" not in e.value.message  # a refusal names no other principal
    assert ci.get("jobs/" + key).holders[0].token is None  # not shown to another principal
    lk.release()


def test_plaintext_and_unknown_ca_are_refused(secure_cluster):
    s = secure_cluster.secure
    plain = [u.replace("https://", "http://") for u in secure_cluster.endpoints]
    with pytest.raises(BadRequest) as e:
        Client(plain, token=s.tokens["worker"]).lock("jobs/x", lease=5)
    assert "requires TLS" in e.value.message
    # Without the cluster's CA the system's CAs do not know the nodes.
    t0 = time.monotonic()
    with pytest.raises(Unavailable) as e:
        Client(secure_cluster.endpoints, token=s.tokens["worker"], retry_for=0.5).lock("jobs/x", lease=5)
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value)
    assert time.monotonic() - t0 < 5


def test_async_over_tls(secure_cluster, key):
    s = secure_cluster.secure

    async def main():
        c = AsyncClient(secure_cluster.endpoints, cafile=s.ca, token=s.tokens["worker"])
        async with c.lock("jobs/" + key, lease=1.5) as lk:
            await asyncio.sleep(1.2)
            assert lk.valid()
            assert (await c.get("jobs/" + key)).token == lk.token
        with pytest.raises(Forbidden):
            await c.lock("other/" + key, lease=5)
        await c.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_token_is_never_sent_in_the_clear_off_loopback():
    # Refused before any connection: the token would cross the network
    # unencrypted, to learn that the node requires TLS.
    with pytest.raises(ValueError) as e:
        Client(["http://10.0.0.1:7400"], token="lkd_secret")
    assert "only over TLS" in str(e.value) and "lkd_secret" not in str(e.value)
    with pytest.raises(ValueError):
        AsyncClient(["node1:7400"], token="lkd_secret")
    # Loopback in the clear, and anything over TLS, may carry it.
    Client(["http://127.0.0.1:7400", "http://localhost:7401"], token="lkd_secret")
