"""The web console (GET /ui) in a real headless Chromium against real lockd
processes: members, the leader and a lock appear; after the leader is
SIGKILLed the page shows the new one; with authentication on it asks for a
bearer token, a read-only viewer sees no force release, and an admin's
force release ends the holding. The held locks follow the watch: another
client's lock appears and goes, the lease left counts down between reads,
nothing is read while nothing changes, and the watch comes back after its
node restarts.

Every wait polls the DOM (one script call reads the page's state) with a
generous timeout; nothing sleeps to synchronise."""

import os
import re

from harness import ROOT, auth_token, http, wait_for

SHOTS = ROOT / "target" / "browser"

# One read of what the page shows, from the DOM the user sees.
PAGE_STATE = r"""
const q = (s) => Array.from(document.querySelectorAll(s));
const byId = (i) => document.getElementById(i);
return {
  title: document.title,
  node: byId('node-title') && byId('node-title').textContent,
  role: byId('node-role') && byId('node-role').dataset.role,
  leader: byId('leader') ? byId('leader').dataset.leader : undefined,
  members: q('#members tbody tr[data-id]').map(r => ({id: Number(r.dataset.id), role: r.dataset.role,
            health: r.dataset.health})),
  locks: q('#locks tbody tr[data-key]').map(r => ({key: r.dataset.key, token: r.dataset.token,
          text: r.textContent, leaseLeft: (r.querySelector('[data-testid=lease-left]') || {}).textContent,
          buttons: r.querySelectorAll('button[data-action=force-release]').length})),
  login: !!byId('login') && !byId('login').classList.contains('hidden'),
  loginErr: byId('login-err') ? byId('login-err').textContent : '',
  whoami: byId('whoami') ? byId('whoami').textContent : '',
  admin: byId('whoami') ? byId('whoami').dataset.admin : undefined,
  series: q('#sparks [data-series]').map(e => e.dataset.series),
  audit: byId('audit-status') ? byId('audit-status').dataset.state : undefined,
  moduleHash: (document.querySelector('[data-testid=module-hash]') || {}).textContent || '',
  failures: (document.querySelector('[data-testid=module-failures]') || {dataset: {}}).dataset.total,
  failuresText: (document.querySelector('[data-testid=module-failures]') || {}).textContent || '',
  wayBack: (document.querySelector('[data-testid=module-way-back]') || {}).textContent || '',
  previous: (document.querySelector('[data-testid=module-way-back]') || {dataset: {}}).dataset.previous,
  outOfService: byId('out-of-service') && !byId('out-of-service').classList.contains('hidden')
    ? byId('out-of-service').textContent : '',
  clusterId: (document.querySelector('[data-testid=cluster-id]') || {}).textContent || '',
  engineImpl: (document.querySelector('[data-testid=engine-implementation]') || {}).textContent || '',
  adminActions: byId('admin-actions') ? byId('admin-actions').tBodies[0].textContent : '',
  locksErr: byId('locks-err') ? byId('locks-err').textContent : '',
  stored: sessionStorage.getItem('lockd.token'),
  watch: byId('watch-state') ? byId('watch-state').dataset.state : undefined,
  watchText: byId('watch-state') ? byId('watch-state').textContent : '',
  watchTitle: byId('watch-state') ? byId('watch-state').title : '',
  watchId: byId('watch-state') && byId('watch-state').dataset.lastId ? Number(byId('watch-state').dataset.lastId) : -1,
  pageInfo: byId('page-info') ? byId('page-info').textContent : '',
  listed: byId('locks') ? byId('locks').dataset.prefix : undefined,
  pageReads: byId('locks') ? Number(byId('locks').dataset.reads || 0) : 0,
  listedIndex: byId('locks') && byId('locks').dataset.index ? Number(byId('locks').dataset.index) : -1,
  watchFrom: byId('watch-state') && byId('watch-state').dataset.from ? Number(byId('watch-state').dataset.from) : null,
  updatedAt: byId('updated') ? Number(byId('updated').dataset.at || 0) : 0,
  // Every request the page made, by path, as the browser itself records
  // them (Resource Timing: whatever code made the request).
  requests: performance.getEntriesByType('resource').reduce((n, e) => {
    const p = new URL(e.name).pathname; n[p] = (n[p] || 0) + 1; return n; }, {}),
};
"""


def page(browser):
    return browser.execute_script(PAGE_STATE)


def wait_page(browser, what, check, timeout=45.0):
    """Poll the page until check(state) holds; a timeout shows the last state."""
    last = {}

    def poll():
        s = page(browser)
        last["state"] = s
        return s if check(s) else None

    try:
        return wait_for(what, poll, timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}\nthe page showed: {last.get('state')}") from None


def roles(s):
    return {m["id"]: m["role"] for m in s["members"]}


def health(s):
    return {m["id"]: m["health"] for m in s["members"]}


def tokens(s):
    return {l["key"]: l["token"] for l in s["locks"]}


def lease_left_s(s, key):
    """The lease left the page shows for key, in seconds (None: not shown)."""
    for l in s["locks"]:
        m = re.fullmatch(r"([0-9.]+) s", l["key"] == key and l["leaseLeft"] or "")
        if m:
            return float(m.group(1))
    return None


def shot(browser, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / name))


def acquire(addr, key, lease_ms, token=None):
    code, body = http(addr, "POST", f"/v1/locks/{key}/acquire", {"lease_ms": lease_ms}, token=token)
    assert code == 200, (code, body)
    return body["token"]


def release(addr, key, tok, token=None):
    code, body = http(addr, "POST", f"/v1/locks/{key}/release", {"token": tok}, token=token)
    assert code == 200, (code, body)


def list_reads(s):
    """How many GET /v1/locks the page has made, as the browser recorded
    them."""
    return s["requests"].get("/v1/locks", 0)


def reads_settled(s):
    """The browser's record has every list read the page says it got an
    answer to (the two may be apart for an instant)."""
    return list_reads(s) == s["pageReads"] >= 1


def open_watched(console, browser, addr):
    """The console of `addr`, once its watch is live and it read the list."""
    console(addr)
    # Room for every request of a test (the browser keeps 250 by default,
    # then drops the rest, which would read as no request made).
    browser.execute_script("performance.setResourceTimingBufferSize(1000000)")
    return wait_page(browser, "the watch to be live and the list read",
                     lambda s: s["watch"] == "live" and s["pageInfo"] and reads_settled(s))


def no_page_errors(browser):
    """No script error and no refusal by the page's CSP in the browser's log."""
    errors = [l for l in browser.get_log("browser")
              if re.search(r"Uncaught|Content Security Policy", l.get("message", ""))]
    assert not errors, errors


def test_cluster_view_follows_a_leader_kill(cluster_factory, console, browser):
    cluster = cluster_factory(3)
    leader = cluster.leader()
    key = "console/db-primary"
    tok = acquire(cluster.nodes[leader].addr, key, 120_000)
    # The page of a follower: it survives the leader's death.
    follower = next(n for n in cluster.nodes.values() if n.id != leader)
    console(follower.addr)

    s = wait_page(browser, "the page to show 3 members, the leader and the lock", lambda s: (
        roles(s) == {i: ("leader" if i == leader else "follower") for i in (1, 2, 3)}
        and s["leader"] == str(leader) and s["role"] == "follower"
        and tokens(s).get(key) == str(tok) and s["audit"] == "equal"
        # The lease left on the leader's clock, not the 120 s granted.
        and (lease_left_s(s, key) or 120) < 120
        and "grants /s" in s["series"] and len(s["moduleHash"]) == 64
        # Every other member answers this browser (its /readyz, or at
        # least its /healthz).
        and all(health(s)[i] in ("ready", "answers") for i in (1, 2, 3) if i != follower.id)))
    assert s["title"] == f"lockd node {follower.id} (follower)", s["title"]
    # The serving node's engine implementation, as its /v1/status reports it.
    code, st = http(follower.addr, "GET", "/v1/status")
    assert code == 200, (code, st)
    assert st["engine_implementation"], st
    assert s["engineImpl"] == st["engine_implementation"], (s["engineImpl"], st["engine_implementation"])
    assert len(st["cluster_id"]) == 32 and s["clusterId"] == st["cluster_id"], (s["clusterId"], st)
    assert lease_left_s(s, key) > 60, s["locks"]
    shot(browser, "console-before-kill.png")

    cluster.nodes[leader].kill()
    new = cluster.leader(timeout=45)
    assert new != leader

    # The lock survived the failover with its token, read through the new
    # leader.
    wait_page(browser, f"the page to show node {new} as the new leader", lambda s: (
        s["leader"] == str(new) and roles(s).get(new) == "leader" and roles(s).get(leader) != "leader"
        and sorted(roles(s)) == [1, 2, 3] and tokens(s).get(key) == str(tok)
        and health(s)[leader] == "no answer"))
    errors = [l for l in browser.get_log("browser") if "Uncaught" in l.get("message", "")]
    assert not errors, errors
    shot(browser, "console-after-kill.png")


def test_token_prompt_viewer_and_admin_force_release(cluster_factory, console, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    admin, admin_hash = auth_token("admin")
    viewer, viewer_hash = auth_token("viewer")
    rules = tmp_path / "auth.toml"
    rules.write_text(f"""
[principals.admin]
roles = ["admin"]
tokens = ["{admin_hash}"]

[principals.viewer]
roles = ["read"]
tokens = ["{viewer_hash}"]
""")
    cluster = cluster_factory(1, token=admin, extra=["--auth-file", str(rules)])
    node = cluster.nodes[cluster.leader()]
    # Authentication is really on: no token, no status.
    assert http(node.addr, "GET", "/v1/status")[0] == 401
    key = "jobs/nightly"
    tok = acquire(node.addr, key, 120_000, token=admin)

    console(node.addr)
    s = wait_page(browser, "the token prompt", lambda s: s["login"])
    assert s["members"] == [] and s["locks"] == [], s

    def sign_in(t):
        box = browser.find_element(By.ID, "token-input")
        box.clear()
        box.send_keys(t)
        browser.find_element(By.ID, "token-submit").click()

    sign_in("lkd_ é")
    wait_page(browser, "the page to refuse a token that cannot be a header",
              lambda s: s["login"] and "printable ASCII" in s["loginErr"] and s["stored"] is None)
    sign_in("lkd_" + "0" * 64)
    wait_page(browser, "the page to say the token was refused",
              lambda s: s["login"] and "refused this token (401)" in s["loginErr"])

    # A viewer: sees the lock, not its token, and no force release.
    sign_in(viewer)

    def viewer_page(s):
        lock = next((l for l in s["locks"] if l["key"] == key), None)
        return (not s["login"] and s["whoami"] == "signed in as viewer (read-only)" and s["admin"] == "false"
                and lock is not None and lock["token"] == "" and "hidden" in lock["text"]
                and "admin" in lock["text"] and lock["buttons"] == 0 and list(roles(s)) == [1])

    s = wait_page(browser, "the viewer's page", viewer_page)
    assert s["stored"] == viewer
    # The token is kept for the tab: a reload stays signed in.
    browser.refresh()
    wait_page(browser, "the viewer's page after a reload", viewer_page)

    # Forget it; sign in as the admin.
    browser.find_element(By.ID, "signout-btn").click()
    wait_page(browser, "the token prompt again", lambda s: s["login"] and s["stored"] is None)
    sign_in(admin)

    wait_page(browser, "the admin's page with a force release button", lambda s: (
        s["admin"] == "true" and any(l["key"] == key and l["token"] == str(tok) and l["buttons"] == 1
                                     for l in s["locks"])))
    shot(browser, "console-admin.png")
    browser.find_element(By.CSS_SELECTOR, f'#locks tr[data-key="{key}"] button[data-action=force-release]').click()
    WebDriverWait(browser, 10).until(EC.alert_is_present())
    alert = browser.switch_to.alert
    assert key in alert.text and str(tok) in alert.text, alert.text
    alert.accept()

    wait_page(browser, "the lock to leave the page",
              lambda s: key not in tokens(s) and not s["locksErr"])
    code, body = http(node.addr, "GET", f"/v1/locks/{key}", token=admin)
    assert code == 200 and body["held"] is False, (code, body)
    # The node recorded the admin action; the page shows it.
    wait_page(browser, "the force release in the admin actions",
              lambda s: f"DELETE /v1/locks/{key}/holders/{tok}" in s["adminActions"])


def test_page_is_self_contained():
    """No external resource: the page loads nothing but its node's API."""
    text = (ROOT / "host/ui/console.html").read_text()
    for pattern in (r"https?://(?!www\.w3\.org/2000/svg)", r"""(?:src|href)\s*=\s*["'](?!data:)""",
                    r"@import", r"url\(", r"<script[^>]+src"):
        hits = [l.strip() for l in text.splitlines() if re.search(pattern, l)]
        assert not hits, f"{pattern!r} in console.html: {hits}"
    assert os.path.getsize(ROOT / "host/ui/console.html") < 64 * 1024


OLD_COUNTERS = """# HELP lockd_lock_grants_total Grants committed by this node as leader.
# TYPE lockd_lock_grants_total counter
lockd_lock_grants_total{node="1"} 5
lockd_lock_releases_total{node="1"} 4
lockd_locks_held{node="1"} 1
"""
NEW_COUNTERS = """lockd_lock_events_total{node="1",event="grant"} 7
lockd_lock_events_total{node="1",event="release"} 6 1700000000000
lockd_lock_grants_total{node="1"} 99
"""
HIST_PREV = """# TYPE lockd_acquire_duration_seconds histogram
lockd_acquire_duration_seconds_bucket{node="1",result="granted",le="0.01"} 10
lockd_acquire_duration_seconds_bucket{node="1",result="granted",le="0.1"} 10
lockd_acquire_duration_seconds_bucket{node="1",result="granted",le="+Inf"} 10
lockd_acquire_duration_seconds_sum{node="1",result="granted"} 0.05
lockd_acquire_duration_seconds_count{node="1",result="granted"} 10
"""
# 100 more observations: 90 at most 10 ms (80 granted, 10 busy), 10 in (10 ms, 100 ms].
HIST_CUR = """lockd_acquire_duration_seconds_bucket{node="1",result="busy",le="+Inf"} 10
lockd_acquire_duration_seconds_bucket{node="1",result="busy",le="0.1"} 10
lockd_acquire_duration_seconds_bucket{node="1",result="busy",le="0.01"} 10
lockd_acquire_duration_seconds_bucket{node="1",result="granted",le="0.01"} 90
lockd_acquire_duration_seconds_bucket{node="1",result="granted",le="0.1"} 100
lockd_acquire_duration_seconds_bucket{node="1",result="granted",le="+Inf"} 100
lockd_acquire_duration_seconds_sum{node="1",result="granted"} 1.05
lockd_acquire_duration_seconds_count{node="1",result="granted"} 100
lockd_acquire_duration_seconds_sum{node="1",result="busy"} 0.05
lockd_acquire_duration_seconds_count{node="1",result="busy"} 10
odd_metric{a="q\\"uote,}",b="x\\\\y"} 3
broken line without value
lockd_nan{node="1"} NaN
"""


def test_metrics_text_read_generically(cluster_factory, console, browser):
    """The page's Prometheus reader, in the page itself: old and new names
    of the lock counters, a series that is absent, histograms summed over
    their labels, quantiles between two scrapes, awkward label values."""
    cluster = cluster_factory(1)
    console(cluster.nodes[cluster.leader()].addr)
    wait_for("the page's reader", lambda: browser.execute_script("return !!window.lockdConsole"))
    read = lambda text: browser.execute_script("return window.lockdConsole.read(arguments[0])", text)  # noqa: E731

    old = read(OLD_COUNTERS)
    assert old["counters"]["grants /s"] == 5 and old["counters"]["releases /s"] == 4
    assert old["counters"]["expires /s"] is None and old["gauges"]["waiters"] is None
    assert old["gauges"]["locks held"] == 1 and old["histograms"] == {}
    new = read(NEW_COUNTERS)
    assert new["counters"]["grants /s"] == 7 and new["counters"]["releases /s"] == 6

    assert read("")["counters"]["grants /s"] is None
    h = read(HIST_CUR)["histograms"]
    assert list(h) == ["lockd_acquire_duration_seconds"], h
    a = h["lockd_acquire_duration_seconds"]
    assert a["count"] == 110 and abs(a["sum"] - 1.10) < 1e-9
    assert a["buckets"][:2] == [[0.01, 100], [0.1, 110]], a["buckets"]
    q = lambda x: browser.execute_script(  # noqa: E731
        "return window.lockdConsole.quantile(arguments[0], arguments[1], arguments[2], arguments[3])",
        x, HIST_PREV, HIST_CUR, "lockd_acquire_duration_seconds")
    # Between the scrapes: 100 observations, 90 up to 10 ms, 10 up to 100 ms.
    assert abs(q(0.99) - (0.01 + 0.09 * (99 - 90) / 10)) < 1e-9
    assert abs(q(0.5) - 0.01 * 50 / 90) < 1e-9
    # The node's own text parses too, whatever it holds today.
    text = http(cluster.nodes[1].addr, "GET", "/metrics")[1]
    live = read(text)
    assert live["gauges"]["locks held"] == 0 and live["counters"]["grants /s"] is not None


def test_held_locks_follow_the_watch(cluster_factory, console, browser):
    """Another client's lock appears as the watch reports it and goes when
    released; between list reads the page counts the lease down itself."""
    cluster = cluster_factory(3)
    leader = cluster.nodes[cluster.leader()]
    # The page of a follower: the follower answers the watch, the leader
    # the list (forwarded).
    follower = next(n for n in cluster.nodes.values() if n.id != leader.id)
    open_watched(console, browser, follower.addr)

    key = "watched/deploy"
    tok = acquire(leader.addr, key, 120_000)
    s = wait_page(browser, "the lock another client took, with its lease left", lambda s: (
        tokens(s).get(key) == str(tok) and lease_left_s(s, key) is not None and reads_settled(s)), timeout=10)
    first, reads = lease_left_s(s, key), list_reads(s)
    assert 100 < first <= 120, s["locks"]
    s = wait_page(browser, "the lease left to count down", lambda s: (
        lease_left_s(s, key) is not None and lease_left_s(s, key) <= first - 2), timeout=10)
    assert list_reads(s) == reads, f"the list was read again while nothing changed: {s['requests']}"
    assert s["watch"] == "live" and s["watchText"] == "live", s["watchText"]
    shot(browser, "console-watch.png")

    release(leader.addr, key, tok)
    wait_page(browser, "the released lock to leave the page",
              lambda s: key not in tokens(s) and not s["locksErr"], timeout=10)
    no_page_errors(browser)


def test_nothing_read_while_nothing_changes(cluster_factory, console, browser):
    """With a prefix shown and a change outside it, the page reads no list
    until the watch's idle progress has passed that change (so the stream
    was open and quiet all along); meanwhile the status poll goes on and
    the lease left counts down. A change under the prefix is read at once."""
    from selenium.webdriver.common.by import By

    cluster = cluster_factory(1)
    node = cluster.nodes[cluster.leader()]
    key = "quiet/held"
    tok = acquire(node.addr, key, 120_000)
    open_watched(console, browser, node.addr)
    box = browser.find_element(By.ID, "prefix")
    box.send_keys("quiet/")
    browser.find_element(By.CSS_SELECTOR, "#locks-form button[type=submit]").click()
    s = wait_page(browser, "the page to list and watch quiet/", lambda s: (
        s["watch"] == "live" and '"quiet/"' in s["watchTitle"] and s["listed"] == "quiet/"
        and tokens(s) == {key: str(tok)} and lease_left_s(s, key) is not None and reads_settled(s)))
    reads, polls, lease = list_reads(s), s["requests"].get("/v1/status", 0), lease_left_s(s, key)

    acquire(node.addr, "elsewhere/job", 120_000)
    code, body = http(node.addr, "GET", "/v1/locks?prefix=elsewhere/")
    assert code == 200 and body["locks"], (code, body)
    index = body["index"]
    s = wait_page(browser, f"the watch's progress past index {index}",
                  lambda s: s["watchId"] >= index, timeout=20)
    assert list_reads(s) == reads, f"the list was read while nothing under the prefix changed: {s['requests']}"
    assert s["requests"].get("/v1/status", 0) >= polls + 3, (polls, s["requests"])
    assert lease_left_s(s, key) <= lease - 3, (lease, s["locks"])
    assert "elsewhere/job" not in tokens(s)

    release(node.addr, key, tok)
    s = wait_page(browser, "the release under the prefix to show", lambda s: key not in tokens(s), timeout=10)
    assert list_reads(s) > reads
    no_page_errors(browser)


def test_watch_comes_back_after_its_node_restarts(cluster_factory, console, browser):
    """The page's node is SIGKILLed: the watch says it is reconnecting; the
    node restarts and a lock is released and another taken: the page is
    live again and shows what the node holds now."""
    cluster = cluster_factory(1)
    node = cluster.nodes[cluster.leader()]
    gone = acquire(node.addr, "back/gone", 120_000)
    open_watched(console, browser, node.addr)
    wait_page(browser, "the lock", lambda s: tokens(s).get("back/gone") == str(gone))

    node.kill()
    s = wait_page(browser, "the watch to say it is reconnecting", lambda s: s["watch"] == "reconnecting")
    assert s["watchText"].startswith("reconnecting… ("), s["watchText"]
    node.start()
    cluster.leader()
    release(node.addr, "back/gone", gone)
    new = acquire(node.addr, "back/new", 120_000)
    wait_page(browser, "the page live again with the node's locks now", lambda s: (
        s["watch"] == "live" and tokens(s) == {"back/new": str(new)} and not s["locksErr"]))
    # And it goes on following: a change after the restart.
    release(node.addr, "back/new", new)
    wait_page(browser, "the last release", lambda s: s["watch"] == "live" and tokens(s) == {}, timeout=10)

    # "live" unticked ends the stream (the node counts no watcher); ticked,
    # it is opened again.
    from selenium.webdriver.common.by import By

    def watchers():
        m = re.search(r"^lockd_watchers(?:\{[^}]*\})? ([0-9.]+)", http(node.addr, "GET", "/metrics")[1], re.M)
        return float(m.group(1))

    assert watchers() == 1
    browser.find_element(By.ID, "live").click()
    wait_page(browser, "the watch paused", lambda s: s["watch"] == "paused")
    wait_for("the node to count no watcher", lambda: watchers() == 0)
    browser.find_element(By.ID, "live").click()
    wait_page(browser, "the watch live again", lambda s: s["watch"] == "live")
    wait_for("the node to count the watcher again", lambda: watchers() == 1)


def test_sse_read_in_the_page(cluster_factory, console, browser):
    """The watch's SSE parser, in the page: \\n and \\r\\n line ends, comments,
    pieces that end mid-line (even between \\r and \\n), data on several
    lines, a field without a colon, unknown fields, and a message not yet
    ended by its blank line."""
    cluster = cluster_factory(1)
    console(cluster.nodes[cluster.leader()].addr)
    wait_for("the page's reader", lambda: browser.execute_script("return !!window.lockdConsole"))
    sse = lambda pieces: browser.execute_script("return window.lockdConsole.sse(arguments[0])", pieces)  # noqa: E731

    got = sse([": keep-alive\r\n", "event: progress\r\nid: 4\r", "\ndata: {\"index\":4}\r\n\r\n",
               "event: chan", "ges\nid:5\ndata: a\ndata:b\nretry: 10\n\n", "data\n\n", "foo: bar\n\n",
               "event: cut\ndata: {}\n"])
    assert got == [
        {"event": "progress", "id": "4", "data": '{"index":4}'},
        {"event": "changes", "id": "5", "data": "a\nb"},
        {"event": "message", "id": None, "data": ""},
    ], got
    assert sse(["event: cut\ndata: {}\n", "\n"]) == [{"event": "cut", "id": None, "data": "{}"}]


def test_a_cut_watch_reads_the_list_and_resumes_from_its_index(cluster_factory, console, browser):
    """A node that keeps one change (--watch-history 1) cuts a watcher when
    an entry of two changes is applied (a release handed to a waiter): the
    page reads the list again, shows the new holder, and watches again from
    the list's index + 1."""
    import threading

    cluster = cluster_factory(1, extra=["--watch-history", "1"])
    node = cluster.nodes[cluster.leader()]
    key = "handoff/k"
    first = acquire(node.addr, key, 120_000)
    open_watched(console, browser, node.addr)
    wait_page(browser, "the first holder", lambda s: tokens(s) == {key: str(first)})

    waiter = {}
    t = threading.Thread(target=lambda: waiter.update(answer=http(
        node.addr, "POST", f"/v1/locks/{key}/acquire", {"lease_ms": 120_000, "wait_ms": 30_000}, timeout=40)))
    t.start()
    wait_for("the waiter to be queued", lambda: re.search(
        r"^lockd_lock_waiters(?:\{[^}]*\})? [1-9]", http(node.addr, "GET", "/metrics")[1], re.M))
    release(node.addr, key, first)
    t.join(timeout=40)
    code, body = waiter["answer"]
    assert code == 200, (code, body)
    second = body["token"]

    code, listed = http(node.addr, "GET", "/v1/locks?prefix=")
    assert code == 200 and listed["locks"], (code, listed)
    # The stream that was cut (the browser records a stream once it has
    # ended) started without `from`; the one after it from the list's
    # index + 1, past the handoff.
    s = wait_page(browser, "the new holder, and the watch live again from the list's index", lambda s: (
        tokens(s) == {key: str(second)} and s["watch"] == "live" and s["requests"].get("/v1/watch", 0) >= 1
        and s["watchFrom"] == listed["index"] + 1))
    froms = browser.execute_script("""
      return performance.getEntriesByType('resource').map(e => new URL(e.name))
        .filter(u => u.pathname === '/v1/watch').map(u => u.searchParams.get('from'));""")
    assert froms[0] is None, froms
    assert re.search(r"^lockd_watchers_cut_total(?:\{[^}]*\})? [1-9]", http(node.addr, "GET", "/metrics")[1], re.M)
    no_page_errors(browser)


def chaos_module():
    """The hostile fixture module (built with the tests: tests/build.rs):
    a lock module that traps on a grant of `chaos:trap`."""
    found = sorted(ROOT.glob("target/*/build/lockd-tests-*/out/chaos_guest.wasm"),
                   key=lambda p: p.stat().st_mtime)
    assert found, "the chaos fixture is built by the test build (tests/build.rs)"
    return found[-1].read_bytes()


def test_module_failures_and_a_module_out_of_service_are_shown(cluster_factory, console, browser):
    cluster = cluster_factory(1)
    node = cluster.nodes[cluster.leader()]
    code, body = http(node.addr, "POST", "/v1/admin/upgrade", chaos_module(), timeout=60.0)
    assert code == 200, (code, body)
    console(node.addr)
    wait_page(browser, "no failure yet", lambda s: s["failures"] == "0" and not s["outOfService"])
    # Eight grants the module traps on, each refused alone; then enough
    # entries to reach the next index the threshold is judged at (64).
    for _ in range(8):
        code, body = http(node.addr, "POST", "/v1/locks/chaos:trap/acquire", {"lease_ms": 1000})
        assert code == 500 and body["code"] == "module_failed", (code, body)
    s = wait_page(browser, "the failures", lambda s: s["failures"] == "8")
    assert "chaos:trap" in s["failuresText"] and "trapped" in s["failuresText"], s["failuresText"]
    assert not s["outOfService"], s["outOfService"]
    for i in range(64):
        code, body = http(node.addr, "POST", f"/v1/locks/k{i}/acquire", {"lease_ms": 60_000})
        if code != 200:
            break
    assert code == 500 and body["code"] == "module_failed" and "out of service" in body["error"], (code, body)
    s = wait_page(browser, "the out-of-service banner", lambda s: s["outOfService"])
    assert "grant" in s["outOfService"] and "8 failures" in s["outOfService"], s["outOfService"]
    assert s["previous"] and "on failure: refuse" in s["wayBack"], s["wayBack"]
    shot(browser, "out-of-service.png")
    # The operator's way back: the module before, in service, no way back.
    code, body = http(node.addr, "POST", "/v1/admin/rollback", timeout=60.0)
    assert code == 200 and body["result"] == "swapped", (code, body)
    s = wait_page(browser, "back in service", lambda s: not s["outOfService"] and s["previous"] == "")
    assert "none (no previous module)" in s["wayBack"], s["wayBack"]
    no_page_errors(browser)
