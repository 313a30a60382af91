"""docs/threat-model.md: forged DNS, IP literals, internal addresses, the resolver as a leak.

sluice resolves names itself, through its configured resolver only, dials only addresses
that pass docs/policy.md#addresses, and never asks DNS about a name it denies."""
import uuid

import pytest

import expect
from http1 import request_bytes
from tlsraw import AT_CONNECT


def get(path, host="allowed.test", **kw):
    return request_bytes("GET", path, host, **kw)


def rand():
    return uuid.uuid4().hex[:16]


@pytest.mark.parametrize("address", ["127.0.0.66", "127.0.0.20"],
                         ids=["attacker_ip", "allowed_names_own_cdn_ip"])
def test_connect_to_ip_literal(gw, bed, address):
    canary = bed.nginx.canary_mark("attacker")
    mark = gw.audit.mark()
    ex = gw.tunnel(address, [get("/whoami.txt")], sni="allowed.test")
    assert ex.denied_at_connect
    expect.denial(ex, 403, "ip_literal")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.connect_denial_record(rec, "ip_literal", address, gw.t)
    bed.nginx.barrier()
    assert bed.nginx.canary_hits_since("attacker", canary) == []


def test_forged_resolve_is_ignored(gw, bed):
    """curl --resolve pins allowed.test to the attacker; with a proxy curl sends CONNECT by
    name and sluice's own resolution (127.0.0.20) decides."""
    canary = bed.nginx.canary_mark("attacker")
    mark = gw.audit.mark()
    url = gw.url("allowed.test", "/whoami.txt")
    r = gw.curl(url, "--resolve", "allowed.test:%d:127.0.0.66" % gw.t)
    assert (r.http_code, r.body) == (200, b"allowed.test\n"), r.stderr
    rec = gw.audit.one(mark, lambda r: r["url"] == url)
    expect.upstream_is(rec, "127.0.0.20", gw.t)
    bed.nginx.barrier()
    assert bed.nginx.canary_hits_since("attacker", canary) == []


def test_connect_to_attacker_address(gw, bed):
    """curl --connect-to puts the attacker's IP in the CONNECT line: an IP literal."""
    canary = bed.nginx.canary_mark("attacker")
    r = gw.curl(gw.url("allowed.test", "/whoami.txt"),
                "--connect-to", "allowed.test:%d:127.0.0.66:%d" % (gw.t, gw.t))
    assert (r.http_connect, r.sluice_reason) == (403, "ip_literal"), r.stderr
    assert expect.proxy_status_error(r.blocks[0].proxy_status) == "destination_ip_prohibited"
    bed.nginx.barrier()
    assert bed.nginx.canary_hits_since("attacker", canary) == []


def test_forged_resolve_plain_http(gw, bed):
    canary = bed.nginx.canary_mark("attacker")
    r = gw.curl(gw.url("allowed.test", "/whoami.txt", scheme="http"),
                "--resolve", "allowed.test:%d:127.0.0.66" % gw.p)
    assert (r.http_code, r.body) == (200, b"allowed.test\n")
    bed.nginx.barrier()
    assert bed.nginx.canary_hits_since("attacker", canary) == []


def test_plain_http_to_ip_literal(gw, bed):
    canary = bed.nginx.canary_mark("attacker")
    mark = gw.audit.mark()
    url = "http://127.0.0.66:%d/whoami.txt" % gw.p
    ex = gw.forward([request_bytes("GET", url, "127.0.0.66:%d" % gw.p)])
    expect.denial(ex, 403, "ip_literal")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="forward", decision="deny", reason="ip_literal", status=403,
                  upstream=None)
    bed.nginx.barrier()
    assert bed.nginx.canary_hits_since("attacker", canary) == []


@pytest.mark.parametrize("name", ["loop.wild.test", "meta.wild.test", "priv.wild.test",
                                  "loop.pub.test", "meta.pub.test", "priv.pub.test",
                                  "cdn.pub.test"])
def test_allowed_name_resolving_to_internal_address(gw, bed, name):
    """*.wild.test opens only 127.0.0.20 with `ips`; *.pub.test has no `ips`, so the
    table of docs/policy.md#addresses alone must refuse loopback, link-local and RFC 1918
    answers."""
    canary = bed.nginx.canary_mark("internal")
    mark = gw.audit.mark()
    ex = gw.tunnel(name, [get("/whoami.txt", host=name)])
    expect.denial(ex, 403, "ip_denied")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="ip_denied", status=403, upstream=None,
                  rule={name.split(".", 1)[1].split(".")[0], None})
    bed.nginx.barrier()
    assert bed.nginx.canary_hits_since("internal", canary) == []


def test_mixed_answer_dials_only_the_address_inside_ips(gw, bed):
    """mixed.wild.test answers 127.0.0.20 and 127.0.0.1; only the first is in `ips`."""
    canary = bed.nginx.canary_mark("internal")
    for _ in range(6):
        ex = gw.tunnel("mixed.wild.test", [get("/whoami.txt", "mixed.wild.test",
                                               keep_alive=False)])
        assert (ex.final.status, ex.final.body) == (200, b"mixed.wild.test\n")
    bed.nginx.barrier()
    assert bed.nginx.canary_hits_since("internal", canary) == []


def test_allowed_name_is_resolved_by_the_configured_resolver(gw, bed):
    before = bed.dns.was_asked("a.wild.test").count("a.wild.test")
    ex = gw.tunnel("a.wild.test", [get("/whoami.txt", "a.wild.test", keep_alive=False)])
    assert (ex.final.status, ex.final.body) == (200, b"a.wild.test\n")
    assert bed.dns.was_asked("a.wild.test").count("a.wild.test") > before


def test_denied_name_is_never_resolved(gw, bed):
    name = "exfil-%s.attacker.test" % rand()
    mark = gw.audit.mark()
    ex = gw.tunnel(name, [get("/", host=name)])
    # Refused in band (the tunnel opens with a leaf for the name): still never resolved.
    expect.in_band_refusal(gw, mark, ex, "not_allowed_host", name, gw.t)
    assert bed.dns.was_asked(name) == []
    ex = gw.tunnel(name, [get("/", host=name)], connect_headers=AT_CONNECT)
    assert ex.denied_at_connect
    expect.denial(ex, 403, "not_allowed_host")
    assert bed.dns.was_asked(name) == []


def test_denied_port_name_is_never_resolved(gw, bed):
    name = "portprobe-%s.wild.test" % rand()
    ex = gw.tunnel(name, [get("/", host=name)], port=22)
    expect.denial(ex, 403, "not_allowed_port")
    assert ex.denied_at_connect
    assert bed.dns.was_asked(name) == []


def test_plain_http_denied_name_is_never_resolved(gw, bed):
    name = "exfil-%s.attacker.test" % rand()
    url = "http://%s:%d/" % (name, gw.p)
    ex = gw.forward([request_bytes("GET", url, "%s:%d" % (name, gw.p))])
    expect.denial(ex, 403, "not_allowed_host")
    assert bed.dns.was_asked(name) == []


def test_sni_mismatch_name_is_never_resolved(gw, bed):
    """The SNI names an allowed wildcard host but not the CONNECT target: refused at the
    ClientHello, and the name never reaches DNS (docs/wire.md#the-invariant,
    point 7)."""
    name = "exfil-%s.wild.test" % rand()
    ex = gw.tunnel("allowed.test", [get("/", host=name)], sni=name)
    assert ex.tls_error is not None
    assert bed.dns.was_asked(name) == []


def test_host_mismatch_name_is_never_resolved(gw, bed):
    name = "exfil-%s.wild.test" % rand()
    ex = gw.tunnel("allowed.test", [get("/", host=name)])
    expect.denial(ex, 403, "host_mismatch")
    assert bed.dns.was_asked(name) == []



def two_rules_for_one_host(tls_port):
    """/whoami.txt may use 127.0.0.20; /small.bin only 127.0.0.21, where allowed.test does
    not resolve: /small.bin is always ip_denied."""
    return [
        {"name": "whoami", "hosts": ["allowed.test"], "ports": [tls_port],
         "paths": ["/whoami.txt"], "ips": ["127.0.0.20/32"]},
        {"name": "small", "hosts": ["allowed.test"], "ports": [tls_port],
         "paths": ["/small.bin"], "ips": ["127.0.0.21/32"]},
    ]


def test_keepalive_does_not_widen_a_rules_ips(make_gw, bed):
    """Both requests on one client connection: the upstream connection the first one opened
    to 127.0.0.20 must not carry the second (docs/wire.md#the-invariant: every request is checked on
    its own)."""
    g = make_gw(rules=two_rules_for_one_host(bed.tls_port))
    m = rand()
    ex = g.tunnel("allowed.test", [get("/whoami.txt"), get("/small.bin?m=" + m)])
    assert ex.responses[0].status == 200
    expect.denial(ex.responses[1], 403, "ip_denied")
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]]


def test_pooled_connection_does_not_widen_a_rules_ips(make_gw, bed):
    """The same across client connections, through the upstream pool. Whether the first
    connection's upstream is back in the pool when the second request comes is up to
    sluice's loop, so a broken sluice may pass this now and then; a correct one always does."""
    g = make_gw(rules=two_rules_for_one_host(bed.tls_port))
    expect.denial(g.tunnel("allowed.test", [get("/small.bin")]), 403, "ip_denied")
    assert g.tunnel("allowed.test", [get("/whoami.txt", keep_alive=False)]).final.status == 200
    m = rand()
    expect.denial(g.tunnel("allowed.test", [get("/small.bin?m=" + m)]), 403, "ip_denied")
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]]
