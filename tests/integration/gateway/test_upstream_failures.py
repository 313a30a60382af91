"""Upstream failures: sluice answers 502 itself and sends no request bytes anywhere.

Each name below is allowed by the policy; what fails is DNS, the TCP connect, or the upstream
certificate (docs/wire.md#upstreams: chain and name verified against upstream.ca_file = the test
CA)."""
import uuid

import expect
from http1 import request_bytes


def get(path, host, **kw):
    return request_bytes("GET", path, host, **kw)


def fails(gw, name, reason, token_key=None):
    mark = gw.audit.mark()
    ex = gw.tunnel(name, [get("/whoami.txt?fail=" + name, name)])
    expect.denial(ex, 502, reason, token_key)
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    # A 502 is sluice's own answer: the request was not forwarded, so we read it as "deny".
    expect.record(rec, mode="connect", decision="deny", reason=reason, status=502,
                  sni=name, host=name, method="GET")
    return ex, rec


def test_upstream_cert_from_attacker_ca(gw, bed):
    """atk.wild.test resolves to the attacker (opened with `ips`), which serves a cert for
    the right name from the attacker's CA: the handshake fails, no request is sent."""
    canary = bed.nginx.canary_mark("attacker")
    _, rec = fails(gw, "atk.wild.test", "upstream_cert")
    expect.record(rec, rule={"atk", None})
    bed.nginx.barrier()
    assert [h for h in bed.nginx.canary_hits_since("attacker", canary) if isinstance(h, dict)] \
        == [], "a request reached the attacker"


def test_upstream_cert_expired(gw, bed):
    fails(gw, "expired.wild.test", "upstream_cert")
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if e["host"] == "expired.wild.test"]


def test_upstream_cert_for_another_name(gw, bed):
    fails(gw, "wrongname.wild.test", "upstream_cert")
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if e["host"] == "wrongname.wild.test"]


def test_upstream_refuses_connection(gw):
    """refused.wild.test resolves to 127.0.0.22, where nothing listens on the port."""
    fails(gw, "refused.wild.test", "upstream_connect")


def test_nxdomain_is_dns_failed(gw, bed):
    name = "nxd-%s.wild.test" % uuid.uuid4().hex[:12]
    fails(gw, name, "dns_failed")
    assert bed.dns.was_asked(name), "an allowed name must be resolved through dnsmasq"


def test_dns_timeout_is_dns_failed(make_gw, bed):
    """The only configured resolver never answers: 502 dns_failed, no fallback resolver."""
    g = make_gw(dns_servers=["%s:%d" % (bed.silent_dns.ADDRESS, bed.silent_dns.port)])
    asked = bed.silent_dns.received
    dnsmasq_before = bed.dns.was_asked("allowed.test").count("allowed.test")
    m = uuid.uuid4().hex[:12]
    mark = g.audit.mark()
    ex = g.tunnel("allowed.test", [get("/whoami.txt?m=" + m, "allowed.test")])
    expect.denial(ex, 502, "dns_failed", token_key="dns_timeout")
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="dns_failed", status=502, upstream=None)
    assert bed.silent_dns.received > asked
    assert bed.dns.was_asked("allowed.test").count("allowed.test") == dnsmasq_before
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]]
