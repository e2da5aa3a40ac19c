"""Fixtures of the console's browser test: real lockd processes on loopback
(harness.py) and a headless Chromium driven by Selenium (chromedriver)."""

import contextlib
import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from devserver import DevServer  # noqa: E402
from harness import Cluster, chrome  # noqa: E402

# Set (by scripts/test-console.sh --from-file) to test a page file through
# devserver.py instead of the page compiled into lockd.
PAGE_FILE = os.environ.get("LOCKD_CONSOLE_FILE")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
def cluster_factory(tmp_path, request):
    """make(n, token=..., extra=[...]) starts an n-node cluster; every node
    is SIGKILLed at the end, and a failed test prints their logs' tails."""
    made = []

    def make(n, **kw):
        c = Cluster(tmp_path / f"cluster{len(made)}", n, **kw)
        made.append(c)
        return c

    yield make
    rep = getattr(request.node, "rep_call", None)
    for c in made:
        if rep is not None and rep.failed:
            print(f"\n--- nodes of the failed test (logs kept in {c.dir}) ---\n{c.describe()}")
        c.close()


@pytest.fixture(scope="session")
def browser():
    driver = chrome()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def console(browser):
    """open(addr) loads the console of the node at `addr` (through
    devserver.py when LOCKD_CONSOLE_FILE is set) and returns the URL."""
    servers = []

    def open_console(addr):
        if PAGE_FILE:
            s = DevServer(PAGE_FILE, addr)
            servers.append(s)
            addr = s.addr
        url = f"http://{addr}/ui"
        browser.get(url)
        if not browser.execute_script("return !!document.getElementById('members')"):
            raise AssertionError(f"GET {url} is not the console (a lockd built before host/ui/console.html? "
                                 f"rebuild it, or test the file with --from-file): {browser.page_source[:300]!r}")
        return url

    yield open_console
    # A fresh page state for the next test (sessionStorage is per tab).
    with contextlib.suppress(Exception):
        browser.execute_script("sessionStorage.clear()")
        browser.get("about:blank")
    for s in servers:
        s.close()
