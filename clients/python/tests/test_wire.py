"""What the blocking client puts on the wire, without a node."""

from __future__ import annotations

import http.client
from typing import List

from lockd_client.client import _HTTPConnection, _HTTPSConnection


def sends(conn: http.client.HTTPConnection) -> List[bytes]:
    """The writes ``conn`` makes for one request with a JSON body."""
    out: List[bytes] = []
    conn.send = lambda data: out.append(bytes(data))  # type: ignore[method-assign]
    conn.request("POST", "/v1/locks/k/acquire", body=b'{"lease_ms":1000}',
                 headers={"Content-Type": "application/json"})
    return out


def test_a_request_with_a_body_goes_out_in_one_write():
    for cls in (_HTTPConnection, _HTTPSConnection):
        out = sends(cls("127.0.0.1", 1))
        assert len(out) == 1, out
        assert out[0].startswith(b"POST /v1/locks/k/acquire HTTP/1.1\r\n")
        assert b"\r\nContent-Length: 17\r\n" in out[0]
        assert out[0].endswith(b'\r\n\r\n{"lease_ms":1000}')


def test_http_client_alone_writes_the_head_and_the_body_apart():
    # Why the client has its own connection class: without it, two writes.
    out = sends(http.client.HTTPConnection("127.0.0.1", 1))
    assert len(out) == 2 and out[1] == b'{"lease_ms":1000}', out
