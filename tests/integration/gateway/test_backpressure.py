"""docs/wire.md#limits-and-timeouts: peers that do not read, and traffic that is no request progress.

sluice stops reading a peer whose write queue toward it is backed up (over 256 KiB until it
drains to 64 KiB), on both legs and in every state, so what it holds for a connection stays
bounded whatever the peer sends; a TLS peer may send 32 post-handshake messages (KeyUpdates)
plus one per MiB of data; and idle_timeout counts from the last request progress, so traffic
that carries no request (KeyUpdates, pipelined bytes nobody reads yet) keeps no connection
alive. The bulk cases with a client that reads (200 MiB down and up) are in test_limits.py.
"""
import errno
import select
import socket
import threading
import time
import uuid

import pytest

import expect
from http1 import HttpReader, request_bytes
from libssl_client import Tls13Client
from netutil import free_port, socket_state, tcp_sockets, wait_until
from sluice_proc import bed_rules, is_asan
from tlsraw import PlainStream

IDLE = 2.0  # seconds: limits.idle_timeout of FAST
FAST = {"idle_timeout": "2s", "handshake_timeout": "2s"}
KEY_UPDATE_ALLOWANCE = 32  # TlsSession::kPostHandshakeAllowance
# What sluice may grow by for connections that never read: each write queue stops reading at
# 256 KiB; the rest is allocator slack. ASan keeps freed memory in quarantine.
GROWTH_LIMIT_MIB = 8
GROWTH_LIMIT_ASAN_MIB = 64


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


def growth_limit_kib(g):
    return 1024 * (GROWTH_LIMIT_ASAN_MIB if is_asan(g.sluice.binary) else GROWTH_LIMIT_MIB)


def assert_about(seconds, limit, what):
    assert 0.8 * limit <= seconds <= 3 * limit, \
        "%s after %.2fs; the limit is %.1fs (expected %.2f..%.2fs)" % (
            what, seconds, limit, 0.8 * limit, 3 * limit)


def unread_socket(address):
    """A client socket with a tiny receive window, so that what sluice sends it (and it never
    reads) piles up in sluice, not in the client's kernel."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(30)
    sock.connect(address)
    return sock


def connect_head(sock, authority):
    """CONNECT, and its answer read byte by byte: nothing of the TLS stream is taken."""
    sock.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority.encode(),
                                                                authority.encode()))
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        assert byte, "sluice closed before answering the CONNECT: %r" % head
        head += byte
    assert head.startswith(b"HTTP/1.1 200"), head


def open_tls13(g, sock, name="allowed.test"):
    connect_head(sock, g.authority(name))
    tls = Tls13Client(sock, name)
    tls.handshake()
    return tls


def push(sock, data, deadline):
    """Sends what the peer takes of `data` before `deadline`. Returns (bytes sent, how): how
    is None when all went, "timeout" at the deadline, "reset" when the peer closed."""
    sock.setblocking(False)
    sent = 0
    try:
        while sent < len(data):
            left = deadline - time.monotonic()
            if left <= 0:
                return sent, "timeout"
            _, writable, _ = select.select([], [sock], [], left)
            if not writable:
                continue
            try:
                sent += sock.send(data[sent:sent + 65536])
            except BlockingIOError:
                continue
            except OSError as e:
                if e.errno in (errno.ECONNRESET, errno.EPIPE):
                    return sent, "reset"
                raise
        return sent, None
    finally:
        sock.settimeout(30)


def closed_by_peer(sock, timeout):
    """Raw bytes are drained (the test does not care about them) until the peer closes:
    "eof"/"reset", or None if still open after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        readable, _, _ = select.select([sock], [], [], left)
        if not readable:
            return None
        try:
            if not sock.recv(65536):
                return "eof"
        except (ConnectionResetError, BrokenPipeError):
            return "reset"


# --- TLS post-handshake messages -------------------------------------------------------------

def test_key_update_flood_from_a_client_that_never_reads_is_cut_at_once(make_gw):
    """Edge case: after the tunnel's handshake a client sends KeyUpdate(update_requested)
    records as fast as it can and never reads; each makes sluice derive keys and queue a
    KeyUpdate back. sluice ends the connection at the post-handshake limit (long before
    idle_timeout, 30 s here), having read no more than the records in flight, and its memory
    stays flat."""
    g = make_gw()  # idle_timeout 30s: a close within the flood is the limit's
    pid = g.sluice.proc.pid
    sock = unread_socket(g.sluice.address)
    flood_for = 10.0
    try:
        tls = open_tls13(g, sock)
        start = time.monotonic()
        base = peak = rss_kib(pid)
        deadline = start + flood_for
        sent, how = 0, None
        while how is None and time.monotonic() < deadline:
            n, how = push(sock, tls.key_update_records(500), deadline)
            sent += n
            peak = max(peak, rss_kib(pid))
        seconds = time.monotonic() - start
    finally:
        sock.close()
    report = "the client sent %.2f MiB of KeyUpdates (27 bytes each) in %.1fs; sluice's RSS " \
             "went %d -> %d KiB" % (sent / 2**20, seconds, base, peak)
    assert how == "reset", "still open after %.0fs: %s" % (flood_for, report)
    assert peak - base < growth_limit_kib(g), report


def test_32_key_updates_are_served_and_the_33rd_ends_the_tunnel(make_gw):
    """Edge case, the bound itself: a client that updates its keys 32 times (each asking
    sluice to update too) still gets its answer; one more KeyUpdate, with no more data
    carried meanwhile, ends the connection."""
    g = make_gw()
    sock = socket.create_connection(g.sluice.address, timeout=30)
    try:
        tls = open_tls13(g, sock)
        sock.sendall(tls.key_update_records(KEY_UPDATE_ALLOWANCE))
        tls.sendall(request_bytes("GET", "/whoami.txt", "allowed.test"))
        resp = HttpReader(tls).read_response()
        assert (resp.status, resp.body) == (200, b"allowed.test\n")
        sock.sendall(tls.key_update_records(1))
        how = closed_by_peer(sock, 20)
    finally:
        sock.close()
    assert how in ("eof", "reset"), "the tunnel is still open after the 33rd KeyUpdate"


def test_key_updates_do_not_hold_off_idle_timeout(make_gw):
    """Edge case: after one exchange a client sends a KeyUpdate every quarter second (under the
    post-handshake limit) and nothing else. A KeyUpdate is no request: the tunnel is closed
    about idle_timeout after the response, as if the client had been silent."""
    g = make_gw(limits=FAST)
    sock = socket.create_connection(g.sluice.address, timeout=30)
    try:
        tls = open_tls13(g, sock)
        tls.sendall(request_bytes("GET", "/whoami.txt", "allowed.test"))
        resp = HttpReader(tls).read_response()
        assert (resp.status, resp.body) == (200, b"allowed.test\n")
        after = time.monotonic()
        how, sent = None, 0
        while how is None and time.monotonic() - after < 3 * IDLE + 1:
            if sent < KEY_UPDATE_ALLOWANCE - 4:  # stays under the limit: only the idle
                try:                             # timeout may end this tunnel
                    sock.sendall(tls.key_update_records(1, requested=False))
                    sent += 1
                except OSError:
                    pass  # closed: the read below says how
            how = closed_by_peer(sock, 0.25)
        seconds = time.monotonic() - after
    finally:
        sock.close()
    assert how in ("eof", "reset"), \
        "still open %.1fs after the response, with %d KeyUpdates sent" % (seconds, sent)
    assert_about(seconds, IDLE, "the tunnel sending only KeyUpdates was closed")


# --- plain data: responses nobody reads ------------------------------------------------------

@pytest.mark.parametrize("transport", ["tunnel", "forward"])
def test_pipelined_requests_for_200_mib_never_read_hold_bounded_memory(make_gw, bed,
                                                                       transport):
    """Edge case: a client pipelines four requests for the 200 MiB file and never reads a
    byte of the answers. nginx sends as fast as sluice takes; sluice stops reading it once its
    queue toward the client is backed up, holds little, and the connection ends about
    idle_timeout after the last progress, with a record of the request cut short."""
    g = make_gw(limits=FAST)
    pid = g.sluice.proc.pid
    mark = g.audit.mark()
    m = uuid.uuid4().hex[:12]
    base = peak = rss_kib(pid)
    sock = unread_socket(g.sluice.address)
    client = "%s:%d" % sock.getsockname()
    try:
        if transport == "tunnel":
            tls = open_tls13(g, sock)
            sock.sendall(b"".join(tls.seal(request_bytes("GET", "/big.bin?m=%s&n=%d" % (m, i),
                                                         "allowed.test")) for i in range(4)))
        else:
            sock.sendall(b"".join(request_bytes(
                "GET", g.url("allowed.test", "/big.bin?m=%s&n=%d" % (m, i), scheme="http"),
                "allowed.test:%d" % g.p) for i in range(4)))
        sent = time.monotonic()
        deadline = sent + 3 * IDLE + 5
        # The client reads nothing, so it cannot see a FIN queued behind the data sluice sent
        # it: sluice's own end of the connection says when sluice let go of it.
        sluice_end = (g.sluice.address, sock.getsockname())
        state = "ESTABLISHED"
        while state == "ESTABLISHED" and time.monotonic() < deadline:
            peak = max(peak, rss_kib(pid))
            time.sleep(0.05)  # polling interval
            state = socket_state(*sluice_end)
        seconds = time.monotonic() - sent
    finally:
        sock.close()
    report = "sluice's RSS went %d -> %d KiB" % (base, peak)
    assert state != "ESTABLISHED", "still open %.1fs after the requests; %s" % (seconds,
                                                                                 report)
    assert seconds <= 3 * IDLE + 5, report
    assert peak - base < growth_limit_kib(g), report
    rec = g.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, decision="allow", status=200)
    assert 0 < rec["resp_bytes"] < 200 * 2**20, rec


# --- the client leg: a backed-up client is not read, and is read again once it drains -------

EIGHT_MIB = 8 * 2**20


def forward_get(g, path, headers=()):
    return request_bytes("GET", g.url("allowed.test", path, scheme="http"),
                         "allowed.test:%d" % g.p, headers=headers)


def wait_until_not_reading(origin):
    """sluice stops reading the origin during a response only while its queue toward the
    client is backed up; the origin's bytes then sit unread in sluice's socket. Waits until
    that receive queue is not empty and has not moved for five looks in a row."""
    looks = []

    def stalled():
        queues = [s["rx_queue"] for s in tcp_sockets()
                  if s["remote"] == origin and s["state"] == "ESTABLISHED"]
        looks.append(queues[0] if len(queues) == 1 else None)
        return len(looks) >= 5 and looks[-1] and len(set(looks[-5:])) == 1
    wait_until(stalled, 30, "sluice to stop reading the origin", interval=0.05)


def test_client_whose_queue_is_backed_up_is_not_read(make_gw, bed):
    """Edge case: a client asks for 8 MiB and reads nothing. Once sluice's queue toward it is
    backed up, the client pipelines a second request: sluice leaves it unread in its socket
    (whatever a client sends may have to be answered to it) until the connection ends at
    idle_timeout, no progress having been made."""
    g = make_gw(limits=FAST)
    sock = unread_socket(g.sluice.address)
    sluice_end = (g.sluice.address, sock.getsockname())
    try:
        sock.sendall(forward_get(g, "/big.bin", [("Range", "bytes=0-%d" % (EIGHT_MIB - 1))]))
        wait_until_not_reading(("127.0.0.20", g.p))
        second = forward_get(g, "/whoami.txt")
        sock.sendall(second)

        def unread_by_sluice():  # None once sluice has let go of the connection
            mine = [s for s in tcp_sockets() if (s["local"], s["remote"]) == sluice_end]
            return mine[0]["rx_queue"] if mine and mine[0]["state"] == "ESTABLISHED" else None
        unread = [unread_by_sluice()]
        deadline = time.monotonic() + 3 * IDLE + 5
        while unread[-1] is not None and time.monotonic() < deadline:
            time.sleep(0.05)  # polling interval
            unread.append(unread_by_sluice())
    finally:
        sock.close()
    assert unread[-1] is None, "still open %.0fs after the second request" % (3 * IDLE + 5)
    seen = [n for n in unread if n is not None]
    assert seen and set(seen) == {len(second)}, \
        "sluice read the pipelined request while backed up: its unread bytes went %s (of %d)" \
        % (seen[:20], len(second))


def test_client_that_drains_its_backed_up_queue_is_read_again(make_gw, bed):
    """Edge case, the other half (no deadlock): the same client, once it reads the 8 MiB,
    gets the answer to the request it pipelined while sluice was not reading it."""
    g = make_gw()
    sock = unread_socket(g.sluice.address)
    try:
        sock.sendall(forward_get(g, "/big.bin", [("Range", "bytes=0-%d" % (EIGHT_MIB - 1))]))
        wait_until_not_reading(("127.0.0.20", g.p))
        sock.sendall(forward_get(g, "/whoami.txt"))
        reader = HttpReader(PlainStream(sock))
        first = reader.read_response()
        second = reader.read_response()
    finally:
        sock.close()
    assert (first.status, len(first.body)) == (206, EIGHT_MIB)
    assert (second.status, second.body) == (200, b"allowed.test\n")


# --- an origin that never reads or answers -------------------------------------------------

class SilentOrigin:
    """A plain-HTTP origin on 127.0.0.22 (refused.wild.test) that accepts connections and
    then neither reads nor answers; its small receive buffer makes sluice's queue toward it
    back up after a few KiB."""
    ADDRESS = "127.0.0.22"

    def __init__(self):
        self.port = free_port((self.ADDRESS,))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # inherited
        self.sock.bind((self.ADDRESS, self.port))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.accepted = []
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted.append(conn)

    def rule(self):
        return {"name": "silent", "hosts": ["refused.wild.test"], "schemes": ["http"],
                "ports": [self.port], "ips": ["%s/32" % self.ADDRESS]}

    def url(self, path):
        return "http://refused.wild.test:%d%s" % (self.port, path)

    def host(self):
        return "refused.wild.test:%d" % self.port

    def close(self):
        self.stopping = True
        self.thread.join(timeout=5)
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent_origin():
    origin = SilentOrigin()
    yield origin
    origin.close()


def silent_gw(make_gw, bed, origin):
    return make_gw(limits=FAST, rules=[origin.rule()] + bed_rules(bed.tls_port, bed.plain_port))


def test_client_bytes_do_not_hold_off_upstream_timeout(make_gw, bed, silent_origin):
    """Edge case: the origin takes the request and never answers, while the client trickles
    the start of a pipelined request, a byte every quarter second. Those bytes are nobody's
    progress (nothing reads them until the answer is out): the client gets 504
    upstream_timeout about idle_timeout after the request went upstream."""
    origin = silent_origin
    g = silent_gw(make_gw, bed, origin)
    mark = g.audit.mark()
    sock = socket.create_connection(g.sluice.address, timeout=30)
    client = "%s:%d" % sock.getsockname()
    try:
        sock.sendall(request_bytes("GET", origin.url("/stall"), origin.host()))
        wait_until(lambda: origin.accepted, 10, "sluice to connect to the origin")
        start = time.monotonic()
        pipelined = request_bytes("GET", origin.url("/next"), origin.host())
        sent, answered = 0, False
        while not answered and time.monotonic() - start < 3 * IDLE + 2:
            if sent < len(pipelined):
                sock.sendall(pipelined[sent:sent + 1])
                sent += 1
            readable, _, _ = select.select([sock], [], [], 0.25)
            answered = bool(readable)
        seconds = time.monotonic() - start
        assert answered, "no answer %.1fs after the request, %d bytes trickled" % (seconds, sent)
        resp = HttpReader(PlainStream(sock)).read_response()
    finally:
        sock.close()
    expect.denial(resp, 504, "upstream_timeout")
    assert_about(seconds, IDLE, "504 while the client trickled bytes")
    rec = g.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, decision="deny", reason="upstream_timeout", status=504)


def test_upload_to_an_origin_that_never_reads_holds_bounded_memory(make_gw, bed,
                                                                   silent_origin):
    """Edge case, the upstream leg: a client streams a 1 GiB body as fast as it can to an
    origin that never reads. sluice stops reading the client once its queue toward the origin
    is backed up, so the client can push only what the sockets' buffers hold; sluice's memory
    stays flat, and the client gets 504 upstream_timeout about idle_timeout after the body
    stopped moving."""
    origin = silent_origin
    g = silent_gw(make_gw, bed, origin)
    pid = g.sluice.proc.pid
    mark = g.audit.mark()
    sock = socket.create_connection(g.sluice.address, timeout=30)
    client = "%s:%d" % sock.getsockname()
    chunk = b"\0" * 65536
    pushed = 0
    base = peak = rss_kib(pid)
    try:
        sock.sendall(b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n" % (
            origin.url("/upload").encode(), origin.host().encode(), 2**30))
        start = time.monotonic()
        sock.setblocking(False)
        answered = False
        while not answered and time.monotonic() - start < 3 * IDLE + 5:
            readable, writable, _ = select.select([sock], [sock], [], 0.05)
            answered = bool(readable)
            if writable and not answered:
                try:
                    pushed += sock.send(chunk)
                except BlockingIOError:
                    pass
            peak = max(peak, rss_kib(pid))
        seconds = time.monotonic() - start
        sock.settimeout(30)
        assert answered, "no answer %.1fs after the request, %d MiB pushed" % (
            seconds, pushed >> 20)
        resp = HttpReader(PlainStream(sock)).read_response()
    finally:
        sock.close()
    report = "the client pushed %.1f MiB; sluice's RSS went %d -> %d KiB" % (
        pushed / 2**20, base, peak)
    expect.denial(resp, 504, "upstream_timeout")
    assert peak - base < growth_limit_kib(g), report
    assert pushed < 2**30 // 4, report
    rec = g.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, decision="deny", reason="upstream_timeout", status=504)
    assert 0 < rec["req_bytes"] < pushed, rec
