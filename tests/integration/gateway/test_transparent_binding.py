"""Transparent mode: SNI, Host and the bytes on the wire (S1, S2, S4, S5, L1, T1, I9 of
docs/threat-model.md; points 1-3 of docs/wire.md#the-invariant, #transparent-mode, #denials).

With no CONNECT, H is the SNI (TLS, told from the first byte) or the Host (anything else, read
as HTTP/1.1), and the port is the one the sandbox dialled (SO_ORIGINAL_DST). Everything the
sandbox sends is checked against that: a Host other than the SNI (domain fronting on a shared
CDN), an SNI the policy does not allow (refused with a TLS alert before any certificate or
upstream connection), no SNI, an absolute-form target naming another host, bytes that are
neither TLS nor HTTP. Denied attempts leave one audit record each and nothing at the origins:
the CDN's log has no request for the marker, the canaries no connection, the guard table no
packet to the documentation address the sandbox dialled.
Needs root (namespaces, nftables); skips with the reason otherwise.
"""
import json
import subprocess

import pytest

from audit import verify_chain
from expect import closed, denial
from transparent_bed import DOC4, check_record, get, parse_response, transparent_env


@pytest.fixture(scope="module")
def env(bed, sluice_binary):
    with transparent_env(bed, sluice_binary) as e:
        yield e


def nothing_reached(env, m):
    assert env.cdn_hits(m.marker) == []
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)


def explain(env, url, sni=None):
    cmd = [env.sluice.binary, "explain", "-c", env.sluice.config_path, "--sandbox", "tsbx",
           "--url", url] + (["--sni", sni] if sni else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    return json.loads(r.stdout)


# --- S1: domain fronting on a shared CDN address ---------------------------------------------

def test_allowed_sni_with_another_tenants_host_is_host_mismatch(env):
    """SPACE bypass 2: TLS for allowed.test, then `Host: other.test` (same CDN address, not
    allowed): 403 host_mismatch over TLS, and the CDN never sees the request."""
    m = env.mark()
    r = env.curl("https://allowed.test/whoami.txt?m=%s" % m.marker, "-H", "Host: other.test")
    assert r.rc == 0 and r.http_code == 403, (r.rc, r.stderr)
    denial(r.final, 403, "host_mismatch")
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % env.gw, "deny", "host_mismatch", "allowed.test",
                 "other.test", 403, upstream=None)
    nothing_reached(env, m)
    assert not m.dns.asked("other.test")
    env.nginx.barrier()
    assert [e for e in env.nginx.access("cdn") if e["host"] == "other.test"] == []


def test_fronting_over_a_raw_socket_is_refused_and_closed(env):
    m = env.mark()
    ex = env.exchange(DOC4, 443, [get("/whoami.txt?m=%s" % m.marker, host="other.test")],
                      sni="allowed.test")
    denial(ex, 403, "host_mismatch")
    closed(ex)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "deny", "host_mismatch", "allowed.test",
                 "other.test", 403, client=ex.client)
    nothing_reached(env, m)


# --- S2: reverse fronting, the SNI of a name the policy does not allow ------------------------

def test_sni_of_a_name_not_allowed_is_refused_in_band_and_nothing_dialled(env):
    """SNI evil.test (not allowed; same CDN address as allowed.test), Host allowed.test:
    refused in band (docs/wire.md#refusals-in-band): the handshake completes with sluice's leaf
    for evil.test, and the request, whose Host is not the SNI, gets 403 host_mismatch, then the
    close; the tunnel's record (not_allowed_host, no status) and the request's; nothing
    resolved, nothing dialled."""
    m = env.mark()
    ex = env.exchange(DOC4, 443, [get("/whoami.txt?m=%s" % m.marker)], sni="evil.test")
    assert ex.tls_error is None and ex.peer_names == ["evil.test"], (ex.tls_error, ex.peer_names)
    denial(ex, 403, "host_mismatch")
    closed(ex)
    recs = env.audit.wait(m.audit, lambda r: r["client"] == ex.client, 2)
    assert len(recs) == 2, recs
    verdict = explain(env, "https://evil.test/")
    assert verdict["reason"] == "not_allowed_host", verdict
    check_record(env, recs[0], "%s:443" % DOC4, "deny", verdict["reason"], "evil.test", None,
                 None, client=ex.client, upstream=None, rule=None, method=None, proto=None)
    check_record(env, recs[1], "%s:443" % DOC4, "deny", "host_mismatch", "evil.test",
                 "allowed.test", 403, client=ex.client, upstream=None, method="GET")
    nothing_reached(env, m)
    assert not m.dns.asked("evil.test"), "a name the policy refuses was resolved (D7)"


def test_sni_not_allowed_with_curl(env):
    """curl shows the refusal inside the tunnel: its Host is not the SNI (host_mismatch)."""
    m = env.mark()
    r = env.curl("https://evil.test/whoami.txt?m=%s" % m.marker, "-H", "Host: allowed.test",
                 "--resolve", "evil.test:443:%s" % DOC4)
    assert (r.rc, r.http_code, r.sluice_reason) == (0, 403, "host_mismatch"), (r.rc, r.stderr)
    recs = env.audit.wait(m.audit, count=2)
    assert len(recs) == 2, recs
    check_record(env, recs[0], "%s:443" % DOC4, "deny", "not_allowed_host", "evil.test", None,
                 None)
    check_record(env, recs[1], "%s:443" % DOC4, "deny", "host_mismatch", "evil.test", ..., 403)
    nothing_reached(env, m)
    assert not m.dns.asked("evil.test")


# --- L1: no SNI ------------------------------------------------------------------------------

def test_a_client_hello_without_sni_is_refused_with_an_alert(env):
    m = env.mark()
    ex = env.exchange(DOC4, 443, [get("/whoami.txt?m=%s" % m.marker)], sni=None)
    assert ex.tls_error is not None and ex.tls_error.kind == "alert", ex.tls_error
    assert ex.responses == [] and ex.close_how in ("eof", "reset")
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "deny", "sni_missing", None, None, None,
                 client=ex.client, upstream=None, proto=None, upstream_proto=None, url=None)
    nothing_reached(env, m)


def test_https_to_the_gateway_address_sends_no_sni_and_is_refused(env):
    """I9: `curl https://<gateway>/`: an IP literal, so curl sends no SNI."""
    m = env.mark()
    r = env.curl("https://%s/whoami.txt?m=%s" % (env.gw, m.marker), "-k")
    assert r.rc == 35 and r.http_code == 0, (r.rc, r.stderr)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % env.gw, "deny", "sni_missing", None, None, None, url=None)
    nothing_reached(env, m)


# --- S4: transparent plain HTTP is routed by Host, never by the dialled address -------------

def test_plain_http_to_any_address_goes_where_the_host_resolves(env):
    m = env.mark()
    r = env.curl("http://%s/whoami.txt?m=%s" % (DOC4, m.marker), "-H", "Host: allowed.test")
    assert (r.rc, r.http_code, r.body) == (0, 200, b"allowed.test\n"), (r.rc, r.stderr)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:80" % DOC4, "allow", None, None, "allowed.test", 200,
                 rule="cdn", upstream="%s:80" % env.addrs.cdn,
                 url="http://allowed.test/whoami.txt?m=%s" % m.marker)
    assert len(env.cdn_hits(m.marker)) == 1
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)


@pytest.mark.parametrize("host", ["attacker.test", "other.test"])
def test_plain_http_with_a_host_not_allowed_is_refused(env, host):
    """other.test resolves to the same CDN address as allowed.test: no matter, it is not
    allowed. Neither name is resolved (D7)."""
    m = env.mark()
    r = env.curl("http://%s/whoami.txt?m=%s" % (DOC4, m.marker), "-H", "Host: " + host)
    assert r.rc == 0 and r.http_code == 403, (r.rc, r.stderr)
    denial(r.final, 403, "not_allowed_host")
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:80" % DOC4, "deny", "not_allowed_host", None, host, 403,
                 upstream=None, proto="http/1.1", upstream_proto=None)
    nothing_reached(env, m)
    assert not m.dns.asked(host)


def test_plain_http_to_the_gateway_by_address_is_ip_literal(env):
    """I9: `curl http://<gateway>/`: Host is the gateway's address, an IP literal no rule
    lists."""
    m = env.mark()
    r = env.curl("http://%s/whoami.txt?m=%s" % (env.gw, m.marker))
    assert r.rc == 0 and r.http_code == 403, (r.rc, r.stderr)
    denial(r.final, 403, "ip_literal")
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:80" % env.gw, "deny", "ip_literal", None, env.gw, 403)
    nothing_reached(env, m)


# --- S5: absolute-form targets ---------------------------------------------------------------

def test_plain_http_absolute_form_naming_another_host_is_host_mismatch(env):
    m = env.mark()
    ex = env.exchange(DOC4, 80, [b"GET http://evil.test/whoami.txt?m=%s HTTP/1.1\r\n"
                                 b"Host: allowed.test\r\n\r\n" % m.marker.encode()])
    denial(ex, 403, "host_mismatch")
    closed(ex)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:80" % DOC4, "deny", "host_mismatch", None, "allowed.test", 403,
                 client=ex.client)
    nothing_reached(env, m)
    assert not m.dns.asked("evil.test")


def test_absolute_form_inside_tls_naming_another_host_is_refused(env):
    """The bed's README ("Inside a tunnel"): inside TLS an absolute-form target that does not
    name https://H may be 400 bad_request or 403 host_mismatch."""
    m = env.mark()
    ex = env.exchange(DOC4, 443, [b"GET https://evil.test/whoami.txt?m=%s HTTP/1.1\r\n"
                                  b"Host: allowed.test\r\n\r\n" % m.marker.encode()],
                      sni="allowed.test")
    resp = ex.final
    assert resp is not None and (resp.status, resp.sluice_reason) in \
        ((400, "bad_request"), (403, "host_mismatch")), (resp, ex.error)
    closed(ex)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "deny", resp.sluice_reason, "allowed.test",
                 "allowed.test", resp.status, client=ex.client)
    nothing_reached(env, m)


# --- T1 and friends: the wrong protocol on a port --------------------------------------------

@pytest.mark.parametrize("raw", [b"CANARY-raw\r\n", b"SSH-2.0-OpenSSH_9.2p1 sluice-test\r\n",
                                 b"\x00\x01binary CANARY\r\n\r\n"],
                         ids=["text", "ssh-banner", "binary"])
def test_bytes_that_are_neither_tls_nor_http_on_443_are_refused(env, raw):
    """Not a TLS handshake record, so read as HTTP/1.1: not a request either. Closed (a 400
    first, or not), one deny record, nothing upstream."""
    m = env.mark()
    ex = env.exchange(DOC4, 443, raw=raw)
    assert ex.close_how in ("eof", "reset"), "the connection is still open: %r" % ex.tail
    resp = parse_response(ex.tail)
    assert ex.tail == b"" or (resp is not None and resp.status == 400), ex.tail[:300]
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "deny", {"bad_request", "not_tls"}, None, None,
                 {None, 400}, client=ex.client, upstream=None)
    if resp is not None:
        assert rec["status"] == 400 and resp.sluice_reason == rec["reason"], (resp, rec)
    nothing_reached(env, m)
    env.nginx.barrier()
    assert not [e for e in env.nginx.access("cdn") if "CANARY" in e["request"]]


def test_plain_http_on_443_is_not_allowed_port(env):
    """T1's second form: an HTTP request on the TLS port is http on port 443, which the rule
    (http on 80 only) does not allow."""
    m = env.mark()
    ex = env.exchange(DOC4, 443, [get("/whoami.txt?m=%s" % m.marker)])
    denial(ex, 403, "not_allowed_port")
    closed(ex)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "deny", "not_allowed_port", None, "allowed.test",
                 403, client=ex.client)
    nothing_reached(env, m)


def test_tls_on_port_80_is_not_allowed_port(env):
    """TLS for allowed.test dialled on port 80: https on 80 is not allowed
    (docs/policy.md#schemes-and-ports: ports default per scheme); refused at the ClientHello with an
    alert."""
    m = env.mark()
    ex = env.exchange(DOC4, 80, [get("/whoami.txt?m=%s" % m.marker)], sni="allowed.test")
    assert ex.tls_error is not None and ex.tls_error.kind == "alert", ex.tls_error
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:80" % DOC4, "deny", "not_allowed_port", "allowed.test", None,
                 None, client=ex.client)
    nothing_reached(env, m)


def test_plain_http_without_host_is_host_missing(env):
    m = env.mark()
    ex = env.exchange(DOC4, 80, [b"GET /whoami.txt?m=%s HTTP/1.0\r\n\r\n" % m.marker.encode()])
    denial(ex, 403, "host_missing")
    closed(ex)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:80" % DOC4, "deny", "host_missing", None, None, 403,
                 client=ex.client)
    nothing_reached(env, m)


def test_two_host_headers_are_host_duplicate(env):
    m = env.mark()
    ex = env.exchange(DOC4, 80, [b"GET /whoami.txt?m=%s HTTP/1.1\r\nHost: allowed.test\r\n"
                                 b"Host: evil.test\r\n\r\n" % m.marker.encode()])
    denial(ex, 403, "host_duplicate")
    closed(ex)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:80" % DOC4, "deny", "host_duplicate", None, ..., 403,
                 client=ex.client)
    nothing_reached(env, m)
    assert not m.dns.asked("evil.test") and not m.dns.asked("allowed.test")


def test_the_audit_log_is_intact_and_all_transparent(env):
    assert verify_chain(env.audit.lines()) == 0
    for rec in env.audit.records():
        assert rec["mode"] == "transparent" and rec["orig_dst"] is not None, rec
