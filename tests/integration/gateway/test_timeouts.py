"""docs/wire.md#limits-and-timeouts and docs/threat-model.md#resource-exhaustion (R1
slowloris, R3): handshake_timeout from accept to the
end of the tunnel's TLS handshake and for each request head from its first byte,
idle_timeout between requests, and max_connections. Each sluice here has small limits so that
the deadlines show in a second or two; every measured time must lie between 0.8x and 3x the
configured limit.
"""
import select
import threading
import time
import uuid

import clients
from admin_client import Admin, with_admin
from http1 import request_bytes
from netutil import read_until_closed, socket_state, wait_until
from sluice_proc import SANDBOX
from tlsraw import client_hello, connect_tunnel, open_proxy

HANDSHAKE = 1.0   # seconds: limits.handshake_timeout below
IDLE = 2.0        # seconds: limits.idle_timeout (unlike HANDSHAKE, so the two cannot be mixed up)
FAST = {"handshake_timeout": "1s", "idle_timeout": "2s", "shutdown_grace": "2s"}


def marker():
    return uuid.uuid4().hex[:12]


def assert_about(seconds, limit, what):
    assert 0.8 * limit <= seconds <= 3 * limit, \
        "%s after %.2fs; the limit is %.1fs (expected %.2f..%.2fs)" % (
            what, seconds, limit, 0.8 * limit, 3 * limit)


def assert_closed(how, seconds, what):
    assert how in ("eof", "reset"), "%s: still open after %.1fs" % (what, seconds)


def normal_request(g, tag=""):
    """A well-behaved client's request through sluice (curl, CONNECT + TLS)."""
    return g.curl(g.url("allowed.test", "/whoami.txt?normal=" + (tag or marker())), timeout=20)


def assert_normal_ok(r):
    assert (r.rc, r.http_code, r.body) == (0, 200, b"allowed.test\n"), \
        "a normal request failed: rc %d, status %d, %s" % (r.rc, r.http_code, r.stderr)


# --- handshake_timeout -------------------------------------------------------------------------

def test_silent_client_is_closed_after_handshake_timeout_without_record(make_gw):
    """Edge case: a client connects to the listener and never sends a byte."""
    g = make_gw(limits=FAST)
    mark = g.audit.mark()
    start = time.monotonic()
    sock = open_proxy(g.sluice.address)
    client = "%s:%d" % sock.getsockname()
    data, how, seconds = read_until_closed(sock, 3 * HANDSHAKE + 2, start)
    sock.close()
    assert_closed(how, seconds, "a client that sent nothing")
    assert data == b"", "sluice answered a client that asked nothing: %r" % data[:200]
    assert_about(seconds, HANDSHAKE, "the silent connection was closed")
    # Barrier: a later request's record is written; none may be for the silent client.
    assert_normal_ok(normal_request(g))
    g.audit.wait(mark, lambda r: "normal=" in (r["url"] or ""))
    assert not [r for r in g.audit.since(mark) if r["client"] == client], \
        "an audit record for a connection that asked nothing: %r" % g.audit.since(mark)


def test_connect_then_no_client_hello_is_closed_after_handshake_timeout(make_gw):
    """Edge case: CONNECT to an allowed name, "200 Connection established", then silence
    where the ClientHello should be."""
    g = make_gw(limits=FAST)
    start = time.monotonic()
    sock, answer, _ = connect_tunnel(g.sluice.address, g.authority("allowed.test"))
    assert answer.status == 200, answer
    data, how, seconds = read_until_closed(sock, 3 * HANDSHAKE + 2, start)
    sock.close()
    assert_closed(how, seconds, "a tunnel without a ClientHello")
    assert data == b"", "bytes after the CONNECT answer: %r" % data[:200]
    assert_about(seconds, HANDSHAKE, "the tunnel without a ClientHello was closed")


def test_half_a_client_hello_is_closed_after_handshake_timeout(make_gw, bed):
    """Edge case: the TLS handshake starts (the first half of a real ClientHello for the
    CONNECT target) and never finishes."""
    g = make_gw(limits=FAST)
    start = time.monotonic()
    sock, answer, _ = connect_tunnel(g.sluice.address, g.authority("allowed.test"))
    assert answer.status == 200, answer
    hello = client_hello("allowed.test")
    sock.sendall(hello[:len(hello) // 2])
    data, how, seconds = read_until_closed(sock, 3 * HANDSHAKE + 2, start)
    sock.close()
    assert_closed(how, seconds, "a tunnel with half a ClientHello")
    # Nothing, or at most a TLS alert record (content type 21): never a ServerHello.
    assert data == b"" or data[0] == 21, "sluice answered half a ClientHello with %r" % data[:50]
    assert_about(seconds, HANDSHAKE, "the half-finished handshake was closed")


def test_client_hello_trickled_byte_by_byte_is_cut_at_handshake_timeout(make_gw, bed):
    """Edge case (R1): a real ClientHello for the CONNECT target sent one byte every 200 ms
    (it would take ~100 s): bytes keep arriving, but handshake_timeout runs from accept to the
    end of the handshake, so sluice cuts it about then, with no ServerHello."""
    g = make_gw(limits=FAST)
    start = time.monotonic()
    sock, answer, _ = connect_tunnel(g.sluice.address, g.authority("allowed.test"))
    assert answer.status == 200, answer
    hello = client_hello("allowed.test")
    closed = None
    for byte in hello[:int(3 * HANDSHAKE / 0.2) + 4]:
        readable, _, _ = select.select([sock], [], [], 0.2)  # also spaces the trickle
        if readable:
            closed = read_until_closed(sock, 2, start)
            break
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            closed = (b"", "reset", time.monotonic() - start)
            break
    sock.close()
    assert closed is not None, "a trickled ClientHello is still being read after %.1fs" % (
        time.monotonic() - start)
    data, how, seconds = closed
    assert_closed(how, seconds, "the trickled ClientHello")
    assert data == b"" or data[0] == 21, "sluice answered a partial hello with %r" % data[:50]
    assert_about(seconds, HANDSHAKE, "the trickled ClientHello was cut")


def test_slowloris_request_head_in_tunnel_is_cut_and_others_are_served(make_gw, bed):
    """Edge case (R1): after a completed TLS handshake, a request head that begins and then
    trickles one byte every 300 ms. sluice cuts it about handshake_timeout after the head
    began; nothing reaches the origin; another client's request meanwhile gets its 200."""
    g = make_gw(limits=FAST)
    m = marker()
    sock, tls, _ = clients.open_tls_tunnel(g.sluice.address, g.authority("allowed.test"),
                                           g.sluice.ca_pem)
    head = b"GET /whoami.txt?slow=%s HTTP/1.1\r\nHost: allowed.test\r\n" % m.encode()
    trickle = b"X-Slow: " + b"s" * 64
    other = {}
    worker = threading.Thread(target=lambda: other.update(r=normal_request(g)))
    began = time.monotonic()
    tls.sendall(head)
    worker.start()
    closed = None
    for byte in trickle[:int(3 * HANDSHAKE / 0.3) + 4]:
        # Waiting for a byte from sluice also spaces the trickle (300 ms between bytes).
        readable, _, _ = select.select([sock], [], [], 0.3)
        if readable:
            closed = read_until_closed(sock, 2, began)
            break
        try:
            tls.sendall(bytes([byte]))
        except OSError:
            closed = (b"", "reset", time.monotonic() - began)
            break
    worker.join(timeout=30)
    sock.close()
    assert closed is not None, "a request head trickled for %.1fs is still being read" % (
        time.monotonic() - began)
    _, how, seconds = closed
    assert_closed(how, seconds, "the slowloris connection")
    assert_about(seconds, HANDSHAKE, "the trickled request head was cut")
    assert "r" in other, "the concurrent normal request did not finish"
    assert_normal_ok(other["r"])
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]], \
        "the trickled request reached the origin"


def test_100_trickling_connects_do_not_stop_a_normal_request(make_gw):
    """Edge case (R1): 100 connections each trickle "CONNECT ..." one byte at a time; a normal
    request made while they are all open succeeds; then each is cut by handshake_timeout."""
    # Long enough that the normal request (100 connects, then curl's CONNECT and two TLS
    # handshakes through an ASan build on two busy cores) surely ends while all are open.
    limit = 5.0
    g = make_gw(limits={"handshake_timeout": "5s", "idle_timeout": "30s"})
    line = b"CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test:%d\r\n" % (g.t, g.t)
    opened = time.monotonic()
    socks = [open_proxy(g.sluice.address) for _ in range(100)]
    position = 0

    def trickle():
        nonlocal position
        for s in socks:
            try:
                s.sendall(line[position:position + 1])
            except OSError:
                pass
        position += 1

    trickle()
    other = {}
    worker = threading.Thread(target=lambda: other.update(r=normal_request(g)))
    worker.start()
    while worker.is_alive() and position < len(line):
        worker.join(timeout=0.1)  # spaces the trickle; ends early when the request is done
        trickle()
    worker.join(timeout=30)
    try:
        still_open = time.monotonic()
        assert "r" in other, "the normal request did not finish"
        assert_normal_ok(other["r"])
        readable, _, _ = select.select(socks, [], [], 0)
        assert not readable, "%d trickling connections were answered or closed within " \
                             "%.2fs" % (len(readable), still_open - opened)
        assert still_open - opened < 0.8 * limit, \
            "the normal request took %.2fs: not done while the tricklers were surely open" % (
                still_open - opened)
        # Each trickler is then cut, about handshake_timeout after it connected.
        ends = [read_until_closed(s, 3 * limit + 2, opened) for s in socks]
    finally:
        for s in socks:
            s.close()
    open_ones = [e for e in ends if e[1] == "timeout"]
    assert not open_ones, "%d trickling connections still open after %.1fs" % (
        len(open_ones), 3 * limit + 2)
    assert not [e for e in ends if e[0]], "a trickler got an answer: %r" % [
        e[0][:80] for e in ends if e[0]][:3]
    latest = max(e[2] for e in ends)
    assert_about(latest, limit, "the last trickling connection was cut")


# --- idle_timeout --------------------------------------------------------------------------

def test_idle_keepalive_tunnel_is_closed_after_idle_timeout(make_gw):
    """Edge case: one complete request/response on a tunnel, then the client says nothing;
    sluice ends the session about idle_timeout after the response."""
    g = make_gw(limits=FAST)
    sock, tls, reader = clients.open_tls_tunnel(g.sluice.address, g.authority("allowed.test"),
                                                g.sluice.ca_pem)
    tls.sendall(request_bytes("GET", "/whoami.txt", "allowed.test"))
    resp = reader.read_response()
    after = time.monotonic()
    assert (resp.status, resp.body) == (200, b"allowed.test\n")
    assert (resp.header("Connection") or "").lower() != "close", resp.headers
    tail, how = reader.read_to_close(timeout=3 * IDLE + 2)  # EOF or close_notify
    seconds = time.monotonic() - after
    sock.close()
    assert_closed(how, seconds, "an idle keep-alive tunnel")
    assert tail == b"", "bytes on an idle tunnel: %r" % tail[:200]
    assert_about(seconds, IDLE, "the idle keep-alive tunnel was closed")


# --- max_connections -----------------------------------------------------------------------

def test_connection_beyond_max_connections_is_closed_at_once(make_gw):
    """Edge case (R3): limits.max_connections 3 and three idle connections open (plain TCP
    connects to the listener): a fourth is closed at once without a byte; when one of the
    three goes away, a new request gets its 200."""
    g = make_gw(edit=with_admin(), limits={"max_connections": 3, "handshake_timeout": "20s",
                                           "idle_timeout": "30s"})
    admin = Admin(g.sluice)
    address = g.sluice.address
    held = [open_proxy(address) for _ in range(3)]
    try:
        # Event: sluice counts all three. An empty listen queue is not enough: a connection
        # handed from the accepting worker to another counts once that worker takes it up, and
        # the fourth, served at once by the first, could count before it.
        admin.wait_for(lambda scrape: None if scrape.value(
            "sluice_connections_active", sandbox=SANDBOX) == 3 else "not yet 3",
            "sluice to count the three connections")
        start = time.monotonic()
        extra = open_proxy(address)
        try:
            extra.sendall(b"CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n"
                          % (g.t, g.t))
        except OSError:
            pass  # already closed by sluice: what is asserted below
        data, how, seconds = read_until_closed(extra, 5, start)
        extra.close()
        assert_closed(how, seconds, "a connection beyond max_connections")
        assert data == b"", "the connection beyond max_connections got %r" % data[:200]
        assert seconds < 1.0, "closed only after %.2fs, not at once" % seconds
        readable, _, _ = select.select(held, [], [], 0)
        assert not readable, "sluice closed %d of the connections within the limit" % len(
            readable)

        gone = held.pop()
        local = gone.getsockname()
        gone.close()
        # Event: sluice closed its end too (our end reaches TIME_WAIT, or is gone).
        wait_until(lambda: socket_state(local, address) in ("TIME_WAIT", None), 10,
                   "sluice to close the connection the client closed")
        assert_normal_ok(normal_request(g))
    finally:
        for s in held:
            s.close()
