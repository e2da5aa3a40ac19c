from __future__ import annotations

import os
import sys
import uuid
from typing import Callable, Iterator, List

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from lockd_cluster import Cluster, lockd_bin  # noqa: E402


def _started(tmp: str, **kw) -> Cluster:
    c = Cluster(tmp, **kw)
    try:
        return c.start()
    except BaseException:
        c.stop()
        raise


def _with_first_module(tmp: str, **kw) -> Cluster:
    """A new cluster, once every node runs the module it recorded first."""
    c = _started(tmp, **kw)
    try:
        c.wait_first_module()
    except BaseException:
        c.stop()
        raise
    return c


@pytest.fixture(scope="session", autouse=True)
def _binary() -> None:
    lockd_bin()  # fail at once, with the reason, when it is missing


@pytest.fixture(scope="session")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    """A plaintext 3-node cluster started on world 0.1's module (as before
    world 0.2 was built in), shared."""
    c = _started(tmp_path_factory.mktemp("plain"), extra=["--initial-module", "world-0.1"])
    yield c
    c.stop()


@pytest.fixture(scope="session")
def cluster02(tmp_path_factory) -> Iterator[Cluster]:
    """A plaintext 3-node new cluster started on the built-in module of
    world 0.2 (a new cluster's default is world 0.3, a superset)."""
    c = _with_first_module(tmp_path_factory.mktemp("world02"), extra=["--initial-module", "world-0.2"])
    yield c
    c.stop()


@pytest.fixture(scope="session")
def cluster03(tmp_path_factory) -> Iterator[Cluster]:
    """A plaintext 3-node new cluster on the default module (world 0.3:
    sessions, reentrant locks, elections), shared."""
    c = _with_first_module(tmp_path_factory.mktemp("world03"))
    yield c
    c.stop()


@pytest.fixture(scope="session")
def cluster04(tmp_path_factory) -> Iterator[Cluster]:
    """A plaintext 3-node new cluster on the built-in module of world 0.4
    (0.3 and its election policy: priorities, sticky leadership), shared."""
    c = _with_first_module(tmp_path_factory.mktemp("world04"), extra=["--initial-module", "world-0.4"])
    yield c
    c.stop()


@pytest.fixture(scope="session")
def secure_cluster(tmp_path_factory) -> Iterator[Cluster]:
    """A 3-node cluster with TLS everywhere and an auth file (see lockd_cluster.Secure)."""
    c = _started(tmp_path_factory.mktemp("secure"), secure=True)
    yield c
    c.stop()


@pytest.fixture
def new_cluster(tmp_path) -> Iterator[Callable[..., Cluster]]:
    """Start clusters of this test's own (killed and paused at will)."""
    made: List[Cluster] = []

    def make(**kw) -> Cluster:
        c = _started(tmp_path / f"c{len(made)}", **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()


@pytest.fixture
def key(request) -> str:
    """A key no other test uses."""
    return f"py/{request.node.name}/{uuid.uuid4().hex[:8]}"


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        for name in ("cluster", "cluster02", "secure_cluster"):
            c = item.funcargs.get(name)
            if isinstance(c, Cluster):
                rep.sections.append((f"lockd logs ({name}, {c.dir})", c.logs()))
