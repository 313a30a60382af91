"""Transparent mode over IPv6 with the transparent listener on the wildcard [::] (which
TRANSPARENT.md allows: "on the gateway address, or on a wildcard"), so that one endpoint takes
the connections the script redirects in both families (--gateway6/--sandbox6). The IPv6 path
must apply the same checks as IPv4 (T5, docs/threat-model.md#going-around-sluice: redirected
IPv6 reaches a listener that applies the same checks), read the IPv6 original destination
(IP6T_SO_ORIGINAL_DST), and record the sandbox's address as it is: an IPv4 sandbox as a.b.c.d,
an IPv6 one in brackets (docs/audit.md client "ip:port"; never the IPv4-mapped form).

`dns_listen` stays on the IPv4 gateway address and the wildcard gives no address to answer
with, so AAAA stays empty: the sandbox only uses IPv6 when it picks an address itself.
Needs root (namespaces, nftables); skips with the reason otherwise.
"""
import pytest

from dnswire import AAAA
from expect import closed, denial
from netutil import wait_until
from transparent_bed import DOC6, PLAIN, check_record, get, transparent_env


@pytest.fixture(scope="module")
def env(bed, sluice_binary):
    with transparent_env(bed, sluice_binary, v6=True, transparent_host="[::]") as e:
        yield e


def bracket(addr, port):
    return "[%s]:%d" % (addr, port)


@pytest.mark.parametrize("scheme, port", [("https", 443), ("http", 80)])
def test_ipv6_to_a_forged_address_reaches_only_the_real_origin(env, scheme, port):
    m = env.mark()
    url = "%s://allowed.test/whoami.txt?m=%s" % (scheme, m.marker)
    r = env.curl(url, "-6", "--resolve", "allowed.test:%d:[%s]" % (port, DOC6))
    assert (r.rc, r.http_code, r.body) == (0, 200, b"allowed.test\n"), (r.rc, r.stderr)
    rec = env.audit.one(m.audit)
    check_record(env, rec, bracket(DOC6, port), "allow", None,
                 "allowed.test" if scheme == "https" else None, "allowed.test", 200,
                 upstream="%s:%d" % (env.addrs.cdn, port), url=url)
    assert rec["client"].startswith("[%s]:" % env.sbx6), rec
    assert len(env.cdn_hits(m.marker)) == 1
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)


def test_ipv6_fronting_is_refused(env):
    m = env.mark()
    ex = env.exchange(DOC6, 443, [get("/whoami.txt?m=%s" % m.marker, host="other.test")],
                      sni="allowed.test")
    denial(ex, 403, "host_mismatch")
    closed(ex)
    rec = env.audit.one(m.audit)
    check_record(env, rec, bracket(DOC6, 443), "deny", "host_mismatch", "allowed.test",
                 "other.test", 403, client=ex.client)
    assert env.cdn_hits(m.marker) == []


def test_ipv6_sni_not_allowed_is_refused_in_band(env):
    """Over IPv6 as over IPv4: the tunnel opens with sluice's leaf for evil.test, and its
    request (Host allowed.test, not the SNI) gets 403 (docs/wire.md#refusals-in-band)."""
    m = env.mark()
    ex = env.exchange(env.gw6, 443, [get("/")], sni="evil.test")
    assert ex.tls_error is None and ex.peer_names == ["evil.test"], (ex.tls_error, ex.peer_names)
    denial(ex, 403, "host_mismatch")
    recs = env.audit.wait(m.audit, lambda r: r["client"] == ex.client, 2)
    assert len(recs) == 2, recs
    check_record(env, recs[0], bracket(env.gw6, 443), "deny", "not_allowed_host", "evil.test",
                 None, None, client=ex.client)
    check_record(env, recs[1], bracket(env.gw6, 443), "deny", "host_mismatch", "evil.test",
                 ..., 403, client=ex.client)
    m.canaries.assert_untouched()


def test_ipv6_plain_http_with_a_host_not_allowed_is_refused(env):
    m = env.mark()
    ex = env.exchange(DOC6, 80, [get("/", host="attacker.test")], sni=PLAIN)
    denial(ex, 403, "not_allowed_host")
    rec = env.audit.one(m.audit)
    check_record(env, rec, bracket(DOC6, 80), "deny", "not_allowed_host", None, "attacker.test",
                 403, client=ex.client)
    assert not m.dns.asked("attacker.test")
    m.canaries.assert_untouched()


def test_ipv4_through_the_dual_stack_listener_is_recorded_as_ipv4(env):
    """The same listener takes the IPv4 sandbox's connections as IPv4-mapped IPv6 sockets:
    the record still names the client as the sandbox's IPv4 address."""
    m = env.mark()
    r = env.curl("https://allowed.test/whoami.txt?m=%s" % m.marker, "-4")
    assert (r.rc, r.http_code) == (0, 200), (r.rc, r.stderr)
    # not audit.wait(): its shape check would already refuse the record's client field
    records = wait_until(lambda: env.audit.since(m.audit), 20, "the request's record")
    assert len(records) == 1, records
    rec = records[0]
    assert rec["orig_dst"] == "%s:443" % env.gw, rec
    assert rec["client"].startswith(env.sbx + ":"), \
        "client %r: the IPv4 sandbox %s recorded in another form" % (rec["client"], env.sbx)


def test_aaaa_stays_empty(env):
    assert env.query("allowed.test", AAAA).types == []
