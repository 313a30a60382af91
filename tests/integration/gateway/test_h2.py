"""HTTP/2 toward the sandbox (docs/wire.md#tls-toward-the-sandbox, docs/wire.md#http2): sluice offers ALPN `h2` and
`http/1.1` on a CONNECT tunnel's TLS, and each HTTP/2 stream is a request of its own: decided,
forwarded (as HTTP/1.1 to the bed's nginx, which offers no h2), denied and audited on its own.
A denial is a 403 on that stream with the headers of docs/wire.md#denials; the connection and
its other streams go on. A stream malformed under RFC 9113 §8.1-8.3 is a stream error (RST_STREAM
PROTOCOL_ERROR) and is never translated. The client is python3-h2 on a raw tunnel (h2client.py),
plus curl --http2; the origins are the bed's nginx; the oracles its access log (a marker in
the query of every request that must not arrive, after a barrier), dnsmasq's query log and the
audit log (`proto` "h2", `upstream_proto` "http/1.1")."""
import hashlib
import os
import signal
import subprocess
import time

import pytest

import expect
from h2client import H2Tunnel
from http1 import HttpReader, request_bytes
from gateway import Gateway
from netutil import clean_env, signal_handled, signal_pending, socket_state, wait_until
from nginx_conf import CLAIM_HEADERS, claim_variable
from oracles import DnsMark, cdn_hits, marker
from sluice_proc import bed_rules
from tlsraw import TLSStream, connect_tunnel

PROTOCOL_ERROR = 1
MIB_PATH = "/h2/mib.bin"


def sha(data):
    return hashlib.sha256(data).hexdigest()


def open_h2(gw, name="allowed.test", strict=True):
    """An h2 connection on a CONNECT tunnel to `name` (the bed's TLS port); ALPN must be h2."""
    return H2Tunnel(gw.sluice.address, gw.authority(name), gw.sluice.ca_pem,
                    strict=strict).start()


def records(gw, tunnel, mark, count, after_allowed=False):
    """The records of this tunnel's streams (exactly `count` of them once they are there).
    `after_allowed`: the tunnel's last stream was allowed and answered after the others had
    ended, so its record is the barrier: once it is there, the others get a short grace only
    (a missing record then fails in seconds, not after the full wait)."""
    timeout = 3 if after_allowed else 20
    if after_allowed:
        gw.audit.wait(mark, lambda r: r["client"] == tunnel.client and r["decision"] == "allow")
    recs = gw.audit.wait(mark, lambda r: r["client"] == tunnel.client, count=count,
                         timeout=timeout)
    assert len(recs) == count, "expected %d records, got %r" % (count, recs)
    return recs


def allowed_record(rec, gw, path, rule="cdn", name="allowed.test", method="GET", **want):
    expect.record(rec, sandbox="sbx1", mode="connect", decision="allow", rule=rule, reason=None,
                  sni=name, method=method, url="https://%s:%d%s" % (name, gw.t, path),
                  proto="h2", upstream_proto="http/1.1", upgrade=None, **want)
    assert expect.host_is(rec["host"], name, gw.t), rec
    # `addrs` is empty when a pooled upstream connection served the request (README)
    assert rec["upstream"] == "127.0.0.20:%d" % gw.t, rec


def denied_record(rec, reason, status=403, **want):
    expect.record(rec, sandbox="sbx1", mode="connect", decision="deny", reason=reason,
                  status=status, proto="h2", upstream=None, upstream_proto=None, **want)


def still_open(tunnel):
    assert tunnel.terminated is None and tunnel.closed is None, \
        "the connection ended:\n" + tunnel.describe()


def refused_as_malformed(stream):
    """A stream error (RFC 9113 §8.1.1): RST_STREAM PROTOCOL_ERROR, or the stream closed by a
    400 bad_request response (a server "MAY send an HTTP response prior to closing or
    resetting the stream")."""
    if stream.headers is not None:
        expect.denial(stream, 400, "bad_request")
    else:
        assert stream.reset == PROTOCOL_ERROR, \
            "expected RST_STREAM PROTOCOL_ERROR, got " + stream.describe()


def origin_saw(bed, m):
    """nginx entries carrying marker `m` in the URI or the x-test field (after a barrier)."""
    bed.nginx.barrier()
    return [e for e in bed.nginx.access("cdn") if m in e["uri"] or m in e["x_test"]]


@pytest.fixture(scope="module")
def mib(bed):
    """1 MiB of random bytes served by nginx as allowed.test/h2/mib.bin (more than the
    65,535-byte stream and connection windows the client grants before a WINDOW_UPDATE)."""
    data = os.urandom(1 << 20)
    path = bed.content.path("allowed.test", MIB_PATH)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    yield data
    os.remove(path)


# --- 1. ALPN --------------------------------------------------------------------------------

def test_alpn_h2_and_http11_offered_selects_h2(gw):
    """A client offering h2 and http/1.1 gets h2 (docs/wire.md#tls-toward-the-sandbox), and sluice then speaks HTTP/2:
    its SETTINGS arrive and a GET is answered on a stream."""
    with open_h2(gw) as t:
        s = t.one("GET", "/whoami.txt")
        assert t.remote_settings_seen, "no SETTINGS frame from sluice"
        assert (s.status, s.body, s.ended) == (200, b"allowed.test\n", True), s.describe()
        assert t.peer_names == ["allowed.test"]


def test_alpn_http11_only_selects_http11(gw):
    """A client offering only http/1.1 gets http/1.1 and an HTTP/1.1 exchange, recorded as such."""
    mark = gw.audit.mark()
    ex = gw.tunnel("allowed.test", [request_bytes("GET", "/whoami.txt", "allowed.test",
                                                  keep_alive=False)], alpn=("http/1.1",))
    assert ex.alpn == "http/1.1"
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="allow", proto="http/1.1", upstream_proto="http/1.1")


@pytest.mark.parametrize("alpn", [("spdy/3", "h3"), ("h2c",)])
def test_alpn_only_unspoken_protocols_selects_nothing_and_parses_http11(gw, alpn):
    """A client offering only protocols sluice does not speak (SPDY, HTTP/3, h2c, which is never
    offered: docs/wire.md#http2) gets no ALPN, and what follows is read as HTTP/1.1."""
    mark = gw.audit.mark()
    ex = gw.tunnel("allowed.test", [request_bytes("GET", "/whoami.txt", "allowed.test",
                                                  keep_alive=False)], alpn=alpn)
    assert ex.tls_error is None, ex.tls_error
    assert ex.alpn is None, "ALPN %r selected" % ex.alpn
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="allow", proto="http/1.1")


# --- 2, 3. Allowed streams ------------------------------------------------------------------

def test_allowed_get_on_a_stream_is_forwarded_as_http11_and_recorded_h2(gw, bed):
    """An allowed GET on a stream: the origin's body comes back on it; nginx (no h2) got an
    HTTP/1.1 request in origin form with Host H; the record says proto h2, upstream_proto
    http/1.1, allow, 200, with the body's length and hash."""
    m, mark = marker(), gw.audit.mark()
    path = "/whoami.txt?m=" + m
    with open_h2(gw) as t:
        s = t.one("GET", path)
        assert (s.status, s.body) == (200, b"allowed.test\n"), s.describe()
        still_open(t)
    entry = bed.nginx.wait_access("cdn", lambda e: m in e["uri"])[0]
    # translated: an HTTP/1.1 request line in origin form, Host H (docs/wire.md#http2, docs/wire.md#framing)
    assert entry["request"] == "GET %s HTTP/1.1" % path, entry
    assert (entry["ssl_server_name"], entry["host"]) == ("allowed.test", "allowed.test"), entry
    rec = records(gw, t, mark, 1)[0]
    allowed_record(rec, gw, path, status=200, resp_bytes=len(b"allowed.test\n"),
                   resp_sha256=sha(b"allowed.test\n"))


def test_concurrent_streams_on_one_connection_are_all_answered(gw, bed):
    """8 streams opened before any answer is read: whoami.txt and the 64 KiB small.bin in
    turn (together far more than one connection window), each answered with its own body, one
    record each, all of one connection."""
    m, mark = marker(), gw.audit.mark()
    paths = ["%s?m=%s&i=%d" % ("/whoami.txt" if i % 2 else "/small.bin", m, i) for i in range(8)]
    expected = [b"allowed.test\n" if i % 2 else bed.content.small for i in range(8)]
    with open_h2(gw) as t:
        ids = [t.request("GET", p) for p in paths]
        streams = t.wait(*ids)
        still_open(t)
    for s, body in zip(streams, expected):
        assert (s.status, s.body == body, s.ended) == (200, True, True), s.describe()
    recs = records(gw, t, mark, 8)
    assert len({r["conn"] for r in recs}) == 1, recs
    by_url = {r["url"]: r for r in recs}
    for p, body in zip(paths, expected):
        allowed_record(by_url["https://allowed.test:%d%s" % (gw.t, p)], gw, p, status=200,
                       resp_bytes=len(body), resp_sha256=sha(body))
    assert len(cdn_hits(bed, m)) == 8


# --- 4, 5. :authority and host per stream ---------------------------------------------------

@pytest.mark.parametrize("authority", ["evil.test:{t}", "api.allowed.test:{t}", "allowed.test:1"],
                         ids=["other_tenant", "other_allowed_host", "other_port"])
def test_stream_for_another_authority_is_refused_and_others_go_on(gw, bed, authority):
    """Edge case (S8, connection coalescing): on the tunnel for allowed.test, a stream whose
    :authority names another tenant of the same CDN, another host the policy allows, or another
    port: 403 host_mismatch on that stream (docs/wire.md#the-invariant (3), docs/wire.md#http2), never resolved, never forwarded;
    a stream opened before it and one opened after it on the same connection are answered."""
    authority = authority.format(t=gw.t)
    m, ok, mark, dns = marker(), marker(), gw.audit.mark(), DnsMark(bed)
    with open_h2(gw) as t:
        before = t.request("GET", "/small.bin?m=" + ok)
        denied = t.request("GET", "/whoami.txt?m=" + m, authority=authority)
        s_before, s_denied = t.wait(before, denied)
        s_after = t.one("GET", "/whoami.txt?m=" + ok)
        still_open(t)
    expect.denial(s_denied, 403, "host_mismatch")
    assert s_denied.ended, s_denied.describe()
    assert (s_before.status, s_before.body == bed.content.small) == (200, True), \
        s_before.describe()
    assert (s_after.status, s_after.body) == (200, b"allowed.test\n"), s_after.describe()
    assert cdn_hits(bed, m) == []
    host = authority.rsplit(":", 1)[0]
    if host != "allowed.test":  # docs/wire.md#the-invariant (7): a refused name is never resolved
        assert dns.asked(host) == [], dns.names()
    recs = records(gw, t, mark, 3, after_allowed=True)
    deny = [r for r in recs if r["decision"] == "deny"]
    assert len(deny) == 1, recs
    denied_record(deny[0], "host_mismatch", host=authority, method="GET")
    assert len(cdn_hits(bed, ok)) == 2


def test_host_field_that_disagrees_with_authority_is_refused_on_its_stream(gw, bed):
    """A `host` field beside :authority must agree with it (docs/wire.md#the-invariant): :authority allowed.test,
    host evil.test is 403 host_mismatch on that stream, nothing forwarded; a stream whose host
    agrees, and a plain one, are answered on the same connection."""
    m, ok, mark = marker(), marker(), gw.audit.mark()
    with open_h2(gw, strict=False) as t:  # h2 itself refuses to send mismatched :authority and host
        denied = t.one("GET", "/whoami.txt?m=" + m, headers=[("host", "evil.test")])
        agreeing = t.one("GET", "/whoami.txt?m=" + ok, headers=[("host", t.authority)])
        plain = t.one("GET", "/whoami.txt?m=" + ok)
        still_open(t)
    expect.denial(denied, 403, "host_mismatch")
    assert (agreeing.status, agreeing.body) == (200, b"allowed.test\n"), agreeing.describe()
    assert (plain.status, plain.body) == (200, b"allowed.test\n"), plain.describe()
    assert cdn_hits(bed, m) == []
    assert not [e for e in bed.nginx.access("cdn") if e["host"] == "evil.test" and m in e["uri"]]
    recs = records(gw, t, mark, 3, after_allowed=True)
    deny = [r for r in recs if r["decision"] == "deny"]
    assert len(deny) == 1, recs
    denied_record(deny[0], "host_mismatch")
    assert m in deny[0]["url"], deny[0]


@pytest.mark.parametrize("host,agrees", [
    ("ALLOWED.test.:{t}", True), ("allowed.test.:{t}", True), ("Allowed.Test:{t}", True),
    ("allowed.test", False), ("allowed.test:1", False), ("allowed..test:{t}", False)],
    ids=["case_and_dot", "dot", "case", "no_port_is_443", "other_port", "not_a_name"])
def test_host_field_is_compared_with_authority_canonically(gw, bed, host, agrees):
    """A `host` field beside :authority allowed.test:PORT agrees when it names the same
    authority as the policy reads names (docs/wire.md#http2, docs/policy.md#names): letter case
    and one trailing dot aside, and with a port, since a host without one names https's 443.
    One that agrees is answered by allowed.test; one that names another port, or does not
    parse, is 403 host_mismatch and reaches no origin."""
    host = host.format(t=gw.t)
    m, mark = marker(), gw.audit.mark()
    with open_h2(gw, strict=False) as t:  # h2 itself refuses to send mismatched :authority and host
        s = t.one("GET", "/whoami.txt?m=" + m, headers=[("host", host)])
        still_open(t)
    recs = records(gw, t, mark, 1)
    if agrees:
        assert (s.status, s.body) == (200, b"allowed.test\n"), s.describe()
        allowed_record(recs[0], gw, "/whoami.txt?m=" + m, status=200)
    else:
        expect.denial(s, 403, "host_mismatch")
        assert cdn_hits(bed, m) == []
        denied_record(recs[0], "host_mismatch")


# --- 6. Rules per stream -----------------------------------------------------------------------

def test_denied_path_and_method_streams_then_an_allowed_one(gw, bed):
    """api.allowed.test allows GET under /v1/public/ only: on one connection a GET of
    /v1/private/ is 403 not_allowed_path, a DELETE of /v1/public/ 403 not_allowed_method,
    neither forwarded; then a GET of /v1/public/ is answered."""
    m, mark = marker(), gw.audit.mark()
    name = "api.allowed.test"
    with open_h2(gw, name) as t:
        path_denied = t.one("GET", "/v1/private/secret.txt?m=" + m)
        method_denied = t.one("DELETE", "/v1/public/hello.txt?m=" + m)
        ok = t.one("GET", "/v1/public/hello.txt")
        still_open(t)
    expect.denial(path_denied, 403, "not_allowed_path")
    expect.denial(method_denied, 403, "not_allowed_method")
    assert (ok.status, ok.body) == (200, b"public hello\n"), ok.describe()
    assert cdn_hits(bed, m) == []
    recs = records(gw, t, mark, 3, after_allowed=True)
    by_method = {(r["method"], r["reason"]): r for r in recs}
    denied_record(by_method[("GET", "not_allowed_path")], "not_allowed_path", sni=name,
                  url="https://%s:%d/v1/private/secret.txt?m=%s" % (name, gw.t, m))
    denied_record(by_method[("DELETE", "not_allowed_method")], "not_allowed_method", sni=name)
    allowed_record(by_method[("GET", None)], gw, "/v1/public/hello.txt", rule="api", name=name,
                   status=200)


# --- gRPC refusals ----------------------------------------------------------------------------

@pytest.mark.parametrize("content_type,grpc", [
    ("application/grpc", True), ("Application/GRPC", True), ("APPLICATION/grpc+proto", True),
    ("application/grpcx", False), ("application/grpc-web", False)],
    ids=["grpc", "grpc_mixed_case", "grpc_proto_upper_case", "grpcx", "grpc_web"])
def test_a_denied_grpc_stream_is_answered_as_grpc_in_any_case(gw, bed, content_type, grpc):
    """A stream whose content-type is gRPC's media type, in any case (RFC 9110 §8.3.1: media
    types are case-insensitive), is refused the way a gRPC client reads it (docs/wire.md#grpc):
    :status 200, content-type application/grpc, grpc-status 7 PERMISSION_DENIED, the reason in
    sluice-reason, one HEADERS frame that ends the stream; another media type that merely starts
    like it gets the plain 403. Either way nothing reaches the origin, and the record's status
    is the one sluice sent."""
    m, mark = marker(), gw.audit.mark()
    name = "api.allowed.test"
    with open_h2(gw, name) as t:
        s = t.one("GET", "/v1/private/secret.txt?m=" + m,
                  headers=[("content-type", content_type), ("te", "trailers")])
        still_open(t)
    if grpc:
        assert (s.status, s.header("content-type"), s.header("grpc-status")) == \
            (200, "application/grpc", "7"), s.describe()
        assert s.sluice_reason == "not_allowed_path", s.describe()
        assert "not_allowed_path" in (s.header("grpc-message") or ""), s.describe()
        assert s.ended and s.body == b"" and s.trailers is None, s.describe()
    else:
        expect.denial(s, 403, "not_allowed_path")
        assert s.header("grpc-status") is None, s.describe()
    assert cdn_hits(bed, m) == []
    recs = records(gw, t, mark, 1)
    denied_record(recs[0], "not_allowed_path", status=200 if grpc else 403, sni=name)


# --- H8: the head written for the origin ------------------------------------------------------

def test_translated_head_carries_no_claim_headers(gw, bed):
    """Edge case (H8, S10): an allowed stream carrying every header through which an origin would
    read another host, path, scheme, method or client (X-Forwarded-Host, Forwarded,
    X-Original-URL, ..., and proxy-*; lower-case, as HTTP/2 has them): the head sluice writes
    for the origin (docs/wire.md#http2: written as in docs/wire.md#framing) has none of them, the ordinary x-test beside
    them arrives, and Host is H."""
    m = marker()
    claims = [(name.lower(), "claim-%d" % i) for i, name in enumerate(CLAIM_HEADERS)
              if name != "X-Forwarded-For"]  # nginx reads that one through a header of its own
    with open_h2(gw) as t:
        s = t.one("GET", "/claims/" + m, headers=claims + [("x-test", m)])
    assert (s.status, s.body) == (200, b"claims\n"), s.describe()
    entries = bed.nginx.wait_access("claims", lambda e: m in e["uri"])
    assert len(entries) == 1, entries
    told = {claim_variable(n): entries[0][claim_variable(n)] for n in CLAIM_HEADERS
            if entries[0][claim_variable(n)] != ""}
    assert told == {}, "the origin was told: %r" % told
    assert (entries[0]["host"], entries[0]["x_test"]) == ("allowed.test", m), entries[0]


# --- 7, 8. Malformed streams -------------------------------------------------------------------

def _base(t, m):
    return [(":method", "GET"), (":scheme", "https"), (":authority", t.authority),
            (":path", "/whoami.txt?m=" + m)]


def _tagged(t, m):
    """A well-formed request carrying marker `m` in its path and in x-test."""
    return _base(t, m) + [("x-test", m)]


MALFORMED = {
    "upper_case_name": lambda t, m: _base(t, m) + [("X-Test", m)],
    "connection": lambda t, m: _tagged(t, m) + [("connection", "keep-alive")],
    "keep_alive": lambda t, m: _tagged(t, m) + [("keep-alive", "timeout=5")],
    "proxy_connection": lambda t, m: _tagged(t, m) + [("proxy-connection", "keep-alive")],
    "transfer_encoding": lambda t, m: _tagged(t, m) + [("transfer-encoding", "chunked")],
    "upgrade": lambda t, m: _tagged(t, m) + [("upgrade", "websocket")],
    "te_gzip": lambda t, m: _tagged(t, m) + [("te", "gzip")],
    "crlf_in_value": lambda t, m: _base(t, m) + [("x-test", m + "\r\nx-evil: 1")],
    "lf_in_value": lambda t, m: _base(t, m) + [("x-test", m + "\nx-evil: 1")],
    "nul_in_value": lambda t, m: _base(t, m) + [("x-test", m + "\0")],
    "pseudo_after_regular": lambda t, m: _base(t, m)[:2] + [("x-test", m)] + _base(t, m)[2:],
    "unknown_pseudo": lambda t, m: _tagged(t, m) + [(":foo", "bar")],
    "response_pseudo": lambda t, m: _tagged(t, m) + [(":status", "200")],
    "duplicate_path": lambda t, m: _tagged(t, m) + [(":path", "/index.html?m=" + m)],
    "no_path": lambda t, m: [kv for kv in _tagged(t, m) if kv[0] != ":path"],
    "no_scheme": lambda t, m: [kv for kv in _tagged(t, m) if kv[0] != ":scheme"],
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_stream_is_reset_and_never_forwarded(gw, bed, case):
    """A stream malformed under RFC 9113 §8.1-8.3 is a stream error (docs/wire.md#http2): RST_STREAM
    PROTOCOL_ERROR (or closed by a 400 bad_request, RFC 9113 §8.1.1), never
    translated to HTTP/1.1 (nothing with its marker reaches nginx; a field dropped and the rest
    forwarded is a failure too), recorded as a denial of its own; then an allowed stream on the
    same connection is answered."""
    m, mark = marker(), gw.audit.mark()
    with open_h2(gw, strict=False) as t:
        bad = t.wait(t.request(None, None, raw=MALFORMED[case](t, m)))[0]
        ok = t.one("GET", "/whoami.txt")
        still_open(t)
    refused_as_malformed(bad)
    assert (ok.status, ok.body) == (200, b"allowed.test\n"), ok.describe()
    assert origin_saw(bed, m) == []
    recs = records(gw, t, mark, 2, after_allowed=True)
    deny = [r for r in recs if r["decision"] == "deny"]
    assert len(deny) == 1, recs
    denied_record(deny[0], "bad_request", status=400 if bad.headers is not None else None)


@pytest.mark.parametrize("excess", [False, True], ids=["data_short", "data_long"])
def test_content_length_that_disagrees_with_data_is_reset_and_never_completed(gw, bed, excess):
    """A content-length that disagrees with the DATA (RFC 9113 §8.1.1) is a stream error: 100
    announced and 10 sent with END_STREAM; or 3 announced and, in the same DATA frame, the 3
    bytes and an HTTP/1.1 request behind them (translated blindly, it would be a second request
    on the upstream connection). The head may have gone upstream before the DATA showed the fault
    (as with a malformed chunked body over HTTP/1.1, README "Readings"), but the origin never
    gets a complete request (no 2xx for the marker), and never the request behind."""
    m, smuggled, mark = marker(), marker(), gw.audit.mark()
    if excess:
        length, body = "3", b"abc" + request_bytes("GET", "/whoami.txt?m=" + smuggled,
                                                   "allowed.test")
    else:
        length, body = "100", b"x" * 10
    with open_h2(gw, strict=False) as t:
        bad = t.wait(t.request("POST", "/upload/" + m, body=body,
                               headers=[("x-test", m), ("content-length", length)]))[0]
        ok = t.one("GET", "/whoami.txt")
        still_open(t)
    refused_as_malformed(bad)
    assert (ok.status, ok.body) == (200, b"allowed.test\n"), ok.describe()
    hits = [e for e in cdn_hits(bed, m) if e["status"].startswith("2")]
    assert hits == [], hits
    assert cdn_hits(bed, smuggled) == []
    recs = records(gw, t, mark, 2, after_allowed=True)
    deny = [r for r in recs if r["decision"] == "deny"]
    assert len(deny) == 1, recs
    expect.record(deny[0], reason="bad_request", proto="h2", method="POST")


@pytest.mark.parametrize("length,first", [("4", b"abcd"), ("0", b"")],
                         ids=["length_met_then_more", "zero_then_data"])
def test_a_length_met_before_end_stream_never_completes_upstream(gw, bed, length, first):
    """RFC 9113 §8.1.1, when the frames come in separate reads (docs/wire.md#http2): a stream's
    DATA reach the declared content-length (or it declared 0) without END_STREAM, and only then
    more DATA come. The upstream connection is warm (a pooled one, taken at once), so the
    request's head and bytes go to the HTTP/1.1 origin as they come; the last byte of the
    declared length (or of a bodiless head) waits for END_STREAM, so the origin never has a
    complete request: nginx never passes it on to the sink its /upload/ proxies to, never
    answers it 2xx, and the record is the refusal it was."""
    m, mark = marker(), gw.audit.mark()
    with open_h2(gw, strict=False) as t:
        warm = t.one("GET", "/whoami.txt")  # leaves an idle upstream to allowed.test
        sid = t.request("POST", "/upload/" + m, end=False,
                        headers=[("x-test", m), ("content-length", length)])
        if first:
            t.send_body(sid, first, end=False)
        t.ping()  # sluice read and forwarded all of it: what follows is a read of its own
        t.send_body(sid, b"z", end=True)  # one byte more than declared
        bad = t.wait(sid)[0]
        ok = t.one("GET", "/whoami.txt")
        still_open(t)
    assert (warm.status, ok.status) == (200, 200), (warm.describe(), ok.describe())
    refused_as_malformed(bad)
    hits = [e for e in cdn_hits(bed, m) if e["status"].startswith("2")]
    assert hits == [], "the origin completed the request: %r" % hits
    assert cdn_hits(bed, m, role="sink") == [], "the origin acted on the request"
    recs = records(gw, t, mark, 3, after_allowed=True)
    deny = [r for r in recs if r["decision"] == "deny"]
    assert len(deny) == 1, recs
    expect.record(deny[0], reason="bad_request", proto="h2", method="POST")


def test_scheme_http_on_the_tunnel_is_refused_on_its_stream(gw, bed):
    """:scheme must be https (docs/wire.md#http2): a stream with :scheme http on the tunnel is refused
    (reset, or answered 400 bad_request / 403 not_allowed_scheme), never forwarded, recorded;
    the connection goes on."""
    m, mark = marker(), gw.audit.mark()
    with open_h2(gw) as t:
        bad = t.one("GET", "/whoami.txt?m=" + m, scheme="http")
        ok = t.one("GET", "/whoami.txt")
        still_open(t)
    if bad.headers is not None:
        got = (bad.status, bad.sluice_reason)
        assert got in {(400, "bad_request"), (403, "not_allowed_scheme")}, bad.describe()
        expect.denial(bad, *got)
    else:
        assert bad.reset is not None, bad.describe()
    assert (ok.status, ok.body) == (200, b"allowed.test\n"), ok.describe()
    assert cdn_hits(bed, m) == []
    recs = records(gw, t, mark, 2, after_allowed=True)
    deny = [r for r in recs if r["decision"] == "deny"]
    assert len(deny) == 1, recs
    expect.record(deny[0], decision="deny", proto="h2", upstream=None,
                  status=bad.status, reason={"bad_request", "not_allowed_scheme"})


# --- 9. Request bodies --------------------------------------------------------------------------

@pytest.mark.parametrize("with_length", [True, False], ids=["content_length", "no_length"])
def test_post_body_reaches_upstream_exactly(gw, bed, with_length):
    """A POST on a stream, its 300 KiB body (several request windows: sluice must send
    WINDOW_UPDATEs) with an HTTP/1.1 request hidden in it, with and without content-length:
    nginx stores exactly the bytes sent; the record has their length and hash."""
    body = os.urandom(300 << 10) + b"\r\n\r\nGET /not-a-request HTTP/1.1\r\n\r\n"
    m, mark = marker(), gw.audit.mark()
    headers = [("x-test", m), ("content-type", "application/octet-stream")]
    if with_length:
        headers.append(("content-length", str(len(body))))
    with open_h2(gw) as t:
        s = t.one("POST", "/upload/" + m, headers=headers, body=body)
        still_open(t)
    assert (s.status, s.body) == (200, b"stored\n"), s.describe()
    entry = bed.nginx.wait_access("cdn", lambda e: e["x_test"] == m)[0]
    with open(entry["body_file"], "rb") as f:
        assert f.read() == body
    rec = records(gw, t, mark, 1)[0]
    allowed_record(rec, gw, "/upload/" + m, method="POST", status=200, req_bytes=len(body),
                   req_sha256=sha(body))


def test_bodies_of_denied_streams_do_not_close_the_connection_window(gw, bed):
    """Three POSTs of 100 KiB each to another authority, on the tunnel for allowed.test: each is
    403 host_mismatch and forwarded nowhere; whatever sluice does with the bodies it refuses
    (reads and drops them, or resets the streams), the connection's flow-control window is not
    used up by them (300 KiB refused, against a 64 KiB window): a 200 KiB POST allowed after
    them on the same connection arrives whole."""
    m, ok, mark = marker(), marker(), gw.audit.mark()
    refused_body, body = os.urandom(100 << 10), os.urandom(200 << 10)
    with open_h2(gw) as t:
        denied = [t.one("POST", "/upload/%s-%d" % (m, i), authority="evil.test",
                        headers=[("x-test", m)], body=refused_body) for i in range(3)]
        s = t.one("POST", "/upload/" + ok, headers=[("x-test", ok)], body=body)
        still_open(t)
    for d in denied:
        expect.denial(d, 403, "host_mismatch")
    assert (s.status, s.body) == (200, b"stored\n"), s.describe()
    entry = bed.nginx.wait_access("cdn", lambda e: e["x_test"] == ok)[0]
    with open(entry["body_file"], "rb") as f:
        assert f.read() == body
    assert origin_saw(bed, m) == []
    recs = records(gw, t, mark, 4, after_allowed=True)
    assert sorted((r["decision"], r["reason"]) for r in recs) == \
        [("allow", None)] + [("deny", "host_mismatch")] * 3, recs


def test_client_close_after_a_denied_unfinished_body_is_seen_at_once(gw):
    """A POST to another authority is answered 403 while its body is still coming (100 KiB,
    64 KiB of window): the client, told to go no further, stops sending without END_STREAM and
    closes the connection. sluice closes its end at once (its socket leaves CLOSE_WAIT within
    2 s), not when idle_timeout or a shutdown's grace runs out: a refused stream holds no
    connection open."""
    with open_h2(gw) as t:
        d = t.one("POST", "/upload/" + marker(), authority="evil.test",
                  body=os.urandom(100 << 10))
        expect.denial(d, 403, "host_mismatch")
        client = t.sock.getsockname()
    sluice_end = ((gw.sluice.address[0], gw.sluice.address[1]), client)
    try:
        wait_until(lambda: socket_state(*sluice_end) in (None, "LAST_ACK", "CLOSE"), 2,
                   "sluice to close its end")
    except TimeoutError:
        raise AssertionError("sluice's end of the closed connection is still %s after 2 s"
                             % socket_state(*sluice_end)) from None


SECRET = "sk-real-h2-0b5e1c7d9a3f"
PLACEHOLDER = "sk-sluice-placeholder-h2"


def with_secret(config, workdir):
    config["secrets"] = {"apikey": {"env": "SLUICE_TEST_API_KEY", "placeholder": PLACEHOLDER}}


def test_expect_100_continue_is_answered_while_sluice_holds_the_body(make_gw, bed):
    """With a secret configured, a request to a host whose rule does not inject it has its body
    read for placeholders before it goes (docs/wire.md#credential-brokering), and sluice itself answers
    `expect: 100-continue` (docs/wire.md#framing): over HTTP/2 too, a 100 comes on the stream
    before the client sends its body; then the body reaches the origin whole and the answer
    comes back."""
    rules = bed_rules(bed.tls_port, bed.plain_port)
    for rule in rules:
        if rule["name"] == "cdn":
            rule["inject"] = [{"header": "x-api-key", "secret": "apikey"}]
    g = make_gw(env={"SLUICE_TEST_API_KEY": SECRET}, edit=with_secret, rules=rules)
    body = os.urandom(3000)
    m, mark = marker(), g.audit.mark()
    with H2Tunnel(g.sluice.address, g.authority("second.test"), g.sluice.ca_pem,
                  timeout=5).start() as t:
        sid = t.request("POST", "/upload/" + m, end=False, headers=[
            ("expect", "100-continue"), ("x-test", m), ("content-length", str(len(body)))])
        first = t.wait_answer(sid)
        assert [dict(h).get(":status") for h in first.informational] == ["100"], \
            first.describe()
        t.send_body(sid, body)
        s = t.wait(sid)[0]
    assert (s.status, s.body) == (200, b"stored\n"), s.describe()
    entry = bed.nginx.wait_access("second", lambda e: e["x_test"] == m)[0]
    with open(entry["body_file"], "rb") as f:
        assert f.read() == body
    rec = g.audit.one(mark, lambda r: r["client"] == t.client)
    expect.record(rec, decision="allow", rule="second", status=200, proto="h2",
                  req_bytes=len(body), req_sha256=sha(body))


# --- 10. curl ---------------------------------------------------------------------------------

def test_curl_http2_through_the_explicit_proxy(gw):
    """curl --http2 -x http://LISTEN: CONNECT, ALPN h2, one stream; curl reports HTTP/2."""
    url = gw.url("allowed.test", "/whoami.txt?curl=" + marker())
    mark = gw.audit.mark()
    proc = subprocess.run(
        ["curl", "-sS", "--http2", "--max-time", "20", "-x", gw.sluice.proxy_url,
         "--cacert", gw.sluice.ca_pem, "-o", "-",
         "-w", "%{stderr}CURL-W %{http_version} %{http_code}\n", url],
        capture_output=True, timeout=40, stdin=subprocess.DEVNULL, env=clean_env())
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, err
    assert "CURL-W 2 200" in err, err
    assert proc.stdout == b"allowed.test\n"
    rec = gw.audit.one(mark, lambda r: r["url"] == url)
    expect.record(rec, decision="allow", rule="cdn", status=200, proto="h2",
                  upstream_proto="http/1.1")


# --- 11. Flow control ---------------------------------------------------------------------------

def test_response_larger_than_the_windows_arrives_whole(gw, mib):
    """1 MiB on one stream, to a client whose stream and connection windows are 65,535 bytes
    and reopen only as it reads: sluice must wait for the WINDOW_UPDATEs (h2 fails the test if
    a DATA frame overruns a window) and resume after each."""
    mark = gw.audit.mark()
    with open_h2(gw) as t:
        s = t.one("GET", MIB_PATH)
        still_open(t)
    assert (s.status, len(s.body), s.ended) == (200, len(mib), True), s.describe()
    assert s.body == mib
    rec = records(gw, t, mark, 1)[0]
    allowed_record(rec, gw, MIB_PATH, status=200, resp_bytes=len(mib), resp_sha256=sha(mib))


# --- h2 selected, then not HTTP/2 -------------------------------------------------------------

def test_http11_bytes_after_h2_was_selected_are_not_read_as_http11(gw, bed):
    """Edge case (T2): the client negotiates h2, then sends an HTTP/1.1 request (for another
    tenant) instead of the connection preface: it is not parsed as HTTP/1.1, nothing is
    forwarded, and the connection ends (a GOAWAY at most, never an HTTP/1.1 response)."""
    m = marker()
    sock, answer, _ = connect_tunnel(gw.sluice.address, gw.authority("allowed.test"))
    assert answer.status == 200, answer
    tls = TLSStream(sock, "allowed.test", gw.sluice.ca_pem, alpn=("h2",))
    assert tls.alpn() == "h2", "ALPN is not h2: the handshake selected %r" % tls.alpn()
    tls.sendall(request_bytes("GET", "/whoami.txt?m=" + m, "evil.test", keep_alive=False))
    tail, how = HttpReader(tls).read_to_close(timeout=10)
    sock.close()
    assert how in ("eof", "reset"), "connection still open after a bad preface: %r" % tail[:200]
    assert b"HTTP/1." not in tail, tail[:300]
    assert cdn_hits(bed, m) == []
    if tail:  # frames: 9-byte headers, type at offset 3: SETTINGS, GOAWAY, WINDOW_UPDATE
        types, pos = [], 0
        while pos + 9 <= len(tail):
            types.append(tail[pos + 3])
            pos += 9 + int.from_bytes(tail[pos:pos + 3], "big")
        assert set(types) <= {4, 7, 8}, (types, tail[:200])


# --- draining ------------------------------------------------------------------------------------

def test_sigterm_lets_a_stream_in_flight_finish(start_sluice, bed, mib):
    """SIGTERM stops accepting and lets requests in flight finish within shutdown_grace
    (docs/cli.md): a 1 MiB stream held in flight by the client's flow-control window (64 KiB read, no
    WINDOW_UPDATE yet) when the signal is delivered; once the client reopens the window the
    whole body arrives and the stream ends cleanly (a GOAWAY NO_ERROR that keeps the stream
    is fine), then sluice exits 0 and the stream has its record."""
    s = start_sluice(limits={"shutdown_grace": "10s"})
    g = Gateway(s, bed)
    mark = g.audit.mark()
    with H2Tunnel(s.address, g.authority("allowed.test"), s.ca_pem).start() as t:
        t.hold_window = True
        sid = t.request("GET", MIB_PATH)
        t.read_until(lambda: len(t.streams[sid].data) >= 65535, "the first window's DATA")
        wait_until(lambda: signal_handled(s.proc.pid, signal.SIGTERM), 5, "sluice's handler")
        os.kill(s.proc.pid, signal.SIGTERM)
        at = time.monotonic()
        wait_until(lambda: not signal_pending(s.proc.pid, signal.SIGTERM), 5, "the delivery")
        t.release_window()
        t.hold_window = False
        got = t.wait(sid)[0]
        if t.terminated is not None:
            assert (t.terminated.error_code, t.terminated.last_stream_id >= sid) == (0, True), \
                t.describe()
    assert (got.status, len(got.body), got.ended) == (200, len(mib), True), got.describe()
    assert got.body == mib
    try:
        code = s.proc.wait(timeout=max(0.0, at + 13 - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise AssertionError("sluice still running 13 s after SIGTERM:\n" + s.stderr()[-3000:])
    s.exit_code, s.exit_checked = code, True
    assert code == 0, s.stderr()[-3000:]
    rec = g.audit.one(mark, lambda r: r["client"] == t.client, timeout=1)
    expect.record(rec, decision="allow", status=200, proto="h2", resp_bytes=len(mib),
                  resp_sha256=sha(mib))
