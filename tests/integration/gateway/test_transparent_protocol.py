"""Transparent mode: the protocol edges of a redirected connection (docs/wire.md,
docs/policy.md#names, docs/audit.md; S3, S7, L2, L4, H1, R1, T7 of docs/threat-model.md).

Ports in Host must equal the port the sandbox dialled; each request on a keep-alive connection
is decided on its own; a ClientHello may arrive in pieces; an SNI must be one valid name (an IP
literal, two names or a NUL are refused at the ClientHello); a CONNECT sent to a redirected
port opens no tunnel; ambiguous framing is 400; a connection that says nothing is closed at
`handshake_timeout` with no record. Each refusal leaves one record and nothing upstream.
Needs root (namespaces, nftables); skips with the reason otherwise.
"""
import time
import urllib.parse

import pytest

from expect import closed, denial
import hello
from tlsraw import byte_splitter, record_splitter
from transparent_bed import DOC4, check_record, get, transparent_env

HANDSHAKE_TIMEOUT = 5.0  # limits.handshake_timeout of the bed's config


@pytest.fixture(scope="module")
def env(bed, sluice_binary):
    with transparent_env(bed, sluice_binary) as e:
        yield e


def nothing_reached(env, m):
    assert env.cdn_hits(m.marker) == []
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)


# --- ports in Host (docs/wire.md#the-invariant, point 3) ----------------------------------------

@pytest.mark.parametrize("port, sni, host, allowed", [
    (80, None, "allowed.test:80", True),
    (80, None, "allowed.test:8080", False),
    (80, None, "allowed.test:443", False),
    (443, "allowed.test", "allowed.test:443", True),
    (443, "allowed.test", "allowed.test:8443", False),
    (443, "allowed.test", "allowed.test:80", False),
])
def test_a_port_in_host_must_be_the_port_dialled(env, port, sni, host, allowed):
    m = env.mark()
    kw = {"sni": sni} if sni else {}
    ex = env.exchange(DOC4, port, [get("/whoami.txt?m=%s" % m.marker, host=host)], **kw)
    rec = env.audit.one(m.audit)
    if allowed:
        assert ex.final.status == 200 and ex.final.body == b"allowed.test\n", ex.final
        check_record(env, rec, "%s:%d" % (DOC4, port), "allow", None, sni, host, 200,
                     upstream="%s:%d" % (env.addrs.cdn, port))
        assert len(env.cdn_hits(m.marker)) == 1
    else:
        denial(ex, 403, "host_mismatch")
        closed(ex)
        check_record(env, rec, "%s:%d" % (DOC4, port), "deny", "host_mismatch", sni, host, 403)
        nothing_reached(env, m)


def test_names_are_compared_case_insensitively_and_without_the_trailing_dot(env):
    m = env.mark()
    ex = env.exchange(DOC4, 443, [get("/whoami.txt?m=%s" % m.marker, host="ALLOWED.Test.")],
                      sni="Allowed.TEST")
    assert ex.final is not None and ex.final.status == 200, (ex.final, ex.tls_error)
    assert ex.peer_names == ["allowed.test"]
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "allow", None, "Allowed.TEST", "ALLOWED.Test.", 200,
                 url="https://allowed.test/whoami.txt?m=%s" % m.marker)
    assert len(env.cdn_hits(m.marker)) == 1


# --- keep-alive: each request on its own (S7) ------------------------------------------------

@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plain"])
def test_a_second_request_for_another_host_on_the_same_connection_is_refused(env, tls):
    m = env.mark()
    first = b"GET /whoami.txt?m=%s-1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n" % m.marker.encode()
    second = b"GET /whoami.txt?m=%s-2 HTTP/1.1\r\nHost: other.test\r\n\r\n" % m.marker.encode()
    port = 443 if tls else 80
    ex = env.exchange(DOC4, port, [first, second], **({"sni": "allowed.test"} if tls else {}))
    assert [r.status for r in ex.responses] == [200, 403], (ex.responses, ex.error)
    reason = "host_mismatch" if tls else "not_allowed_host"
    denial(ex.responses[1], 403, reason)
    closed(ex)
    records = env.audit.wait(m.audit, count=2)
    assert len(records) == 2, records
    sni = "allowed.test" if tls else None
    check_record(env, records[0], "%s:%d" % (DOC4, port), "allow", None, sni, "allowed.test",
                 200, client=ex.client)
    check_record(env, records[1], "%s:%d" % (DOC4, port), "deny", reason, sni, "other.test",
                 403, client=ex.client, upstream=None)
    hits = env.cdn_hits(m.marker)
    assert [h["uri"] for h in hits] == ["/whoami.txt?m=%s-1" % m.marker], hits


def test_requests_pipelined_behind_a_refused_one_are_never_read(env):
    m = env.mark()
    reqs = [b"GET /whoami.txt?m=%s-1 HTTP/1.1\r\nHost: other.test\r\n\r\n" % m.marker.encode(),
            b"GET /whoami.txt?m=%s-2 HTTP/1.1\r\nHost: allowed.test\r\n\r\n" % m.marker.encode()]
    ex = env.exchange(DOC4, 443, reqs, sni="allowed.test", pipeline=True)
    assert [r.status for r in ex.responses] == [403], ex.responses
    closed(ex)
    rec = env.audit.one(m.audit)
    assert rec["reason"] == "host_mismatch", rec
    nothing_reached(env, m)


# --- the ClientHello -------------------------------------------------------------------------

@pytest.mark.parametrize("chunks", [byte_splitter(3), record_splitter(16)],
                         ids=["3-byte-writes", "16-byte-records"])
def test_a_client_hello_in_pieces_is_read_whole(env, chunks):
    """L4: the first read may hold a single byte of the hello (the TLS/HTTP sniff must wait
    for more), or the hello may span many TLS records."""
    m = env.mark()
    ex = env.exchange(DOC4, 443, [get("/whoami.txt?m=%s" % m.marker)], sni="allowed.test",
                      hello_chunks=chunks)
    assert ex.tls_error is None and ex.final.status == 200, (ex.tls_error, ex.final)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "allow", None, "allowed.test", "allowed.test", 200)


@pytest.mark.parametrize("names, reasons", [
    ([b"allowed.test", b"evil.test"], {"bad_host", "sni_mismatch"}),   # two host_names
    ([b"allowed.test\x00evil.test"], {"bad_host"}),                     # a NUL inside
    ([b"allowed.test%2f"], {"bad_host"}),
    ([b"GW"], {"ip_literal"}),                                          # the gateway's address
    ([b"127.0.0.1"], {"ip_literal"}),
], ids=["two-names", "nul", "percent", "gateway-ip", "loopback-ip"])
def test_an_sni_that_is_not_one_valid_name_is_refused_with_an_alert(env, names, reasons):
    """L2, I1: refused at the ClientHello with an alert (no ServerHello, no certificate)."""
    names = [n.replace(b"GW", env.gw.encode()) for n in names]
    m = env.mark()
    sock = env.connect(DOC4, 443)
    hello.send_records(sock, hello.Hello("allowed.test").set_server_names(names).records())
    first = hello.first_answer(sock)
    rest, how = hello.rest_until_closed(sock, 10)
    sock.close()
    assert first[0] == "alert", first
    assert (rest, how) in ((b"", "eof"), (b"", "reset")), (rest, how)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "deny", reasons, ..., None, None, upstream=None)
    nothing_reached(env, m)


# --- other protocol on a redirected port -----------------------------------------------------

@pytest.mark.parametrize("target, host", [("allowed.test:443", "allowed.test:443"),
                                          ("evil.test:443", "allowed.test")])
def test_connect_on_a_redirected_port_opens_no_tunnel(env, target, host):
    """T7-like: the explicit proxy's CONNECT sent to port 80 of any address: not a tunnel
    (a 400 or 403, then close; what follows is never read)."""
    m = env.mark()
    ex = env.exchange(DOC4, 80, [b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n"
                                 % (target.encode(), host.encode())])
    assert ex.final is not None and ex.final.status in (400, 403), (ex.final, ex.error)
    assert ex.final.sluice_reason is not None
    closed(ex)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:80" % DOC4, "deny", ex.final.sluice_reason, None, ...,
                 ex.final.status, client=ex.client, upstream=None)
    # docs/audit.md: host as received; the bed's reading for a CONNECT (the bed's README): its Host
    # header, or null with the target in url
    assert rec["host"] in (host, None), rec
    nothing_reached(env, m)
    assert not m.dns.asked("evil.test")


def test_ambiguous_framing_is_bad_request_and_nothing_is_forwarded(env):
    """H1: Content-Length with Transfer-Encoding on transparent plain HTTP."""
    m = env.mark()
    ex = env.exchange(DOC4, 80, [b"POST /upload/%s HTTP/1.1\r\nHost: allowed.test\r\n"
                                 b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 b"0\r\n\r\n" % m.marker.encode()])
    denial(ex, 400, "bad_request")
    closed(ex)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:80" % DOC4, "deny", "bad_request", None, "allowed.test", 400)
    nothing_reached(env, m)


def test_options_asterisk_is_recorded_with_a_well_formed_url(env):
    """OPTIONS * (the one non-origin-form target S5 accepts) goes to H: whatever the
    origin answers, the record's url is scheme://host[:port]... (docs/audit.md) naming H."""
    m = env.mark()
    ex = env.exchange(DOC4, 80, [b"OPTIONS * HTTP/1.1\r\nHost: allowed.test\r\n"
                                 b"Connection: close\r\n\r\n"])
    assert ex.final is not None, ex.error
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:80" % DOC4, {"allow", "deny"}, ..., None, "allowed.test",
                 ex.final.status, method="OPTIONS")
    url = urllib.parse.urlsplit(rec["url"])
    assert (url.scheme, url.hostname, url.port) == ("http", "allowed.test", None), rec["url"]
    m.canaries.assert_untouched()


def test_a_connection_that_sends_nothing_is_closed_at_the_handshake_timeout(env):
    """R1: no first byte, so neither TLS nor HTTP: closed after limits.handshake_timeout, with
    no answer and no record (docs/wire.md#limits-and-timeouts: nothing was asked)."""
    m = env.mark()
    sock = env.connect(DOC4, 443)
    start = time.monotonic()
    sock.settimeout(HANDSHAKE_TIMEOUT * 3)
    try:
        data = sock.recv(100)
    except ConnectionResetError:
        data = b""
    elapsed = time.monotonic() - start
    sock.close()
    assert data == b"" and 0.8 * HANDSHAKE_TIMEOUT <= elapsed <= 3 * HANDSHAKE_TIMEOUT, \
        (data, elapsed)
    before, _ = env.audit_barrier(m)
    assert before == []
