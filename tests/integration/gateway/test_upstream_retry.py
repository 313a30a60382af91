"""A request sent on a reused upstream connection that the origin closes without answering
(docs/wire.md#upstreams, "Sending a request again"). sluice cannot tell whether the origin acted
on it, so it sends it again, on a new connection, only when repeating it changes nothing at the
origin: the safe methods GET, HEAD, OPTIONS and TRACE. Any other method gets 502
upstream_connect and reaches the origin exactly once.

The origin (hangup_origin.py, probe.test on 127.0.0.24) answers the first request on each
connection and hangs up on the next after reading it. Each test sends two requests on one
keep-alive client connection: the first opens the upstream connection, which sluice keeps
for the client; the second is sent on it, and the origin reads it and hangs up.
"""
import socket

import pytest

from hangup_origin import ADDRESS, HangUpOrigin
from http1 import HttpReader
from netutil import free_port, wait_until
from oracles import marker


@pytest.fixture(scope="module")
def origin():
    o = HangUpOrigin(free_port((ADDRESS,)))
    yield o
    o.stop()


@pytest.fixture
def gw(make_gw, origin):
    """A sluice of its own for each test: what one test leaves in the pool is not another's."""
    rules = [{"name": "probe", "hosts": ["probe.test"], "schemes": ["http"],
              "ports": [origin.port], "ips": [ADDRESS + "/32"]}]
    return make_gw(rules=rules, env={"SLUICE_WORKERS": "1", "SLUICE_LOG": "debug"})


def head_bytes(method, target, port, extra=""):
    """An absolute-form request for probe.test exactly as written: no body, and no
    Content-Length unless `extra` has one."""
    return ("%s http://probe.test:%d%s HTTP/1.1\r\nHost: probe.test:%d\r\n%s\r\n"
            % (method, port, target, port, extra)).encode("latin-1")


def second_on_a_reused_connection(gw, origin, method, extra=""):
    """GET /prime, then `method` on the same client connection (so on the same upstream
    connection); the response to the second, and its target."""
    prime, target = "/prime-" + marker(), "/" + method.lower() + "-" + marker()
    with socket.create_connection(gw.sluice.address, timeout=15) as sock:
        reader = HttpReader(sock)
        sock.sendall(head_bytes("GET", prime, origin.port))
        first = reader.read_response("GET")
        assert first.status == 200, first
        assert origin.requests(prime)[0].index == 1
        sock.sendall(head_bytes(method, target, origin.port, extra))
        return reader.read_response(method), target


@pytest.mark.parametrize("method,extra", [
    ("DELETE", ""),
    ("POST", ""),                       # no Content-Length: a request without a body
    ("POST", "Content-Length: 0\r\n"),
    ("PUT", "Content-Length: 0\r\n"),
    ("PATCH", ""),
])
def test_a_request_that_is_not_safe_to_repeat_reaches_the_origin_once(gw, origin, method,
                                                                      extra):
    mark = gw.audit.mark()
    resp, target = second_on_a_reused_connection(gw, origin, method, extra)
    seen = origin.requests(target)
    assert [(s.method, s.index) for s in seen] == [(method, 2)], seen
    assert resp.status == 502, resp
    assert resp.sluice_reason == "upstream_connect", resp.headers
    assert b"not sent again" in resp.body, resp.body
    rec = gw.audit.wait(mark, lambda r: r["url"].endswith(target))[0]
    assert (rec["decision"], rec["reason"], rec["status"], rec["method"]) == \
        ("deny", "upstream_connect", 502, method), rec


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
def test_a_safe_request_is_sent_again_on_a_new_connection(gw, origin, method):
    mark = gw.audit.mark()
    resp, target = second_on_a_reused_connection(gw, origin, method)
    assert resp.status == 200, resp
    seen = origin.requests(target)
    assert [(s.method, s.index) for s in seen] == [(method, 2), (method, 1)], seen
    assert seen[0].connection != seen[1].connection, seen
    rec = gw.audit.wait(mark, lambda r: r["url"].endswith(target))[0]
    assert (rec["decision"], rec["status"]) == ("allow", 200), rec


def test_the_retry_dials_a_new_connection_not_another_pooled_one(gw, origin):
    """Two idle pooled connections to the origin, both of which it will hang up on: a GET
    taken to one of them is sent again on a connection dialled for it (the origin closed one
    idle connection; the others it had may be as dead), and answered."""
    closed_before = gw.sluice.stderr().count("close: client closed")
    clients = [socket.create_connection(gw.sluice.address, timeout=15) for _ in range(2)]
    try:
        for sock in clients:  # each client holds its own upstream while the other asks
            sock.sendall(head_bytes("GET", "/prime-" + marker(), origin.port))
            assert HttpReader(sock).read_response("GET").status == 200
    finally:
        for sock in clients:
            sock.close()
    # Both sessions closed, and gave their upstreams to the pool as they did.
    wait_until(lambda: gw.sluice.stderr().count("close: client closed") >= closed_before + 2,
               10, "both clients' sessions to close")
    target = "/again-" + marker()
    with socket.create_connection(gw.sluice.address, timeout=15) as sock:
        sock.sendall(head_bytes("GET", target, origin.port))
        resp = HttpReader(sock).read_response("GET")
    seen = origin.requests(target)
    assert [s.index for s in seen] == [2, 1], seen  # a pooled one, then a new one
    assert resp.status == 200, resp
