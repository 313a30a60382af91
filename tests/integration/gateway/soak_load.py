"""The traffic of the soak and of the kill -9 test: client connections through sluice's explicit
proxy (CONNECT tunnels with TLS, and absolute-form http), each request carrying a unique marker
in its URL (or, for a CONNECT refused by name, in the name), and what became of each request
(Outcome). Plans say what one connection does; LoadThreads run plans in a loop from several
threads until told to stop.

Nothing here sleeps for correctness: the only waits are the pacing of the latency sampler (a
well-behaved client's rhythm) and socket timeouts that turn a hung exchange into an outcome.
"""
from dataclasses import dataclass, field
import random
import re
import socket
import ssl
import threading
import time

from http1 import ConnectionClosed, HttpReader
from oracles import marker
from tlsraw import PlainStream

TIMEOUT = 30  # seconds for any one read or write: far beyond every deadline sluice applies
MARKER = re.compile(r"m=?([0-9a-f]{12})")


@dataclass
class Outcome:
    """One request as its client saw it."""
    marker: str           # in the URL, or in the name of a CONNECT refused by name
    sandbox: str
    kind: str             # the plan's kind, e.g. "nginx-tunnel", "fault-forward:reset"
    status: int = None    # the status line received, None when no answer came
    reason: str = None    # Sluice-Reason, when sluice answered itself
    complete: bool = False  # the whole response (head and body) arrived
    seconds: float = 0.0
    error: str = None
    expect: frozenset = frozenset()  # acceptable (status, complete) pairs; empty: any


@dataclass
class Request:
    method: str
    path: str                 # with a "{m}" where the marker goes
    host: str = None          # the Host header (default: the plan's name[:port])
    expect: frozenset = frozenset()
    label: str = ""


@dataclass
class Plan:
    kind: str
    mode: str                 # "tunnel" or "forward"
    name: str
    port: int
    requests: list = field(default_factory=list)
    connect_marker: bool = False  # the name holds "{m}": a CONNECT refused by name
    connect_expect: frozenset = frozenset({200})
    connect_fields: tuple = ()  # more fields of the CONNECT


@dataclass
class Proxy:
    """A sandbox's listener as its clients see it."""
    sandbox: str
    address: tuple
    ca_pem: str
    _ctx: ssl.SSLContext = None

    def context(self):
        if self._ctx is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(self.ca_pem)
            ctx.set_alpn_protocols(["http/1.1"])
            self._ctx = ctx
        return self._ctx


class _Reader(HttpReader):
    def body(self, resp, method):
        return self._body(resp, method)


def _head_bytes(method, target, host, keep_alive=True, fields=()):
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: " + host, "User-Agent: sluice-soak"]
    lines += ["%s: %s" % kv for kv in fields]
    if not keep_alive:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _exchange(stream, reader, data, method, out):
    """Sends one request and reads its answer into `out`; True if the connection can carry
    another request."""
    stream.sendall(data)
    head = reader.read_head()
    out.status, out.reason = head.status, head.sluice_reason
    reader.body(head, method)
    out.complete = True
    return not head.sluice_reason and \
        (head.header("Connection") or "").lower() != "close"


def _error_text(e):
    return "%s: %s" % (type(e).__name__, e)


FAILURES = (ConnectionClosed, OSError, ssl.SSLError, ValueError)


def run_plan(proxy, plan, outcomes):
    """One connection: CONNECT (and TLS) or plain, then the plan's requests in turn, each
    appended to `outcomes` as it ends; a request after the connection ended is not sent."""
    connect_mark = marker() if plan.connect_marker else None
    name = plan.name.format(m=connect_mark) if connect_mark else plan.name
    authority = "%s:%d" % (name, plan.port)
    started = time.monotonic()
    try:
        sock = socket.create_connection(proxy.address, timeout=TIMEOUT)
    except OSError as e:
        outcomes.append(Outcome(connect_mark or marker(), proxy.sandbox, plan.kind + ":connect",
                                error=_error_text(e)))
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stream = PlainStream(sock)
        if plan.mode == "tunnel":
            first = Outcome(connect_mark or marker(), proxy.sandbox, plan.kind + ":connect",
                            expect=frozenset((s, True) for s in plan.connect_expect))
            try:
                reader = _Reader(stream)
                _exchange(stream, reader, _head_bytes("CONNECT", authority, authority,
                                                      fields=plan.connect_fields),
                          "CONNECT", first)
            except FAILURES as e:
                first.error = _error_text(e)
            first.seconds = time.monotonic() - started
            if first.status != 200 or connect_mark:
                outcomes.append(first)  # refused (or cut): the CONNECT was the request
                return
            # wrap_socket detaches `sock`: from here on the TLS socket is what to close
            stream = sock = proxy.context().wrap_socket(sock, server_hostname=name)
        reader = _Reader(stream)
        for req in plan.requests:
            m = marker()
            target = req.path.format(m=m)
            if plan.mode == "forward":
                target = "http://%s%s" % (authority, target)
            out = Outcome(m, proxy.sandbox, plan.kind + (":" + req.label if req.label else ""),
                          expect=req.expect)
            at = time.monotonic()
            try:
                more = _exchange(stream, reader,
                                 _head_bytes(req.method, target, req.host or authority),
                                 req.method, out)
            except FAILURES as e:
                out.error, more = _error_text(e), False
            out.seconds = time.monotonic() - at
            outcomes.append(out)
            if not more:
                return
    except FAILURES as e:  # the TLS handshake inside the tunnel
        outcomes.append(Outcome(marker(), proxy.sandbox, plan.kind + ":tls",
                                error=_error_text(e)))
    finally:
        sock.close()


class LoadThreads:
    """`threads` threads per proxy, each running plans drawn by `draw(rng)` until stop()."""

    def __init__(self, proxies, draw, threads, seed=1):
        self.outcomes = []
        self._connections = []  # one count per thread (a shared += could lose counts)
        self._stop = threading.Event()
        self._threads = []
        for p, proxy in enumerate(proxies):
            for i in range(threads):
                rng = random.Random(seed * 1000 + p * 100 + i)
                self._connections.append(0)
                self._threads.append(threading.Thread(
                    target=self._loop, args=(len(self._threads), proxy, draw, rng),
                    name="load-%s-%d" % (proxy.sandbox, i), daemon=True))

    @property
    def connections(self):
        return sum(self._connections)

    def _loop(self, index, proxy, draw, rng):
        while not self._stop.is_set():
            run_plan(proxy, draw(rng), self.outcomes)
            self._connections[index] += 1

    def start(self):
        for t in self._threads:
            t.start()
        return self

    def stop(self, timeout=60):
        self._stop.set()
        for t in self._threads:
            t.join(timeout)
        stuck = [t.name for t in self._threads if t.is_alive()]
        assert not stuck, "load threads still running %ds after stop: %s" % (timeout, stuck)
        return self.outcomes


def sample_latency(proxy, plan, seconds, interval):
    """A well-behaved client: one plan (a new connection) every `interval` seconds, or as soon
    as the previous one ended if it took longer, for `seconds`. Returns the outcomes, each
    with `seconds` the whole connection's time."""
    outcomes = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        at = time.monotonic()
        mine = []
        run_plan(proxy, plan, mine)
        took = time.monotonic() - at
        for out in mine:
            out.seconds = took
        outcomes += mine
        pause = interval - took
        if pause > 0:
            time.sleep(pause)  # pacing of the client, not a wait for an event
    return outcomes


def percentile(values, q):
    """The q-th percentile (0..100) by the nearest-rank method; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def markers_of(record):
    """The markers in an audit record: in its URL, or in its host (a CONNECT refused by name)."""
    text = "%s %s" % (record.get("url") or "", record.get("host") or "")
    return MARKER.findall(text)
