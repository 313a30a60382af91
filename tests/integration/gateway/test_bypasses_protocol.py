"""docs/threat-model.md#shared-cdns and #protocol-escapes on the explicit proxy: the request target
and Host inside and outside the tunnel (S2, S5, S6, S7), what may follow a TLS handshake (T2),
upgrades (T3), and which absolute-form schemes the proxy listener takes (T7).

Point 3 of docs/wire.md#the-invariant (Host and absolute-form authority equal H, port absent or
equal), docs/wire.md#explicit-proxy, #upgrades, #denials."""
import os

import pytest

import clients
import expect
from gateway import Gateway, Runner
from h2client import H2Tunnel
from http1 import HttpReader, request_bytes
from netutil import free_port
from oracles import DnsMark, cdn_hits, get, marker
from sluice_proc import PROXY_ADDRESS
from tlsraw import PlainStream, TLSStream, client_hello, open_proxy


# --- S2: SNI of another name, Host of the allowed one -----------------------------------------

def test_sni_of_other_tenant_with_allowed_host(gw, bed):
    """Edge case (S2): CONNECT allowed.test, ClientHello SNI evil.test, then Host allowed.test:
    refused at the ClientHello with a TLS alert (sni_mismatch), no request is read."""
    m, mark = marker(), gw.audit.mark()
    ex = gw.tunnel("allowed.test", [get("/whoami.txt?m=" + m, host="allowed.test")],
                   sni="evil.test")
    assert ex.tls_error is not None and ex.tls_error.kind == "alert", ex.tls_error
    assert ex.responses == []
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="connect", decision="deny", reason="sni_mismatch", sni="evil.test",
                  status=None, upstream=None)
    assert cdn_hits(bed, m) == []


# --- S5: absolute-form inside the tunnel ----------------------------------------------------------

INSIDE_REFUSED = {(400, "bad_request"), (403, "host_mismatch")}


@pytest.mark.parametrize("target", ["http://evil.test/x", "http://evil.test:{t}/x",
                                    "http://allowed.test:{t}/x", "https://evil.test:{t}/x",
                                    "https://evil.test/x", "https://allowed.test:1/x"])
def test_absolute_form_in_tunnel_naming_anything_else_is_refused(gw, bed, target):
    """Edge case (S5): inside the tunnel for allowed.test, an absolute-form target that is not
    https://allowed.test[:T] (another scheme, another name, another port), with Host
    allowed.test: refused (docs/wire.md#explicit-proxy, "Inside a tunnel"), never forwarded,
    connection closed."""
    m, mark = marker(), gw.audit.mark()
    target = target.format(t=gw.t) + "?m=" + m
    ex = gw.tunnel("allowed.test", [get(target, host="allowed.test")])
    got = (ex.final.status, ex.final.sluice_reason)
    assert got in INSIDE_REFUSED, got
    expect.denial(ex, *got)
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason=got[1], status=got[0], upstream=None)
    assert cdn_hits(bed, m) == []
    assert not [e for e in bed.nginx.access("cdn") if e["host"] == "evil.test" and m in e["uri"]]


@pytest.mark.parametrize("authority", ["allowed.test:{t}", "ALLOWED.TEST.:{t}", "allowed.test"],
                         ids=["with_port", "upper_dot", "port_absent"])
def test_absolute_form_in_tunnel_naming_the_tunnel_is_forwarded_in_origin_form(gw, bed,
                                                                                authority):
    """Edge case (S5): GET https://allowed.test[:T]/whoami.txt?m inside the tunnel (point 3 of
    docs/wire.md#the-invariant: the URI authority equals H, its port absent or equal to the
    connection's): forwarded, and the origin receives an origin-form request line, not the absolute
    URL."""
    m = marker()
    target = "https://%s/whoami.txt?m=%s" % (authority.format(t=gw.t), m)
    ex = gw.tunnel("allowed.test", [get(target, host="allowed.test", keep_alive=False)])
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n"), ex.final
    entry = bed.nginx.wait_access("cdn", lambda e: m in e["uri"])[0]
    assert entry["request"] == "GET /whoami.txt?m=%s HTTP/1.1" % m, entry["request"]
    assert entry["host"] == "allowed.test", entry


def test_absolute_form_in_tunnel_with_other_host_header(gw, bed):
    """Edge case (S5+S1): the URI names the tunnel, the Host header another tenant."""
    m = marker()
    target = "https://allowed.test:%d/whoami.txt?m=%s" % (gw.t, m)
    ex = gw.tunnel("allowed.test", [get(target, host="evil.test")])
    expect.denial(ex, 403, "host_mismatch")
    assert cdn_hits(bed, m) == []


# --- S6: explicit proxy, absolute URI vs Host ---------------------------------------------------

def fwd_url(gw, m, name="allowed.test"):
    return gw.url(name, "/whoami.txt?m=" + m, scheme="http")


@pytest.mark.parametrize("host", ["evil.test", "evil.test:{p}", "allowed.test:1",
                                  "other.test"])
def test_forward_uri_and_host_disagree(gw, bed, host):
    """Edge case (S6): GET http://allowed.test:P/ with another Host (another tenant of the
    same CDN, or another port): 403 host_mismatch, nothing forwarded (the origin routes on
    Host, so forwarding the client's Host would reach the other tenant)."""
    m, mark = marker(), gw.audit.mark()
    ex = gw.forward([request_bytes("GET", fwd_url(gw, m), host.format(p=gw.p))])
    expect.denial(ex, 403, "host_mismatch")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="forward", decision="deny", reason="host_mismatch", status=403,
                  upstream=None, host=host.format(p=gw.p))
    assert cdn_hits(bed, m) == []


def test_forward_host_without_port_matches(gw, bed):
    """Edge case (S6): Host allowed.test without the URI's port: "a port that is
    absent" (docs/wire.md#the-invariant, point 3): forwarded, and the origin sees Host
    allowed.test."""
    m = marker()
    ex = gw.forward([request_bytes("GET", fwd_url(gw, m), "allowed.test", keep_alive=False)])
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")
    entry = bed.nginx.wait_access("cdn", lambda e: m in e["uri"])[0]
    assert entry["host"] == "allowed.test"
    assert entry["request"] == "GET /whoami.txt?m=%s HTTP/1.1" % m, entry["request"]


def test_forward_missing_host(gw, bed):
    """Edge case (S6): an absolute-form HTTP/1.1 request without Host: "exactly one
    Host field" (docs/wire.md#the-invariant, point 3): 403 host_missing."""
    m = marker()
    ex = gw.forward([request_bytes("GET", fwd_url(gw, m), None)])
    expect.denial(ex, 403, "host_missing")
    assert cdn_hits(bed, m) == []


def test_forward_duplicate_host(gw, bed):
    m = marker()
    ex = gw.forward([request_bytes("GET", fwd_url(gw, m), "allowed.test:%d" % gw.p,
                                   headers=[("Host", "evil.test")])])
    expect.denial(ex, 403, "host_duplicate")
    assert cdn_hits(bed, m) == []


# --- S7: the next request on a forwarding connection -------------------------------------------

def test_forward_keepalive_second_request_to_denied_host(gw, bed):
    """Edge case (S7): two absolute-form requests on one proxy connection, the second to a
    host the policy does not allow (on the same CDN address): each is decided on its own URL;
    the second gets 403 not_allowed_host and never reaches the CDN."""
    m1, m2, mark = marker(), marker(), gw.audit.mark()
    ex = gw.forward([request_bytes("GET", fwd_url(gw, m1), "allowed.test:%d" % gw.p),
                     request_bytes("GET", fwd_url(gw, m2, "evil.test"), "evil.test:%d" % gw.p)])
    first, second = ex.responses
    assert (first.status, first.body) == (200, b"allowed.test\n")
    expect.denial(second, 403, "not_allowed_host")
    expect.closed(ex)
    assert cdn_hits(bed, m2) == []
    recs = gw.audit.wait(mark, lambda r: r["client"] == ex.client, count=2)
    assert [(r["decision"], r["reason"]) for r in recs] == \
        [("allow", None), ("deny", "not_allowed_host")]


def test_forward_pipelined_second_request_with_other_host(gw, bed):
    """Edge case (S7): the same URL twice, pipelined in one write, the second with Host
    evil.test: 403 host_mismatch, and a third pipelined request is never read."""
    m1, m2 = marker(), marker()
    ex = gw.forward([request_bytes("GET", fwd_url(gw, m1), "allowed.test:%d" % gw.p),
                     request_bytes("GET", fwd_url(gw, m2), "evil.test:%d" % gw.p),
                     request_bytes("GET", fwd_url(gw, m2 + "-3"), "allowed.test:%d" % gw.p)],
                    pipeline=True)
    assert ex.responses[0].status == 200
    expect.denial(ex.responses[1], 403, "host_mismatch")
    assert len(ex.responses) == 2
    expect.closed(ex)
    assert cdn_hits(bed, m2) == []


# --- T2: what follows the TLS handshake ----------------------------------------------------------

@pytest.mark.parametrize("payload", [b"\x00\x01binary-{m}\r\n\r\n", b"SSH-2.0-x-{m}\r\n",
                                     b"\x16\x03\x01\x00\x05{m}"],
                         ids=["binary", "ssh_banner", "tls_in_tls"])
def test_non_http_inside_tls_is_refused(gw, bed, payload):
    """Edge case (T2): after a TLS handshake for allowed.test, bytes that are not HTTP: 400
    bad_request (or a close), never relayed to the origin."""
    m, mark = marker(), gw.audit.mark()
    data = payload.replace(b"{m}", m.encode())
    sock, tls, reader = clients.open_tls_tunnel(gw.sluice.address, gw.authority("allowed.test"),
                                                gw.sluice.ca_pem)
    client = "%s:%d" % sock.getsockname()
    tls.sendall(data)
    tail, how = reader.read_to_close(timeout=15)
    sock.close()
    assert how in ("eof", "reset"), "tunnel still open after non-HTTP bytes"
    if tail:
        assert tail.startswith(b"HTTP/1.1 400 "), tail[:200]
        assert b"Sluice-Reason: bad_request\r\n" in tail, tail[:400]
    rec = gw.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, decision="deny", reason="bad_request", status=400 if tail else None,
                  upstream=None, sni="allowed.test")
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["request"] or m in e["uri"]]


@pytest.mark.parametrize("alpn", [("x-custom",), ("imap",), ("spdy/3", "h3"), ("h2c",),
                                  ("h2c", "x-custom")])
def test_alpn_other_than_h2_and_http11_selects_nothing(gw, alpn):
    """Edge case (T2): the client offers only protocols sluice does not speak (h2c among them:
    it is never offered, docs/wire.md#http2): the handshake completes with no ALPN selected
    (docs/wire.md#tls-toward-the-sandbox: sluice offers h2 and http/1.1), and what follows is
    parsed as HTTP/1.1 and recorded so."""
    mark = gw.audit.mark()
    ex = gw.tunnel("allowed.test", [get("/whoami.txt", keep_alive=False)], alpn=alpn)
    assert ex.tls_error is None, ex.tls_error
    assert ex.alpn is None, "ALPN %r selected" % ex.alpn
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="allow", proto="http/1.1")


@pytest.mark.parametrize("alpn", [("h2",), ("x-custom", "h2")])
def test_alpn_h2_offered_with_others_selects_h2_and_streams_are_checked(gw, bed, alpn):
    """Edge case (T2, S8): h2 offered alone or after a protocol sluice does not speak: h2 is
    selected, and what follows is HTTP/2 whose streams are checked each on its own: a stream
    for another tenant is 403 host_mismatch, never forwarded."""
    m, mark = marker(), gw.audit.mark()
    with H2Tunnel(gw.sluice.address, gw.authority("allowed.test"), gw.sluice.ca_pem,
                  alpn=alpn) as t:
        assert t.alpn == "h2", "ALPN %r selected" % t.alpn
        t.start()
        denied = t.one("GET", "/whoami.txt?m=" + m, authority="evil.test")
        ok = t.one("GET", "/whoami.txt")
    expect.denial(denied, 403, "host_mismatch")
    assert (ok.status, ok.body) == (200, b"allowed.test\n"), ok.describe()
    assert cdn_hits(bed, m) == []
    recs = gw.audit.wait(mark, lambda r: r["client"] == t.client, count=2)
    assert sorted((r["decision"], r["reason"], r["proto"], r["host"]) for r in recs) == \
        [("allow", None, "h2", gw.authority("allowed.test")),
         ("deny", "host_mismatch", "h2", "evil.test")], recs


# --- T3: upgrades ---------------------------------------------------------------------------------

WS_HEADERS = [("Connection", "keep-alive, Upgrade"), ("Upgrade", "websocket"),
              ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")]


@pytest.mark.parametrize("upgrade_fields", [
    WS_HEADERS,
    [("Upgrade", "WebSocket"), ("Sec-WebSocket-Version", "13")],  # no Connection: still one
    [("Connection", "Upgrade"), ("Upgrade", "h2c, websocket")],
], ids=["standard", "no-connection-field", "listed-after-h2c"])
def test_websocket_upgrade_then_pipelined_request_to_other_tenant(gw, bed, upgrade_fields):
    """Edge case (T3a/b): `Upgrade: websocket`, and in the same write a second request with Host
    evil.test. No rule of the bed has `websocket: true`, so the upgrade is refused
    (docs/wire.md#websocket: 403 upgrade_not_allowed, however the Upgrade field is written) and
    the connection closes: nothing of either request reaches nginx, and the connection never
    turns into a blind tunnel. (Before the WebSocket rules, the upgrade was dropped and the
    request forwarded as plain HTTP/1.1.)"""
    m1, m2, mark = marker(), marker(), gw.audit.mark()
    ex = gw.tunnel("allowed.test", [
        request_bytes("GET", "/whoami.txt?m=" + m1, "allowed.test",
                      headers=upgrade_fields + [("X-Test", m1)]),
        get("/whoami.txt?m=" + m2, host="evil.test")], pipeline=True)
    assert len(ex.responses) == 1, ex.responses
    expect.denial(ex.responses[0], 403, "upgrade_not_allowed")
    expect.closed(ex)
    assert cdn_hits(bed, m1) == [] and cdn_hits(bed, m2) == []
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="upgrade_not_allowed", rule=None, status=403,
                  upstream=None, upgrade="websocket", proto="http/1.1", upstream_proto=None)


def test_websocket_upgrade_on_forwarding_then_other_host(gw, bed):
    """Edge case (T3): the same on the plain listener: the absolute-form upgrade is refused
    upgrade_not_allowed and the connection closes before the second request (for a host the
    policy does not allow) is read."""
    m1, m2, mark = marker(), marker(), gw.audit.mark()
    ex = gw.forward([
        request_bytes("GET", fwd_url(gw, m1), "allowed.test:%d" % gw.p, headers=WS_HEADERS),
        request_bytes("GET", fwd_url(gw, m2, "evil.test"), "evil.test:%d" % gw.p)],
        pipeline=True)
    assert len(ex.responses) == 1, ex.responses
    expect.denial(ex.responses[0], 403, "upgrade_not_allowed")
    expect.closed(ex)
    assert cdn_hits(bed, m1) == [] and cdn_hits(bed, m2) == []
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="forward", decision="deny", reason="upgrade_not_allowed",
                  upgrade="websocket")


def test_h2c_upgrade_is_not_forwarded(gw, bed):
    """Edge case (T3c): `Upgrade: h2c` + `HTTP2-Settings` (listed in Connection): forwarded as
    plain HTTP/1.1 without Upgrade and HTTP2-Settings (docs/wire.md#upgrades), answered 200,
    never 101."""
    m = marker()
    ex = gw.tunnel("allowed.test", [request_bytes(
        "GET", "/whoami.txt?m=" + m, "allowed.test", keep_alive=False,
        headers=[("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"),
                 ("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")])])
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n"), ex.final
    entry = bed.nginx.wait_access("cdn", lambda e: m in e["uri"])[0]
    assert (entry["upgrade"], entry["http2_settings"]) == ("", ""), entry


def test_connect_inside_the_tunnel_is_refused(gw, bed):
    """Edge case (T3/T4 shape): a CONNECT request inside the MITM'd session (a tunnel in the
    tunnel, to another host): refused, nothing forwarded, connection closed."""
    mark = gw.audit.mark()
    ex = gw.tunnel("allowed.test", [b"CONNECT evil.test:%d HTTP/1.1\r\nHost: evil.test:%d\r\n\r\n"
                                    % (gw.t, gw.t)])
    got = (ex.final.status, ex.final.sluice_reason)
    assert got in INSIDE_REFUSED, got
    expect.denial(ex, *got)
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", upstream=None)
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if e["method"] == "CONNECT"]


# --- T7: schemes and forms on the proxy listener ------------------------------------------------

@pytest.mark.parametrize("url", ["ftp://allowed.test/x", "gopher://allowed.test:{p}/_x",
                                 "ws://allowed.test:{p}/x", "wss://allowed.test/x",
                                 "file://allowed.test/etc/passwd", "dict://allowed.test:{p}/x"])
def test_other_scheme_is_not_allowed_scheme(gw, bed, url):
    """Edge case (T7): absolute-form URLs of other schemes: 403 not_allowed_scheme
    (docs/wire.md#explicit-proxy, "On the proxy listener"), allowed.test is not resolved, nothing
    forwarded."""
    m, mark = marker(), gw.audit.mark()
    url = url.format(p=gw.p) + "?m=" + m
    authority = url.split("/")[2]
    ex = gw.forward([request_bytes("GET", url, authority)])
    expect.denial(ex, 403, "not_allowed_scheme")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="forward", decision="deny", reason="not_allowed_scheme",
                  status=403, upstream=None)
    assert cdn_hits(bed, m) == []


def test_file_url_without_authority_is_refused(gw):
    """Edge case (T7): file:///etc/passwd has no host at all: refused (a bad request, or the
    scheme), nothing read anywhere."""
    ex = gw.forward([request_bytes("GET", "file:///etc/passwd", "allowed.test")])
    got = (ex.final.status, ex.final.sluice_reason)
    assert got in {(400, "bad_request"), (403, "not_allowed_scheme")}, got
    expect.denial(ex, *got)
    assert b"root:" not in ex.final.body


def test_https_absolute_form_on_proxy_listener_is_bad_request(gw, bed):
    """Edge case (T7): GET https://allowed.test:T/ on the plain listener asks sluice to
    originate TLS: 400 bad_request (docs/wire.md#explicit-proxy: use CONNECT)."""
    m, mark = marker(), gw.audit.mark()
    url = gw.url("allowed.test", "/whoami.txt?m=" + m)
    ex = gw.forward([request_bytes("GET", url, "allowed.test:%d" % gw.t)])
    expect.denial(ex, 400, "bad_request")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="bad_request", status=400, upstream=None)
    assert cdn_hits(bed, m) == []


@pytest.mark.parametrize("line", ["GET /whoami.txt?m={m} HTTP/1.1", "OPTIONS * HTTP/1.1",
                                  "GET allowed.test:{p}/whoami.txt?m={m} HTTP/1.1"],
                         ids=["origin_form", "asterisk_form", "authority_without_scheme"])
def test_non_absolute_target_on_proxy_listener_is_bad_request(gw, bed, line):
    """Edge case (T7): a request to the proxy listener that is neither CONNECT nor an
    absolute URL: 400 bad_request, nothing forwarded (even with Host allowed.test)."""
    m, mark = marker(), gw.audit.mark()
    raw = ("%s\r\nHost: allowed.test:%d\r\n\r\n" % (line.format(m=m, p=gw.p), gw.p)).encode()
    ex = gw.forward([raw])
    expect.denial(ex, 400, "bad_request")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="bad_request", status=400, upstream=None)
    assert cdn_hits(bed, m) == []


# --- S1/S3 variants: the Host field name's case ---------------------------------------------------

@pytest.mark.parametrize("fields,reason", [
    ([("HOST", "evil.test")], "host_mismatch"),
    ([("hOsT", "evil.test")], "host_mismatch"),
    ([("Host", "allowed.test"), ("HOST", "evil.test")], "host_duplicate"),
    ([("host", "allowed.test"), ("Host", "evil.test")], "host_duplicate"),
], ids=["upper", "mixed", "Host_then_HOST", "host_then_Host"])
def test_host_field_name_case_does_not_hide_a_host(gw, bed, fields, reason):
    """Edge case (S1): field names are case-insensitive, so `HOST: evil.test` is the Host
    field (mismatch), and `Host` plus `HOST` are two Host fields (duplicate): refused, nothing
    forwarded (a case-sensitive lookup would pass one and forward the other)."""
    m = marker()
    raw = b"GET /whoami.txt?m=%s HTTP/1.1\r\n" % m.encode() + \
        b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in fields) + \
        b"Connection: close\r\n\r\n"
    ex = gw.tunnel("allowed.test", [raw])
    expect.denial(ex, 403, reason)
    expect.closed(ex)
    assert cdn_hits(bed, m) == []


# --- I10/T7 crossovers: a rule's port for another scheme ---------------------------------------

def test_connect_to_the_plain_http_port_is_not_allowed_port(gw, bed):
    """Edge case (I10/T7): allowed.test allows http on P and https on T; CONNECT (https) to P
    is not allowed: 403 not_allowed_port, nothing tunnelled to the plain port."""
    mark = gw.audit.mark()
    ex = gw.tunnel("allowed.test", [get("/")], port=gw.p)
    assert ex.denied_at_connect
    expect.denial(ex, 403, "not_allowed_port")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.connect_denial_record(rec, "not_allowed_port", "allowed.test", gw.p)


def test_forward_to_the_tls_port_is_not_allowed_port(gw, bed):
    """Edge case (I10/T7): plain http://allowed.test:T/ (T is allowed for https only)."""
    m = marker()
    url = "http://allowed.test:%d/whoami.txt?m=%s" % (gw.t, m)
    ex = gw.forward([request_bytes("GET", url, "allowed.test:%d" % gw.t)])
    expect.denial(ex, 403, "not_allowed_port")
    assert cdn_hits(bed, m) == []


def test_denied_connect_with_pipelined_client_hello(gw):
    """Edge case (D7/R6): CONNECT evil.test, refused at the CONNECT (Sluice-Refusal), and its
    ClientHello in one write: the 403 is the whole answer (no TLS record follows it: no
    certificate for evil.test), then close."""
    sock = open_proxy(gw.sluice.address)
    sock.sendall(b"CONNECT evil.test:%d HTTP/1.1\r\nHost: evil.test:%d\r\n"
                 b"Sluice-Refusal: at_connect\r\n\r\n" % (gw.t, gw.t) + client_hello("evil.test"))
    reader = HttpReader(PlainStream(sock))
    resp = reader.read_response("CONNECT")
    tail, how = reader.read_to_close(timeout=10)
    sock.close()
    expect.denial(resp, 403, "not_allowed_host")
    assert (tail, how) in ((b"", "eof"), (b"", "reset")), (tail[:50], how)


class _AfterTheConnect:
    """A socket whose first bytes in are the CONNECT's answer: recv() reads that head off (kept
    in `head`) and hands on only what follows it, the TLS records."""

    def __init__(self, sock):
        self.sock, self.head, self._rest = sock, None, b""

    def sendall(self, data):
        self.sock.sendall(data)

    def recv(self, n=65536):
        while self.head is None:
            data = self.sock.recv(65536)
            if not data:
                return b""
            self._rest += data
            if b"\r\n\r\n" in self._rest:
                self.head, self._rest = self._rest.split(b"\r\n\r\n", 1)
        if self._rest:
            data, self._rest = self._rest[:n], self._rest[n:]
            return data
        return self.sock.recv(n)


def test_denied_connect_with_pipelined_client_hello_in_band(gw, bed):
    """Edge case (D7/R6), in band (docs/wire.md#refusals-in-band): CONNECT evil.test and its
    ClientHello in one write: the 200, then sluice's own leaf for evil.test (the hello that came
    with the CONNECT is the tunnel's first bytes), and the request inside gets the 403; nothing
    goes upstream, and evil.test is never resolved."""
    m, dns, mark = marker(), DnsMark(bed), gw.audit.mark()
    sock = open_proxy(gw.sluice.address)
    connect = b"CONNECT evil.test:%d HTTP/1.1\r\nHost: evil.test:%d\r\n\r\n" % (gw.t, gw.t)
    wire = _AfterTheConnect(sock)
    tls = TLSStream(wire, "evil.test", gw.sluice.ca_pem,
                    hello_chunks=lambda hello: [connect + hello])
    try:
        assert wire.head == b"HTTP/1.1 200 Connection established", wire.head
        assert tls.peer_dns_names() == ["evil.test"], tls.peer_dns_names()
        tls.sendall(get("/whoami.txt?m=" + m, "evil.test"))
        resp = HttpReader(tls).read_response()
    finally:
        sock.close()
    expect.denial(resp, 403, "not_allowed_host")
    recs = gw.audit.wait(mark, lambda r: "evil.test" in (r["url"] or ""), 2)
    assert [r["method"] for r in recs] == ["CONNECT", "GET"], recs
    assert cdn_hits(bed, m) == [] and dns.asked("evil.test") == []


# --- S7: the upstream connection pool is keyed by (sandbox, H, port) ----------------------------

@pytest.fixture(scope="module")
def twin_gw(sluice_binary, bed):
    """Two sandboxes with the same (bed) policy: sbx1 and twin."""

    def edit(config, workdir):
        config["sandboxes"].append({
            "name": "twin", "listen": "%s:%d" % (PROXY_ADDRESS, free_port((PROXY_ADDRESS,))),
            "ca": os.path.join(workdir, "ca-twin"), "policy": "bed", "mode": "enforce"})
    runner = Runner(sluice_binary, bed)
    try:
        s = runner.start(edit=edit)
        yield Gateway(s.sandbox_view("sbx1"), bed), Gateway(s.sandbox_view("twin"), bed)
    finally:
        runner.stop_all()


def nginx_connection(bed, m):
    return bed.nginx.wait_access("cdn", lambda e: m in e["uri"])[0]["connection"]


def test_pooled_upstream_is_not_shared_across_sandboxes(twin_gw, bed):
    """Edge case (S7, docs/wire.md#the-invariant: "reused only for the same sandbox, H and port"):
    two sandboxes with the same policy take turns asking for https and http allowed.test, each on a
    fresh client connection; nginx's connection numbers show that no upstream connection ever
    carried requests of both sandboxes (while each sandbox does reuse its own)."""
    used = {"sbx1": set(), "twin": set()}
    for _ in range(4):
        for g in twin_gw:
            m = marker()
            ex = g.tunnel("allowed.test", [get("/whoami.txt?m=" + m, keep_alive=False)])
            assert ex.final.status == 200
            used[g.sluice.name].add(("https", nginx_connection(bed, m)))
            m = marker()
            ex = g.forward([request_bytes("GET", fwd_url(g, m), "allowed.test:%d" % g.p,
                                          keep_alive=False)])
            assert ex.final.status == 200
            used[g.sluice.name].add(("http", nginx_connection(bed, m)))
    assert not used["sbx1"] & used["twin"], "upstream connections shared: %r" % (
        used["sbx1"] & used["twin"])


def test_pooled_upstream_is_not_shared_across_names(gw, bed):
    """Edge case (S7): allowed.test, api.allowed.test and a.wild.test all live on
    127.0.0.20:T; requests for them in turn never share an upstream connection."""
    used = {}
    for _ in range(3):
        for name, path in (("allowed.test", "/whoami.txt"), ("a.wild.test", "/whoami.txt"),
                           ("api.allowed.test", "/v1/public/hello.txt")):
            m = marker()
            ex = gw.tunnel(name, [get(path + "?m=" + m, host=name, keep_alive=False)])
            assert ex.final.status == 200, (name, ex.final)
            used.setdefault(name, set()).add(nginx_connection(bed, m))
    names = sorted(used)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not used[a] & used[b], "%s and %s shared %r" % (a, b, used[a] & used[b])
