"""A report-mode sandbox (docs/policy.md#report-mode): what only the rules would
deny is recorded as "report" and forwarded, but the address checks and the SNI/Host binding
still hold.

On this bed every origin is on 127/8, which only a *matching* rule's `ips` opens. A request
that no rule matches therefore has no address it may use, and report mode must not become a
way around that: the "forward anyway" half of report mode needs a globally routable origin
and is not reachable on a loopback-only bed (see test_report_mode_opens_no_address)."""
import uuid

import pytest

import expect
from gateway import Gateway, Runner
from http1 import request_bytes


@pytest.fixture(scope="module")
def report_gw(sluice_binary, bed):
    runner = Runner(sluice_binary, bed)
    try:
        yield Gateway(runner.start(mode="report"), bed)
    finally:
        runner.stop_all()


def test_report_mode_allows_what_the_rules_allow(report_gw):
    g = report_gw
    mark = g.audit.mark()
    ex = g.tunnel("api.allowed.test", [request_bytes("GET", "/v1/public/hello.txt",
                                                     "api.allowed.test", keep_alive=False)])
    assert (ex.final.status, ex.final.body) == (200, b"public hello\n")
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="allow", rule="api", reason=None, status=200)


def test_report_mode_opens_no_address(report_gw, bed):
    """other.test matches no rule, so no rule's `ips` opens its address 127.0.0.20:
    ip_denied, even in report mode, and nothing reaches the origin. (A host no other test
    of this module uses, so no pooled upstream connection is involved.)"""
    g = report_gw
    m = uuid.uuid4().hex[:12]
    mark = g.audit.mark()
    ex = g.tunnel("other.test", [request_bytes("GET", "/whoami.txt?m=" + m, "other.test")])
    expect.denial(ex, 403, "ip_denied")
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="ip_denied", upstream=None)
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]]


def test_report_mode_keepalive_opens_no_address(report_gw, bed):
    """/v1/private/ matches no rule either (the api rule allows /v1/public/ only). After an
    allowed request on the same connection, the upstream connection that one opened to
    127.0.0.20 is not one the second request may use."""
    g = report_gw
    m = uuid.uuid4().hex[:12]
    ex = g.tunnel("api.allowed.test", [
        request_bytes("GET", "/v1/public/hello.txt", "api.allowed.test"),
        request_bytes("GET", "/v1/private/secret.txt?m=" + m, "api.allowed.test")])
    assert ex.responses[0].status == 200
    expect.denial(ex.responses[1], 403, "ip_denied")
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]]


def test_report_mode_still_refuses_internal_addresses(report_gw, bed):
    g = report_gw
    canary = bed.nginx.canary_mark("internal")
    mark = g.audit.mark()
    ex = g.tunnel("loop.wild.test", [request_bytes("GET", "/", "loop.wild.test")])
    expect.denial(ex, 403, "ip_denied")
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="ip_denied")
    bed.nginx.barrier()
    assert bed.nginx.canary_hits_since("internal", canary) == []


def test_report_mode_still_refuses_host_mismatch(report_gw, bed):
    g = report_gw
    m = uuid.uuid4().hex[:12]
    ex = g.tunnel("allowed.test", [request_bytes("GET", "/whoami.txt?m=" + m, "other.test")])
    expect.denial(ex, 403, "host_mismatch")
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]]


def test_report_mode_still_refuses_ip_literals(report_gw):
    ex = report_gw.tunnel("127.0.0.66")
    expect.denial(ex, 403, "ip_literal")


# I2/I10/H1/S3 of docs/threat-model.md in report mode (docs/policy.md#report-mode: everything but
# not_allowed_* is still denied): report mode must not become a way around the name, port-syntax,
# framing and SNI checks.

@pytest.mark.parametrize("host", ["2130706433", "0177.0.0.1", "0x7f.1", "allowed.test.."])
def test_report_mode_still_refuses_bad_hosts(report_gw, bed, host):
    g = report_gw
    canary = bed.nginx.canary_mark("internal")
    mark = g.audit.mark()
    ex = g.tunnel(host, [request_bytes("GET", "/", "allowed.test")], sni="allowed.test")
    expect.denial(ex, 403, "bad_host")
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="bad_host", upstream=None)
    authority = "%s:%d" % (host, g.p)
    fwd = g.forward([request_bytes("GET", "http://%s/" % authority, authority)])
    expect.denial(fwd, 403, "bad_host")
    bed.nginx.barrier()
    assert bed.nginx.canary_hits_since("internal", canary) == []


@pytest.mark.parametrize("port", ["0443", "+443", "0x1bb", "65979"])
def test_report_mode_still_refuses_odd_port_spellings(report_gw, port):
    import clients
    ex = clients.tunnel(report_gw.sluice.address, "allowed.test:" + port)
    expect.denial(ex, 400, "bad_request")


def test_report_mode_still_refuses_ambiguous_framing(report_gw, bed):
    g = report_gw
    m = uuid.uuid4().hex[:12]
    req = (b"POST /upload/%s HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 4\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled-%s HTTP/1.1\r\n"
           b"Host: evil.test\r\n\r\n" % (m.encode(), m.encode()))
    ex = g.tunnel("allowed.test", [req])
    expect.denial(ex, 400, "bad_request")
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]]


def test_report_mode_still_refuses_sni_mismatch(report_gw):
    g = report_gw
    mark = g.audit.mark()
    ex = g.tunnel("allowed.test", [request_bytes("GET", "/", "evil.test")], sni="evil.test")
    assert ex.tls_error is not None and ex.responses == []
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="sni_mismatch", status=None)
