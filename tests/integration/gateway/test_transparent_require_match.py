"""Transparent mode with `original_dst: require_match` (docs/wire.md#transparent-mode; D1
refused instead of corrected; TRANSPARENT.md).

The address the sandbox dialled must be the one sluice's resolver gave it (the gateway) or one
of sluice's own answers for H; otherwise the request is refused, 403 dns_mismatch (over TLS for
https), and nothing is dialled: neither the CDN nor the attacker hears of it. The normal path
(a name looked up through `dns_listen`, then dialled) still works.

This module's sandbox also has `dns_listen` on port 53 itself (`--dns-port 53`: no redirect,
the script's input chain accepts 53 to the gateway).
Needs root (namespaces, nftables); skips with the reason otherwise.
"""
import pytest

from expect import closed, denial
from transparent_bed import DOC4, PLAIN, check_record, get, transparent_env


@pytest.fixture(scope="module")
def env(bed, sluice_binary):
    with transparent_env(bed, sluice_binary, original_dst="require_match", dns_port=53) as e:
        yield e


def test_dns_listen_on_port_53_answers_without_a_redirect(env):
    assert env.dport == 53
    assert not env.sandbox.redirects_to(53)
    assert env.query("allowed.test").addresses == [env.gw]
    assert env.query("allowed.test", tcp=True).addresses == [env.gw]


@pytest.mark.parametrize("scheme, port", [("https", 443), ("http", 80)])
def test_the_normal_path_through_the_sandbox_resolver_works(env, scheme, port):
    m = env.mark()
    url = "%s://allowed.test/whoami.txt?m=%s" % (scheme, m.marker)
    r = env.curl(url)
    assert (r.rc, r.http_code, r.body) == (0, 200, b"allowed.test\n"), (r.rc, r.stderr)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:%d" % (env.gw, port), "allow", None,
                 "allowed.test" if scheme == "https" else None, "allowed.test", 200,
                 rule="cdn", url=url, upstream="%s:%d" % (env.addrs.cdn, port))
    assert len(env.cdn_hits(m.marker)) == 1


@pytest.mark.parametrize("scheme, port", [("https", 443), ("http", 80)])
def test_a_forged_mapping_is_dns_mismatch(env, scheme, port):
    """D1 refused: allowed.test pinned by the sandbox to 203.0.113.66. Made right after an
    allowed request, so an idle pooled upstream connection for allowed.test exists: it must
    not serve the forged request either."""
    warm = env.curl("%s://allowed.test/whoami.txt" % scheme)
    assert warm.http_code == 200, warm.stderr
    m = env.mark()
    r = env.curl("%s://allowed.test/whoami.txt?m=%s" % (scheme, m.marker), "--resolve",
                 "allowed.test:%d:%s" % (port, DOC4))
    assert r.rc == 0 and r.http_code == 403, (r.rc, r.stderr)
    denial(r.final, 403, "dns_mismatch")
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:%d" % (DOC4, port), "deny", "dns_mismatch",
                 "allowed.test" if scheme == "https" else None, "allowed.test", 403,
                 upstream=None)
    assert env.cdn_hits(m.marker) == []
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)


def test_a_forged_mapping_over_a_raw_tls_socket_is_refused_and_closed(env):
    m = env.mark()
    ex = env.exchange(DOC4, 443, [get("/whoami.txt?m=%s" % m.marker)], sni="allowed.test")
    assert ex.tls_error is None, ex.tls_error  # the name is allowed: TLS is made, then 403
    denial(ex, 403, "dns_mismatch")
    closed(ex)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "deny", "dns_mismatch", "allowed.test",
                 "allowed.test", 403, client=ex.client)
    assert env.cdn_hits(m.marker) == []
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)


def test_plain_http_to_another_address_is_dns_mismatch(env):
    """S4 under require_match: `curl http://203.0.113.66/ -H 'Host: allowed.test'`."""
    m = env.mark()
    ex = env.exchange(DOC4, 80, [get("/whoami.txt?m=%s" % m.marker)], sni=PLAIN)
    denial(ex, 403, "dns_mismatch")
    closed(ex)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:80" % DOC4, "deny", "dns_mismatch", None, "allowed.test", 403,
                 client=ex.client)
    assert env.cdn_hits(m.marker) == []
    env.assert_nothing_dialled_outside(m)


def test_an_address_among_sluices_own_answers_is_accepted(env):
    """mixed.wild.test resolves (at sluice's resolver) to the CDN and to 198.51.100.30. The
    sandbox dials the latter: among sluice's answers, so accepted; sluice still connects only
    to the address its rule's `ips` allows (the CDN), never to the one dialled."""
    m = env.mark()
    url = "https://mixed.wild.test/whoami.txt?m=%s" % m.marker
    r = env.curl(url, "--resolve", "mixed.wild.test:443:198.51.100.30")
    assert (r.rc, r.http_code, r.body) == (0, 200, b"mixed.wild.test\n"), (r.rc, r.stderr)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "198.51.100.30:443", "allow", None, "mixed.wild.test",
                 "mixed.wild.test", 200, rule="wild", upstream="%s:443" % env.addrs.cdn)
    assert len(env.cdn_hits(m.marker)) == 1
    env.assert_nothing_dialled_outside(m)


def test_a_name_sluice_cannot_resolve_is_dns_failed(env):
    """D2 under require_match: there is nothing to compare with; still no fallback."""
    m = env.mark()
    name = "nxd-%s.wild.test" % m.marker
    r = env.curl("https://%s/" % name, "--resolve", "%s:443:%s" % (name, DOC4))
    assert r.rc == 0 and r.http_code == 502, (r.rc, r.stderr)
    denial(r.final, 502, "dns_failed")
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "deny", "dns_failed", name, name, 502)
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)
