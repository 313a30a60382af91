"""The admin endpoint of a running sluice (`admin.listen`, docs/metrics.md), seen from outside: raw
HTTP/1.1 exchanges (every byte visible, how the connection ended) and Prometheus scrapes, each
parsed by prometheus_client's parser and checked for the format's own rules before a test
reads a value.

Every connection this client makes is remembered by its local port, so that a test can tell
its own connections to the admin port from any other (e.g. one sluice made through itself).
"""
from dataclasses import dataclass, field
import math
import socket

from prometheus_client.parser import text_string_to_metric_families

from netutil import free_port, listener, read_until_closed, tcp_sockets, wait_until

ADMIN_ADDRESS = "127.0.0.1"
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Family names as the parser reports them (a counter's `_total` is stripped) and their TYPE.
FAMILY_TYPES = {
    "sluice_build_info": "gauge",
    "sluice_requests": "counter",
    "sluice_connections_active": "gauge",
    "sluice_bytes": "counter",
    "sluice_connection_errors": "counter",
    "sluice_dns_queries": "counter",
    "sluice_certs_minted": "counter",
    "sluice_sandbox_resolver_answers": "counter",
    "sluice_config_reloads": "counter",
    "sluice_dns_lookup_seconds": "histogram",
    "sluice_upstream_connect_seconds": "histogram",
    "sluice_request_duration_seconds": "histogram",
    # per audit file: whether it can be written, the records kept while it cannot
    "sluice_audit_unavailable": "gauge",
    "sluice_audit_pending_records": "gauge",
    "sluice_audit_pending_bytes": "gauge",
    "sluice_audit_write_failures": "counter",
    "sluice_audit_refused_connections": "counter",
    # per policy with advisories (docs/packages.md#advisories)
    "sluice_package_advisories": "gauge",
}
# Present in every scrape (requests_total, sandbox_resolver_answers_total and
# connection_errors_total have series only where non-zero, so may be empty).
ALWAYS = set(FAMILY_TYPES) - {"sluice_requests", "sluice_sandbox_resolver_answers",
                              "sluice_connection_errors", "sluice_package_advisories"}
DNS_RESULTS = ("ok", "nodata", "nxdomain", "timeout", "error", "cached")


def with_admin(edit=None):
    """An `edit=` for make_config: admin.listen on a free port of 127.0.0.1 (chosen anew for
    every start attempt), then `edit(config, workdir, admin_port)` if given."""
    def add(config, workdir):
        port = free_port((ADMIN_ADDRESS,))
        config["admin"] = {"listen": "%s:%d" % (ADMIN_ADDRESS, port)}
        if edit is not None:
            edit(config, workdir, port)
    return add


@dataclass
class Answer:
    """One admin exchange: the parsed answer (status None when nothing came) and the close."""
    status: int = None
    reason: str = ""
    headers: list = field(default_factory=list)
    body: bytes = b""
    raw: bytes = b""
    close_how: str = None     # "eof" or "reset"; "timeout" when still open after the wait
    seconds: float = None     # from the connect to the close

    def header(self, name):
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        assert len(values) <= 1, "header %s repeated: %r" % (name, self.headers)
        return values[0] if values else None


def parse_answer(data):
    ans = Answer(raw=data)
    if not data:
        return ans
    head, sep, body = data.partition(b"\r\n\r\n")
    assert sep, "no complete response head: %r" % data[:300]
    lines = head.split(b"\r\n")
    version, status, *reason = lines[0].decode("latin-1").split(" ", 2)
    assert version == "HTTP/1.1", "status line %r" % lines[0]
    ans.status = int(status)
    ans.reason = reason[0] if reason else ""
    for line in lines[1:]:
        name, colon, value = line.decode("latin-1").partition(":")
        assert colon and name == name.strip(), "bad header line %r" % line
        ans.headers.append((name, value.strip()))
    ans.body = body
    return ans


class Admin:
    def __init__(self, sluice):
        host, port = sluice.config["admin"]["listen"].rsplit(":", 1)
        self.address = (host, int(port))
        self.sluice = sluice
        self.client_ports = set()  # local ports of every connection made here
        wait_until(lambda: listener(*self.address) is not None, 20,
                   "the admin endpoint to listen on %s:%d" % self.address)

    @property
    def port(self):
        return self.address[1]

    def exchange(self, data, close_timeout=30, half_close=False):
        """Connect, send `data` (raw bytes; may be b""), read until the server closes."""
        sock = socket.create_connection(self.address, timeout=10)
        self.client_ports.add(sock.getsockname()[1])
        try:
            try:
                if data:
                    sock.sendall(data)
                if half_close:
                    sock.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server closed while we sent (a head over its limit): read what came
            got, how, seconds = read_until_closed(sock, close_timeout)
        finally:
            sock.close()
        ans = parse_answer(got)
        ans.close_how, ans.seconds = how, seconds
        return ans

    def request(self, method, path, headers=(), **kw):
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s:%d" % self.address]
        lines += ["%s: %s" % kv for kv in headers]
        return self.exchange(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), **kw)

    def get(self, path, **kw):
        ans = self.request("GET", path, **kw)
        assert ans.close_how in ("eof", "reset"), \
            "GET %s: the admin connection was still open after the answer" % path
        return ans

    def scrape(self):
        """GET /metrics: 200 with the content type of docs/metrics.md, parsed and checked
        (Scrape)."""
        ans = self.get("/metrics")
        assert ans.status == 200, "GET /metrics: %r %r %r" % (ans.status, ans.headers,
                                                               ans.body[:300])
        assert ans.header("Content-Type") == METRICS_TYPE, ans.headers
        assert ans.header("Content-Length") == str(len(ans.body)), \
            "Content-Length %r, body of %d bytes" % (ans.header("Content-Length"), len(ans.body))
        assert (ans.header("Connection") or "").lower() == "close", ans.headers
        return Scrape(ans.body.decode("utf-8"))

    def wait_for(self, check, what, timeout=20):
        """Scrape until check(scrape) returns None (nothing wrong); returns that scrape. On
        timeout fails with check's last complaint. Counters follow the audit record or the
        event they count, not necessarily before a client sees its answer: so tests wait."""
        last = {}

        def ok():
            scrape = self.scrape()
            last["problem"] = check(scrape)
            return scrape if last["problem"] is None else None
        try:
            return wait_until(ok, timeout, what, interval=0.05)
        except TimeoutError:
            raise AssertionError("%s: %s" % (what, last.get("problem")))

    def foreign_sockets(self):
        """TCP sockets with the admin endpoint at either end, other than its listener and the
        connections this client made: a connection that reached the admin port from elsewhere
        (TIME_WAIT keeps a closed one visible for a minute)."""
        out = []
        for s in tcp_sockets():
            if s["state"] == "LISTEN":
                continue
            if s["local"] == self.address and s["remote"][1] not in self.client_ports:
                out.append(s)
            elif s["remote"] == self.address and s["local"][1] not in self.client_ports:
                out.append(s)
        return out


def _key(labels):
    return tuple(sorted(labels.items()))


class Scrape:
    """One parsed /metrics body. Parsing it checks: every sample belongs to a family with a
    TYPE (the parser makes a stray sample an untyped family of its own), the families of
    docs/metrics.md have their types, no series repeats, counters and gauges are finite and
    non-negative, requests_total shows no zero series, build_info is one sample of value 1, and each
    histogram series has cumulative buckets ending in +Inf == _count."""

    def __init__(self, text):
        self.text = text
        self.families = {}
        try:
            families = list(text_string_to_metric_families(text))
        except Exception as e:  # noqa: BLE001: any parse failure is the finding
            raise AssertionError("/metrics does not parse (%s: %s):\n%s"
                                 % (type(e).__name__, e, text[:3000]))
        seen = set()
        for fam in families:
            assert fam.name not in self.families, "family %s twice" % fam.name
            assert fam.type != "untyped", \
                "sample(s) outside any declared family: %r" % [s.name for s in fam.samples]
            self.families[fam.name] = fam
            for s in fam.samples:
                key = (s.name, _key(s.labels))
                assert key not in seen, "series repeated: %s%r" % key
                seen.add(key)
                assert not math.isnan(s.value) and s.value >= 0, "%s%r = %r" % (
                    s.name, s.labels, s.value)
        for name, typ in FAMILY_TYPES.items():
            if name in self.families:
                assert self.families[name].type == typ, \
                    "%s is a %s, expected %s" % (name, self.families[name].type, typ)
        missing = ALWAYS - set(self.families)
        assert not missing, "families missing from /metrics: %s" % sorted(missing)
        zeros = [s for s in self.samples("sluice_requests_total") if s.value == 0]
        assert not zeros, "requests_total shows zero series: %r" % zeros
        build = self.samples("sluice_build_info")
        assert len(build) == 1 and build[0].value == 1 and build[0].labels.get("version"), build
        for name, typ in FAMILY_TYPES.items():
            if typ == "histogram":
                for labels in self.histogram_series(name):
                    self.histogram(name, **labels)  # checks it

    def samples(self, name):
        return [s for fam in self.families.values() for s in fam.samples if s.name == name]

    def value(self, name, default=None, **labels):
        """The value of the one sample `name` with exactly these labels, else `default` (None:
        fail)."""
        hits = [s.value for s in self.samples(name) if s.labels == labels]
        if not hits:
            assert default is not None, "no series %s%r in /metrics:\n%s" % (
                name, labels, "\n".join(l for l in self.text.splitlines() if name in l))
            return default
        return hits[0]

    def series(self, name):
        """{label tuple: value} of every sample `name`."""
        return {_key(s.labels): s.value for s in self.samples(name)}

    def histogram_series(self, name):
        """The label sets (le excluded) of histogram `name`'s series."""
        out = []
        for s in self.samples(name + "_count"):
            if s.labels not in out:
                out.append(dict(s.labels))
        return out

    def histogram(self, name, **labels):
        """{"buckets": [(le, cumulative)], "sum", "count"} of one series, checked."""
        buckets = sorted(((float(s.labels["le"]), s.value) for s in self.samples(name + "_bucket")
                          if {k: v for k, v in s.labels.items() if k != "le"} == labels),
                         key=lambda b: b[0])
        count = self.value(name + "_count", **labels)
        total = self.value(name + "_sum", **labels)
        assert buckets and buckets[-1][0] == math.inf, "%s%r has no +Inf bucket" % (name, labels)
        assert len({le for le, _ in buckets}) == len(buckets), "%s%r: le repeated" % (name, labels)
        counts = [c for _, c in buckets]
        assert counts == sorted(counts), "%s%r: buckets not cumulative: %r" % (
            name, labels, buckets)
        assert buckets[-1][1] == count, "%s%r: +Inf bucket %r, _count %r" % (
            name, labels, buckets[-1][1], count)
        assert total >= 0 and (count > 0 or total == 0), (name, labels, total, count)
        return {"buckets": buckets, "sum": total, "count": count}

    def requests(self):
        """{(sandbox, decision, reason): count} of sluice_requests_total."""
        return {(s.labels["sandbox"], s.labels["decision"], s.labels["reason"]): s.value
                for s in self.samples("sluice_requests_total")}

    def dns(self):
        return {r: self.value("sluice_dns_queries_total", result=r) for r in DNS_RESULTS}
