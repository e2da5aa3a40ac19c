"""A page of another site, in a real headless Chromium, against a real node
(authentication off, so the browser needs no credential at all: the worst
case of ambient authority). It tries what a hostile page can do without
the user's consent: a form POST and a no-cors fetch, each of which a
browser sends without asking the node first, and framing the console. The
node refuses both requests and the console does not render in the frame.

Positive controls keep the test honest: the same request from the node's
own origin is served, and a node page without frame-ancestors (the API
document) does load in the same frame."""

import http.server as http_server
import threading

import pytest

from harness import free_port, http, wait_for

ATTACK = """<!doctype html><html><body>
<iframe name="sink" id="sink"></iframe>
<form id="f" method="POST" enctype="text/plain" target="sink"
      action="http://{node}/v1/locks/csrf/form/acquire">
  <input name='{{"lease_ms":60000,"owner":"' value='"}}'>
</form>
<iframe id="framed" src="http://{node}{framed}"></iframe>
<script>
  document.getElementById("f").submit();
  fetch("http://{node}/v1/locks/csrf/fetch/acquire",
        {{method: "POST", mode: "no-cors", body: '{{"lease_ms":60000}}'}})
    .finally(() => {{ document.title = "sent"; }});
</script>
</body></html>"""


class Attacker:
    """Another origin (another port of loopback) serving the hostile page."""

    def __init__(self, node, framed):
        page = ATTACK.format(node=node, framed=framed).encode()

        class Handler(http_server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *a):
                pass

        self.server = http_server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def held(addr, key):
    code, body = http(addr, "GET", f"/v1/locks/{key}")
    assert code == 200, (code, body)
    return body["held"]


def frame_location(browser):
    browser.switch_to.frame(browser.find_element("id", "framed"))
    try:
        return browser.execute_script("return location.href")
    finally:
        browser.switch_to.default_content()


@pytest.mark.parametrize("framed", ["/ui", "/v1/openapi.json"])
def test_a_page_of_another_site_changes_nothing_and_cannot_frame_the_console(
    cluster_factory, browser, framed
):
    cluster = cluster_factory(1)
    node = cluster.nodes[cluster.leader()].addr
    evil = Attacker(node, framed)
    try:
        browser.get(evil.url)
        wait_for("the hostile page sent its requests", lambda: browser.title == "sent", 20)
        # The form's answer lands in the sink frame: wait until it has.
        wait_for(
            "the form was answered",
            lambda: browser.execute_script(
                "try { return document.getElementById('sink').contentWindow.location.href !== 'about:blank'; }"
                " catch (e) { return true; }"
            ),
            20,
        )
        assert not held(node, "csrf/form"), "a cross-site form acquired a lock"
        assert not held(node, "csrf/fetch"), "a cross-site fetch acquired a lock"
        where = wait_for("the frame settled", lambda: frame_location(browser) or None, 20)
        if framed == "/ui":
            assert where.startswith("chrome-error://"), f"the console rendered in a frame: {where}"
        else:
            # The control: a page that does not forbid framing loads there.
            assert where == f"http://{node}{framed}", where
        # The control: the same request from the node's own origin is served.
        browser.get(f"http://{node}/v1/openapi.json")
        status = browser.execute_async_script(
            """const done = arguments[arguments.length - 1];
               fetch('/v1/locks/csrf/same/acquire', {method: 'POST',
                     headers: {'content-type': 'application/json'}, body: '{"lease_ms":60000}'})
                 .then(r => done(r.status), e => done(String(e)));"""
        )
        assert status == 200, status
        assert held(node, "csrf/same")
    finally:
        evil.close()
