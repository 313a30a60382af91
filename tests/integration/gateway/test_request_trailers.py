"""An HTTP/2 request's trailers toward the origin (docs/wire.md#request-trailers): a HEADERS frame
after the DATA that ends the stream is checked like a head (RFC 9113 §8.2, `max_header_bytes`,
placeholders of secrets) and goes on after the body's last byte: as trailers to an HTTP/2 origin,
in the last chunk to an HTTP/1.1 origin when the body goes chunked. A trailer gets none of the
fields a head would lose (claims of another host, path, method or client; Proxy-*), none RFC 9110
§6.5.1 keeps out of trailers (Content-*, Authorization, Cookie, If-*...) and none named like a
field the rule injects: an origin that merges trailers into the head must not read the request
otherwise than the policy did. A trailer section sluice refuses ends the request there: the
origin never gets the request's end.

The origin is trailer_origin.py (grpc.test on 127.0.0.26: one port that selects h2, one that
selects http/1.1), which records each request's head, body, trailer section and whether it
ended. Two gateways: `plain` (no secrets: a body goes as it comes) and `secrets` (the origin's
rule injects x-api-key; with secrets configured the first 64 KiB of a body is held before
dialling, so a small body's trailers arrive while it is held and a large one's while it flows).
Oracles: the origin's records and the audit log."""
import os

import pytest

import expect
from gateway import Gateway, Runner
from h2client import H2Tunnel
from oracles import marker
from sluice_proc import bed_rules
from trailer_origin import ADDRESS, NAME, TrailerOrigin

SECRET = "sk-real-trailers-5e2b7c"
PLACEHOLDER = "sk-sluice-placeholder-trailers"
OTHER_PLACEHOLDER = "sk-sluice-placeholder-other"
SMALL, LARGE = b"hello", os.urandom(200 * 1024)  # LARGE: past the 64 KiB held, and the windows

# What the sandbox puts in its trailers, and which of them an origin gets.
OFFERED = [("x-checksum", "c1"), ("x-forwarded-host", "evil.test"),
           ("authorization", "Bearer evil"), ("content-type", "text/evil"), ("cookie", "a=b"),
           ("proxy-foo", "x"), ("if-match", "*"), ("x-http-method-override", "DELETE"),
           ("x-api-key", "attacker"), ("x-signature", "s2")]


def forwarded(gw_name):
    kept = [("x-checksum", "c1"), ("x-api-key", "attacker"), ("x-signature", "s2")]
    if gw_name == "secrets":
        kept.remove(("x-api-key", "attacker"))  # the rule injects x-api-key: the secret's name
    return kept


@pytest.fixture(scope="module")
def origin(bed):
    server = TrailerOrigin(bed.pki)
    yield server
    server.stop()


def make_gateway(sluice_binary, bed, origin, secrets):
    rule = {"name": "trailers", "hosts": [NAME], "ports": [origin.h2_port, origin.h1_port],
            "ips": [ADDRESS + "/32"]}
    edit, env = None, None
    if secrets:
        rule["inject"] = [{"header": "x-api-key", "secret": "apikey"}]
        env = {"SLUICE_TEST_API_KEY": SECRET, "SLUICE_TEST_OTHER": "sk-real-other-9d1f"}

        def edit(config, workdir):
            config["secrets"] = {
                "apikey": {"env": "SLUICE_TEST_API_KEY", "placeholder": PLACEHOLDER},
                "other": {"env": "SLUICE_TEST_OTHER", "placeholder": OTHER_PLACEHOLDER}}
    runner = Runner(sluice_binary, bed)
    sluice = runner.start(rules=bed_rules(bed.tls_port, bed.plain_port) + [rule], edit=edit,
                          env=env)
    return runner, Gateway(sluice, bed)


@pytest.fixture(scope="module", params=["plain", "secrets"])
def tgw(request, sluice_binary, bed, origin):
    runner, gw = make_gateway(sluice_binary, bed, origin, request.param == "secrets")
    gw.kind = request.param
    try:
        yield gw
    finally:
        runner.stop_all()


def port_of(origin, leg):
    return origin.h2_port if leg == "h2" else origin.h1_port


def open_h2(gw, origin, leg, **kw):
    return H2Tunnel(gw.sluice.address, "%s:%d" % (NAME, port_of(origin, leg)),
                    gw.sluice.ca_pem, **kw).start()


def post_with_trailers(t, m, body, trailers, headers=()):
    sid = t.request("POST", "/upload?m=" + m, headers=[("x-test", m)] + list(headers),
                    body=body, end=False)
    t.send_trailers(sid, trailers)
    return t.wait(sid)[0]


def one_record(gw, mark, m):
    return gw.audit.one(mark, lambda r: m in (r.get("url") or ""))


# --- what goes on ---------------------------------------------------------------------------

@pytest.mark.parametrize("leg", ["h2", "h1"])
@pytest.mark.parametrize("size", ["small", "large"])
def test_trailers_reach_the_origin_less_what_no_trailer_may_carry(tgw, origin, leg, size):
    """A POST without content-length, its body, then a trailer section of ten fields: the
    origin gets the body whole and, after it, only the checksum, the signature and (unless the
    rule injects a field of that name) x-api-key, in the order sent: as trailers over h2, in
    the last chunk over HTTP/1.1. On the secrets gateway the head's x-api-key is the secret.
    The record: allowed, 200, the body's length."""
    body = SMALL if size == "small" else LARGE
    m, mark = marker(), tgw.audit.mark()
    with open_h2(tgw, origin, leg) as t:
        s = post_with_trailers(t, m, body, OFFERED)
    assert (s.status, s.body) == (200, b"ok\n"), s.describe()
    [seen] = origin.wait(m)
    assert seen["proto"] == ("h2" if leg == "h2" else "http/1.1"), seen["proto"]
    assert seen["ended"] and seen["body"] == body, (seen["ended"], len(seen["body"]))
    assert [(k.lower(), v) for k, v in seen["trailers"]] == forwarded(tgw.kind), seen["trailers"]
    if tgw.kind == "secrets":
        assert [v for k, v in seen["headers"] if k.lower() == "x-api-key"] == [SECRET]
    rec = one_record(tgw, mark, m)
    expect.record(rec, decision="allow", rule="trailers", reason=None, status=200,
                  method="POST", proto="h2", upstream_proto="h2" if leg == "h2" else "http/1.1",
                  req_bytes=len(body))


@pytest.mark.parametrize("leg", ["h2", "h1"])
def test_trailers_right_after_the_head(tgw, origin, leg):
    """HEADERS, then the trailers' HEADERS with no DATA between: a request with an empty body
    and a trailer section (sent chunked to an HTTP/1.1 origin: the last chunk carries it)."""
    m = marker()
    with open_h2(tgw, origin, leg) as t:
        s = post_with_trailers(t, m, b"", [("x-checksum", "empty")])
    assert s.status == 200, s.describe()
    [seen] = origin.wait(m)
    assert seen["ended"] and seen["body"] == b"", seen
    assert seen["trailers"] == [("x-checksum", "empty")], seen


def test_a_content_length_body_to_an_http11_origin_drops_the_trailers(tgw, origin):
    """With a content-length the HTTP/1.1 request has no last chunk to put trailers in: the
    origin gets the body by its length and no trailer section (RFC 9110 §6.5.1 lets a
    recipient drop them); the same request to the h2 origin keeps both."""
    for leg, want in (("h1", None), ("h2", [("x-checksum", "cl")])):
        m = marker()
        with open_h2(tgw, origin, leg) as t:
            s = post_with_trailers(t, m, SMALL, [("x-checksum", "cl")],
                                   headers=[("content-length", str(len(SMALL)))])
        assert s.status == 200, s.describe()
        [seen] = origin.wait(m)
        assert seen["ended"] and seen["body"] == SMALL, seen
        assert seen["trailers"] == want, (leg, seen["trailers"])


# --- what is refused --------------------------------------------------------------------------

def never_ended(origin, m):
    """The origin got the request's head (perhaps) but never its end."""
    seen = origin.wait(m, timeout=2)
    assert all(not r["ended"] for r in seen), seen
    return seen


def refused(gw, origin, leg, mark, m, reason, status):
    """The request marked `m` never ended at the origin; its record is the refusal. Returns what
    the origin saw of it."""
    seen = never_ended(origin, m)
    rec = one_record(gw, mark, m)
    expect.record(rec, decision="deny", reason=reason, status=status, method="POST",
                  proto="h2")
    return seen


@pytest.mark.parametrize("leg", ["h2", "h1"])
def test_trailers_over_max_header_bytes_are_431_and_the_request_never_ends(tgw, origin, leg):
    """A trailer section over max_header_bytes (16 KiB here) after a large body that is already
    flowing: 431 header_too_large on the stream; the origin's request never ends (its stream
    reset, its HTTP/1.1 connection closed mid-body); the record is the denial; the connection
    and its next stream go on."""
    m, after, mark = marker(), marker(), tgw.audit.mark()
    big = [("x-pad-%d" % i, "v" * 1000) for i in range(20)]
    with open_h2(tgw, origin, leg) as t:
        s = post_with_trailers(t, m, LARGE, big)
        ok = t.one("POST", "/after?m=" + after, body=b"x")
    expect.denial(s, 431, "header_too_large")
    assert ok.status == 200, ok.describe()
    refused(tgw, origin, leg, mark, m, "header_too_large", 431)


@pytest.mark.parametrize("trailer", [(":path", "/admin"), ("X-Upper", "v"), ("x-nl", "a\nb"),
                                     ("connection", "close")],
                         ids=["pseudo", "upper_case", "newline", "connection_specific"])
def test_a_malformed_trailer_section_resets_the_stream(tgw, origin, trailer):
    """A trailer section RFC 9113 §8.1-8.2 calls malformed (a pseudo-header, an upper-case name,
    LF in a value, a connection-specific field) is a stream error: RST_STREAM PROTOCOL_ERROR,
    never translated; the origin never gets the request's end; on record as bad_request."""
    m, mark = marker(), tgw.audit.mark()
    with open_h2(tgw, origin, "h1", strict=False) as t:
        s = post_with_trailers(t, m, SMALL, [trailer])
        ok = t.one("GET", "/after?m=" + marker())
    assert s.reset == 1 and s.headers is None, s.describe()
    assert ok.status == 200, ok.describe()
    refused(tgw, origin, "h1", mark, m, "bad_request", None)


@pytest.mark.parametrize("leg", ["h2", "h1"])
@pytest.mark.parametrize("size", ["small", "large"])
def test_a_placeholder_in_the_trailers_is_secret_misuse(tgw, origin, leg, size):
    """The placeholder of a secret the rule does not inject, in a trailer: 403 secret_misuse on
    the stream. A small body is still held when the trailers come: nothing reaches the origin.
    A large one is flowing: the origin gets the head and part of the body but never the
    request's end. The secret appears nowhere. (The plain gateway has no secrets: there the
    trailer is an ordinary field and goes on.)"""
    body = SMALL if size == "small" else LARGE
    m, mark = marker(), tgw.audit.mark()
    trailer = [("x-note", "token " + OTHER_PLACEHOLDER)]
    with open_h2(tgw, origin, leg) as t:
        s = post_with_trailers(t, m, body, trailer)
    if tgw.kind == "plain":
        assert s.status == 200, s.describe()
        assert origin.wait(m)[0]["trailers"] == trailer
        return
    expect.denial(s, 403, "secret_misuse")
    seen = refused(tgw, origin, leg, mark, m, "secret_misuse", 403)
    if size == "small":
        assert seen == [], seen
    assert b"sk-real" not in s.body
