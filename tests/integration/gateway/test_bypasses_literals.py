"""docs/threat-model.md (I1-I5, I9, I10) and P1 on the explicit proxy: addresses and ports
written by the sandbox. docs/policy.md#names and #ip-literals: a canonical dotted quad or a
bracketed IPv6 address is an IP literal (`ip_literal`, 403) unless a rule lists it; any other
name whose last label is numeric is `bad_host` (403) and reaches no resolver; a CONNECT port
is plain decimal 1-65535 (else 400 `bad_request`). None of these asks dnsmasq anything, and
nothing reaches the canaries."""
import pytest

import clients
import expect
from gateway import Gateway, Runner
from http1 import request_bytes
from oracles import Canaries, DnsMark, cdn_hits, get, marker

# What `sluice explain` says for each spelling (checked when this file was written): the
# non-canonical IPv4 forms are names with a numeric last label (bad_host); canonical dotted
# quads and bracketed IPv6 are IP literals, whatever address they carry.
NON_CANONICAL_V4 = ["2130706433", "0x7f000001", "017700000001", "0177.0.0.1", "010.0.0.1",
                    "127.1", "0x7f.1", "0", "1", "127.000.0.1", "1.2.3.4.5"]
LITERALS = [
    # I3: unspecified / "this network"
    "0.0.0.0", "0.1.2.3", "[::]", "[::0]", "[0:0:0:0:0:0:0:0]",
    # I4: IPv4-mapped and IPv4-compatible IPv6
    "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]", "[::ffff:a9fe:a9fe]",
    "[0:0:0:0:0:ffff:127.0.0.1]",
    # I5: NAT64, 6to4, Teredo
    "[64:ff9b::a9fe:a9fe]", "[64:ff9b::7f00:1]", "[2002:a9fe:a9fe::]",
    "[2001:0:4136:e378:8000:63bf:3fff:fdd2]",
    # I1/I9: loopback literals, the proxy's own address
    "127.0.0.1", "[::1]", "127.0.0.2",
]
# I7/I8 (not in the catalogue's numbering but in its Appendix C): a zone id, a bracketed name.
ODD_BRACKETS = ["[fe80::1%25lo]", "[fe80::1%lo]", "[allowed.test]"]
CASES = [(h, "bad_host") for h in NON_CANONICAL_V4 + ODD_BRACKETS] + \
        [(h, "ip_literal") for h in LITERALS]
# A bracketed authority that is no IPv6 address is not valid request-target syntax (RFC 3986
# IP-literal; RFC 9110 authority-form has no zone id), so sluice's HTTP parser may refuse it
# as 400 bad_request (docs/wire.md#framing: a bad authority) before the name
# check would call it 403 bad_host (docs/policy.md#names lists `%` as bad_host). Either is a
# refusal.
SYNTAX_OR_BAD_HOST = {(400, "bad_request"), (403, "bad_host")}


def refused_as(ex, host, reason):
    """Assert the refusal; returns the (status, reason) it had."""
    if host in ODD_BRACKETS:
        got = (ex.final.status, ex.final.sluice_reason)
        assert got in SYNTAX_OR_BAD_HOST, got
        expect.denial(ex, *got)
        return got
    expect.denial(ex, 403, reason)
    return 403, reason


def dns_name(host):
    return host.strip("[]").split("%")[0].lower()


@pytest.mark.parametrize("host,reason", CASES, ids=[h for h, _ in CASES])
def test_connect_to_address_spelling(gw, bed, host, reason):
    """Edge case (I2-I5): CONNECT <spelling>:T, raw (no client normalises it)."""
    canaries, dns, mark = Canaries(bed), DnsMark(bed), gw.audit.mark()
    ex = clients.tunnel(gw.sluice.address, "%s:%d" % (host, gw.t),
                        [get("/whoami.txt", host="allowed.test")], sni="allowed.test",
                        cafile=gw.sluice.ca_pem)
    assert ex.denied_at_connect, "CONNECT %s was accepted" % host
    status, reason = refused_as(ex, host, reason)
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    if status == 403:
        expect.connect_denial_record(rec, reason, host, gw.t)
    else:
        expect.record(rec, mode="connect", decision="deny", reason=reason, status=status,
                      upstream=None)
    assert not rec["addrs"], "addresses resolved for a refused literal: %r" % rec
    assert dns.asked(dns_name(host)) == [], "dnsmasq was asked about %s" % host
    canaries.assert_untouched()


@pytest.mark.parametrize("host,reason", CASES, ids=[h for h, _ in CASES])
def test_absolute_form_to_address_spelling(gw, bed, host, reason):
    """Edge case (I2-I5): GET http://<spelling>:P/ on the plain listener."""
    canaries, dns, mark = Canaries(bed), DnsMark(bed), gw.audit.mark()
    authority = "%s:%d" % (host, gw.p)
    ex = gw.forward([request_bytes("GET", "http://%s/whoami.txt" % authority, authority)])
    status, reason = refused_as(ex, host, reason)
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason=reason, status=status, upstream=None, rule=None)
    if status == 403:
        expect.record(rec, mode="forward")
    assert dns.asked(dns_name(host)) == [], "dnsmasq was asked about %s" % host
    canaries.assert_untouched()


def test_ip_literal_in_host_header_inside_allowed_tunnel(gw, bed):
    """Edge case (I1): allowed CONNECT and SNI, then Host: 127.0.0.66 (the attacker's address
    as the Host): 403 host_mismatch over TLS, nothing reaches the attacker."""
    canaries, m, mark = Canaries(bed), marker(), gw.audit.mark()
    ex = gw.tunnel("allowed.test", [get("/whoami.txt?m=" + m, host="127.0.0.66")])
    assert ex.connect.status == 200 and ex.tls_error is None
    expect.denial(ex, 403, "host_mismatch")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="host_mismatch", host="127.0.0.66",
                  sni="allowed.test", upstream=None)
    assert cdn_hits(bed, m) == []
    canaries.assert_untouched()


def test_ip_literal_in_host_header_of_absolute_form(gw, bed):
    """Edge case (I1/S6): GET http://allowed.test:P/ with Host: 127.0.0.66:P."""
    canaries, m = Canaries(bed), marker()
    ex = gw.forward([request_bytes("GET", gw.url("allowed.test", "/whoami.txt?m=" + m, "http"),
                                   "127.0.0.66:%d" % gw.p)])
    expect.denial(ex, 403, "host_mismatch")
    assert cdn_hits(bed, m) == []
    canaries.assert_untouched()


def literal_rules(bed, address, ips):
    rule = {"name": "by-ip", "hosts": [address], "schemes": ["http"], "ports": [bed.plain_port]}
    if ips:
        rule["ips"] = ips
    return [rule]


def test_listed_ip_literal_is_allowed_over_plain_http(make_gw, bed):
    """Edge case (I1, docs/policy.md#ip-literals): a rule that lists the exact literal 127.0.0.20
    (with `ips` for it) allows http://127.0.0.20:P/; nothing is resolved."""
    g = make_gw(rules=literal_rules(bed, "127.0.0.20", ["127.0.0.20/32"]))
    dns, m, mark = DnsMark(bed), marker(), g.audit.mark()
    authority = "127.0.0.20:%d" % g.p
    ex = g.forward([request_bytes("GET", "http://%s/whoami.txt?m=%s" % (authority, m),
                                  authority, keep_alive=False)])
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")  # the default server
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="forward", decision="allow", rule="by-ip", status=200)
    assert rec["upstream"] == authority, rec
    assert dns.names() == [], "a literal was sent to DNS: %r" % dns.names()


def test_listed_loopback_literal_without_ips_is_ip_denied(make_gw, bed):
    """Edge case (I1 + docs/policy.md#ip-literals): listing 127.0.0.1 in `hosts` is not enough, a
    loopback address also needs `ips`: 403 ip_denied, the internal canary sees nothing."""
    g = make_gw(rules=literal_rules(bed, "127.0.0.1", None))
    canaries, mark = Canaries(bed), g.audit.mark()
    authority = "127.0.0.1:%d" % g.p
    ex = g.forward([request_bytes("GET", "http://%s/whoami.txt" % authority, authority)])
    expect.denial(ex, 403, "ip_denied")
    expect.closed(ex)
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="ip_denied", upstream=None)
    canaries.assert_untouched()


# --- I9: sluice as its own destination ---------------------------------------------------------

SELF = "self.pub.test"  # dnsmasq: 127.0.0.2, sluice's own listen address


def self_rule(config, workdir):
    """Open self.pub.test on sluice's own listen port, https and http, with `ips` covering all
    of 127/8: docs/policy.md#sluices-own-endpoints says sluice's own listen addresses are never
    dialled "whatever `ips` says"."""
    port = int(config["sandboxes"][0]["listen"].rsplit(":", 1)[1])
    config["policies"]["bed"]["rules"].insert(0, {
        "name": "self", "hosts": [SELF], "schemes": ["https", "http"], "ports": [port],
        "ips": ["127.0.0.0/8"]})


@pytest.fixture(scope="module")
def self_gw(sluice_binary, bed):
    runner = Runner(sluice_binary, bed)
    try:
        yield Gateway(runner.start(edit=self_rule), bed)
    finally:
        runner.stop_all()


def only_our_records(g, mark, ex):
    """A loop would show as a second connection (from sluice to itself) with its own record."""
    recs = g.audit.since(mark)
    assert [r["client"] for r in recs] == [ex.client], \
        "records of other connections (a loop through sluice?): %r" % recs


def test_connect_to_name_resolving_to_the_proxy_itself(self_gw, bed):
    """Edge case (I9): CONNECT self.pub.test:<sluice's port>, allowed by a rule whose `ips`
    cover 127/8: the address is sluice's own listener, so 403 ip_denied."""
    g = self_gw
    port = g.sluice.address[1]
    mark = g.audit.mark()
    ex = g.tunnel(SELF, [get("/", host="%s:%d" % (SELF, port))], port=port)
    expect.denial(ex, 403, "ip_denied")
    expect.closed(ex)
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="ip_denied", upstream=None)
    only_our_records(g, mark, ex)


def test_absolute_form_to_name_resolving_to_the_proxy_itself(self_gw, bed):
    """Edge case (I9): GET http://self.pub.test:<sluice's port>/ (a proxy loop)."""
    g = self_gw
    port = g.sluice.address[1]
    authority = "%s:%d" % (SELF, port)
    mark = g.audit.mark()
    ex = g.forward([request_bytes("GET", "http://%s/" % authority, authority)])
    expect.denial(ex, 403, "ip_denied")
    expect.closed(ex)
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="forward", decision="deny", reason="ip_denied", upstream=None)
    only_our_records(g, mark, ex)


def test_connect_to_the_proxys_own_address_literal(gw):
    """Edge case (I9): CONNECT 127.0.0.2:<sluice's port>: an IP literal."""
    mark = gw.audit.mark()
    ex = gw.tunnel("127.0.0.2", port=gw.sluice.address[1])
    expect.denial(ex, 403, "ip_literal")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.connect_denial_record(rec, "ip_literal", "127.0.0.2", gw.sluice.address[1])


# --- I10: ports ---------------------------------------------------------------------------------

def port_spellings(t):
    return {
        "leading_zero": "0%d" % t, "plus_sign": "+%d" % t, "hex": hex(t), "service_name": "https",
        "wrapped_65536": str(t + 65536), "zero": "0", "trailing_space": "%d " % t,
        "negative": "-%d" % t, "empty": "", "over_65535": "65536", "six_digits": "0%05d" % t,
        "no_port": None,
    }


@pytest.mark.parametrize("case", sorted(port_spellings(443)))
def test_connect_port_spelling_is_bad_request(gw, bed, case):
    """Edge case (I10): CONNECT allowed.test:<odd spelling of the allowed port T>; the port
    must be plain decimal 1-65535 (docs/policy.md#schemes-and-ports): 400 bad_request, no
    tunnel, and allowed.test is not even resolved."""
    port = port_spellings(gw.t)[case]
    authority = "allowed.test" if port is None else "allowed.test:" + port
    canaries, dns, mark = Canaries(bed), DnsMark(bed), gw.audit.mark()
    ex = clients.tunnel(gw.sluice.address, authority, [get("/whoami.txt")],
                        sni="allowed.test", cafile=gw.sluice.ca_pem)
    assert ex.denied_at_connect, "CONNECT %r was accepted" % authority
    expect.denial(ex, 400, "bad_request")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="connect", decision="deny", reason="bad_request", status=400,
                  upstream=None, sni=None)
    assert dns.asked("allowed.test") == []
    canaries.assert_untouched()


@pytest.mark.parametrize("port", [22, 25, 6379, 443, 80])
def test_connect_to_allowed_host_on_forbidden_port(gw, bed, port):
    """Edge case (I10): SSH, SMTP, Redis, and the default ports the rule does not list:
    403 not_allowed_port, no DNS query. 443, a TLS port, gets it in band (the CONNECT opens,
    the request inside is refused: docs/wire.md#refusals-in-band); the others, which may carry
    no TLS, at the CONNECT."""
    dns, mark = DnsMark(bed), gw.audit.mark()
    ex = gw.tunnel("allowed.test", [get("/")], port=port)
    if port == 443:
        expect.in_band_refusal(gw, mark, ex, "not_allowed_port", "allowed.test", port)
        assert dns.asked("allowed.test") == []
        return
    assert ex.denied_at_connect
    expect.denial(ex, 403, "not_allowed_port")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.connect_denial_record(rec, "not_allowed_port", "allowed.test", port)
    assert dns.asked("allowed.test") == []


@pytest.mark.parametrize("case", ["leading_zero", "plus_sign", "hex", "wrapped_65536"])
def test_absolute_form_port_spelling_is_refused(gw, bed, case):
    """Edge case (I10): the same spellings in an absolute-form http:// URL: not forwarded
    (400 bad_request), allowed.test not resolved."""
    port = port_spellings(gw.p)[case]
    m, dns, mark = marker(), DnsMark(bed), gw.audit.mark()
    url = "http://allowed.test:%s/whoami.txt?m=%s" % (port, m)
    ex = gw.forward([request_bytes("GET", url, "allowed.test:%s" % port)])
    expect.denial(ex, 400, "bad_request")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="bad_request", status=400, upstream=None)
    assert dns.asked("allowed.test") == []
    assert cdn_hits(bed, m) == []


def test_refused_absolute_form_request_is_recorded_as_forward(gw):
    """Edge case (audit of I10): `GET http://allowed.test:0P/` on the proxy listener is refused
    400 bad_request; its record describes the request that was refused: docs/audit.md mode is
    "forward" (an absolute-form request, not a CONNECT), host is the Host header "as received
    (null if absent)", and the method GET was received too."""
    port = "0%d" % gw.p
    mark = gw.audit.mark()
    ex = gw.forward([request_bytes("GET", "http://allowed.test:%s/whoami.txt" % port,
                                   "allowed.test:%s" % port)])
    expect.denial(ex, 400, "bad_request")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="bad_request", status=400)
    expect.record(rec, mode="forward", method="GET", host="allowed.test:%s" % port)


# --- P1: case and trailing dot --------------------------------------------------------------------

def test_upper_case_trailing_dot_everywhere_is_the_same_principal(gw, bed):
    """Edge case (P1): CONNECT ALLOWED.TEST.:T, SNI ALLOWED.TEST., Host ALLOWED.TEST.: the
    canonical name is allowed.test, so all three agree: 200, and upstream sees SNI and Host
    allowed.test."""
    m, mark = marker(), gw.audit.mark()
    ex = clients.tunnel(gw.sluice.address, "ALLOWED.TEST.:%d" % gw.t,
                        [get("/whoami.txt?m=" + m, host="ALLOWED.TEST.", keep_alive=False)],
                        sni="ALLOWED.TEST.", cafile=gw.sluice.ca_pem)
    assert ex.connect.status == 200, ex.connect
    assert ex.tls_error is None, ex.tls_error
    assert ex.peer_names == ["allowed.test"]
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")
    entry = bed.nginx.wait_access("cdn", lambda e: m in e["uri"])[0]
    assert (entry["ssl_server_name"], entry["host"]) == ("allowed.test", "allowed.test"), entry
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="allow", rule="cdn", status=200, host="ALLOWED.TEST.",
                  url="https://allowed.test:%d/whoami.txt?m=%s" % (gw.t, m))


@pytest.mark.parametrize("connect,sni,host", [
    ("allowed.test", "ALLOWED.TEST.", "Allowed.Test"),
    ("Allowed.Test", "allowed.test", "allowed.test."),
    ("allowed.test.", "allowed.test", "ALLOWED.TEST"),
])
def test_mixed_spellings_of_one_name_agree(gw, connect, sni, host):
    """Edge case (P1): the S-checks compare canonical forms, not bytes."""
    ex = clients.tunnel(gw.sluice.address, "%s:%d" % (connect, gw.t),
                        [get("/whoami.txt", host=host, keep_alive=False)], sni=sni,
                        cafile=gw.sluice.ca_pem)
    assert ex.connect.status == 200 and ex.tls_error is None, (ex.connect, ex.tls_error)
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")


@pytest.mark.parametrize("name", ["ALLOWED.TEST", "allowed.test.", "ALLOWED.test."])
def test_case_and_dot_with_curl(gw, name):
    r = gw.curl(gw.url(name, "/whoami.txt"))
    assert (r.http_connect, r.http_code, r.body) == (200, 200, b"allowed.test\n"), r.stderr


@pytest.mark.parametrize("name", ["allowed.test..", ".allowed.test", "allowed..test"])
def test_empty_label_is_bad_host(gw, bed, name):
    """Edge case (P1): an empty label is not the allowed name: 403 bad_host at the CONNECT, no
    DNS query."""
    dns, mark = DnsMark(bed), gw.audit.mark()
    ex = clients.tunnel(gw.sluice.address, "%s:%d" % (name, gw.t), [get("/", host=name)],
                        sni="allowed.test", cafile=gw.sluice.ca_pem)
    assert ex.denied_at_connect
    expect.denial(ex, 403, "bad_host")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.connect_denial_record(rec, "bad_host", name, gw.t)
    assert dns.asked_containing("allowed") == []


def test_upper_case_trailing_dot_absolute_form(gw, bed):
    """Edge case (P1): GET http://ALLOWED.TEST.:P/ with Host ALLOWED.TEST.:P is allowed.test;
    the origin gets Host allowed.test."""
    m = marker()
    authority = "ALLOWED.TEST.:%d" % gw.p
    ex = gw.forward([request_bytes("GET", "http://%s/whoami.txt?m=%s" % (authority, m),
                                   authority, keep_alive=False)])
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")
    entry = bed.nginx.wait_access("cdn", lambda e: m in e["uri"])[0]
    assert entry["host"] == "allowed.test", entry


def test_double_dot_absolute_form_is_bad_host(gw, bed):
    dns = DnsMark(bed)
    authority = "allowed.test..:%d" % gw.p
    ex = gw.forward([request_bytes("GET", "http://%s/" % authority, authority)])
    expect.denial(ex, 403, "bad_host")
    assert dns.asked_containing("allowed") == []
