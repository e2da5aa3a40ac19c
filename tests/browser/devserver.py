"""A tiny proxy for working on the console without rebuilding lockd.

lockd compiles host/ui/console.html into its binary (include_str!), so a
change to the page shows at a node's /ui only after a rebuild. This proxy
serves the file from disk at /ui (read again on every request, with the
Content-Security-Policy lockd would send with it) and forwards every other
request, headers and body included, to a running node (an event stream,
such as GET /v1/watch, as it comes):

    python3 tests/browser/devserver.py --upstream 127.0.0.1:7401 --port 8080
    # then open http://127.0.0.1:8080/ui

The browser test uses it too when LOCKD_CONSOLE_FILE names the page
(scripts/test-console.sh --from-file); by default it opens lockd's own /ui.
"""

import argparse
import base64
import hashlib
import http.client
import http.server
import pathlib
import threading

# Hop-by-hop headers are the proxy's own business.
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
       "proxy-authorization", "proxy-authenticate", "host", "content-length"}


def inline_hashes(page: str, tag: str) -> str:
    """'sha256-…' of every inline <tag> element's text, as lockd names them
    (host/src/api/cluster.rs, inline_hashes)."""
    out, rest = [], page
    while (start := rest.find(f"<{tag}>")) >= 0:
        body = rest[start + len(tag) + 2:]
        end = body.find(f"</{tag}>")
        if end < 0:
            break
        digest = hashlib.sha256(body[:end].encode()).digest()
        out.append(f"'sha256-{base64.b64encode(digest).decode()}'")
        rest = body[end:]
    return " ".join(out)


def console_headers(page: str):
    """The headers lockd serves its console with (host/src/api/cluster.rs,
    console_csp): a page that breaks its policy fails here too."""
    csp = ("default-src 'none'; script-src %s; style-src %s; connect-src 'self' http: https:; "
           "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
           % (inline_hashes(page, "script"), inline_hashes(page, "style")))
    return [("content-security-policy", csp), ("x-frame-options", "DENY"),
            ("x-content-type-options", "nosniff"), ("referrer-policy", "no-referrer")]


def make_handler(page: pathlib.Path, upstream: str, timeout: float):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # quiet: the test prints what matters
            pass

        def _forward(self):
            if self.command == "GET" and self.path.split("?", 1)[0] == "/ui":
                body = page.read_bytes()
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                for k, v in console_headers(body.decode()):
                    self.send_header(k, v)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            length = int(self.headers.get("content-length") or 0)
            data = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            # The page is the node's own here: its requests say so (the node
            # refuses a change from another origin, api/origin.rs).
            own = "http://%s:%d" % self.server.server_address[:2]
            if headers.get("Origin") == own:
                headers["Origin"] = f"http://{upstream}"
            try:
                conn = http.client.HTTPConnection(upstream, timeout=timeout)
                conn.request(self.command, self.path, body=data, headers=headers)
                r = conn.getresponse()
                stream = (r.getheader("content-type") or "").startswith("text/event-stream")
                payload = b"" if stream else r.read()
            except OSError as e:
                # What a browser sees when the node is gone: no answer.
                # Closing the connection without a response mimics that.
                self.log_error("upstream %s: %s", upstream, e)
                self.close_connection = True
                return
            self.send_response(r.status, r.reason)
            for k, v in r.getheaders():
                if k.lower() not in HOP:
                    self.send_header(k, v)
            if stream:
                # Passed on as it comes, until either side ends it; the
                # connection then closes (no length to give).
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    conn.sock.settimeout(None)   # the page times a silent stream itself
                    while chunk := r.read1(65536):
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except OSError as e:
                    self.log_error("stream from %s: %s", upstream, e)
                finally:
                    conn.close()
                return
            conn.close()
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

    return Handler


class DevServer:
    """The proxy in a background thread (for the test)."""

    def __init__(self, page, upstream, host="127.0.0.1", port=0, timeout=10.0):
        self.httpd = http.server.ThreadingHTTPServer(
            (host, port), make_handler(pathlib.Path(page), upstream, timeout))
        self.httpd.daemon_threads = True
        self.addr = "%s:%d" % self.httpd.server_address[:2]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True, help="a lockd node, HOST:PORT (plain HTTP)")
    ap.add_argument("--page", default=str(pathlib.Path(__file__).resolve().parents[2] / "host/ui/console.html"))
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8080)
    a = ap.parse_args()
    s = DevServer(a.page, a.upstream, a.host, a.port)
    print(f"serving {a.page} at http://{s.addr}/ui, everything else from {a.upstream}", flush=True)
    try:
        s.thread.join()
    except KeyboardInterrupt:
        s.close()


if __name__ == "__main__":
    main()
