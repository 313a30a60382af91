"""Transparent mode and name resolution (D1, D2, D3 of docs/threat-model.md;
point 5 of docs/wire.md#the-invariant, docs/policy.md#addresses, docs/wire.md#transparent-mode).

The sandbox chooses where its connections go: `curl --resolve`, its own /etc/hosts, a raw
socket to any address. nftables brings every port-443/80 connection to sluice whatever the
address, and sluice must dial only its own resolution of H (`original_dst: ignore` here: the
dialled address is logged as orig_dst and otherwise unused). The forged address is
203.0.113.66: an address in 127/8 would be the sandbox's own loopback and never leave it
(test_loopback_forgery_stays_inside_the_sandbox). The oracles: the CDN's access log (the
request arrived there), the attacker and internal canaries (nothing arrived), the guard table
(the gateway sent nothing to a documentation address), and the audit record (mode
transparent, orig_dst what the sandbox dialled, upstream the CDN).
Needs root (namespaces, nftables); skips with the reason otherwise.
"""
import os
import socket

import pytest

from expect import denial
from transparent_bed import DOC4, PLAIN, check_record, get, transparent_env


@pytest.fixture(scope="module")
def env(bed, sluice_binary):
    with transparent_env(bed, sluice_binary) as e:
        yield e


def test_bed_the_guard_sees_a_dial_to_a_documentation_address(env):
    """Self-check of the oracle the other tests use: a connection the gateway itself opens to
    203.0.113.66 is counted (and dropped, so it goes nowhere)."""
    m = env.mark()
    with pytest.raises(OSError):
        socket.create_connection((DOC4, 443), timeout=3)
    assert env.guard.leaks() > m.leaks


# --- D1: a forged mapping for an allowed name ------------------------------------------------

@pytest.mark.parametrize("scheme, port", [("https", 443), ("http", 80)])
def test_forged_mapping_with_curl_resolve_reaches_only_the_real_origin(env, scheme, port):
    """SPACE bypass 1: the sandbox pins allowed.test to the attacker's address; sluice dials
    its own answer for allowed.test (the CDN) and records where the sandbox was going."""
    m = env.mark()
    url = "%s://allowed.test/whoami.txt?m=%s" % (scheme, m.marker)
    r = env.curl(url, "--resolve", "allowed.test:%d:%s" % (port, DOC4))
    assert (r.rc, r.http_code, r.body) == (0, 200, b"allowed.test\n"), (r.rc, r.stderr)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:%d" % (DOC4, port), "allow", None,
                 "allowed.test" if scheme == "https" else None, "allowed.test", 200,
                 rule="cdn", url=url, upstream="%s:%d" % (env.addrs.cdn, port))
    assert len(env.cdn_hits(m.marker)) == 1
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)


def test_forged_mapping_in_the_sandbox_hosts_file_reaches_only_the_real_origin(env, scratch):
    """The same through the sandbox's own /etc/hosts (root in the sandbox bind-mounts one in a
    private mount namespace, so nothing of it is left on the host)."""
    hosts = os.path.join(scratch, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 localhost\n%s allowed.test\n" % DOC4)
    via = ("unshare", "--mount", "--propagation", "private", "sh", "-c",
           'mount --bind "$0" /etc/hosts && exec "$@"', hosts)
    seen = env.run(*via[:-1], hosts, "getent", "ahostsv4", "allowed.test")
    assert seen.stdout.split()[:1] == [DOC4], seen  # the sandbox does believe its hosts file
    m = env.mark()
    url = "https://allowed.test/whoami.txt?m=%s" % m.marker
    r = env.curl(url, via=via)
    assert (r.rc, r.http_code, r.body) == (0, 200, b"allowed.test\n"), (r.rc, r.stderr)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "allow", None, "allowed.test", "allowed.test",
                 200, upstream="%s:443" % env.addrs.cdn)
    assert len(env.cdn_hits(m.marker)) == 1
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)
    assert not m.dns.asked_containing(m.marker)


@pytest.mark.parametrize("port", [443, 80])
def test_forged_mapping_with_a_raw_socket_reaches_only_the_real_origin(env, port):
    m = env.mark()
    path = "/whoami.txt?m=%s" % m.marker
    sni = "allowed.test" if port == 443 else PLAIN
    ex = env.exchange(DOC4, port, [get(path)], sni=sni)
    assert ex.tls_error is None and ex.final is not None, (ex.tls_error, ex.error)
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:%d" % (DOC4, port), "allow", None,
                 None if sni is PLAIN else "allowed.test", "allowed.test", 200,
                 client=ex.client, upstream="%s:%d" % (env.addrs.cdn, port))
    assert len(env.cdn_hits(m.marker)) == 1
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)


def test_loopback_forgery_stays_inside_the_sandbox(env):
    """`--resolve allowed.test:443:<the attacker's 127/8 address>` is a connection to the
    sandbox's own loopback: refused there, it never reaches the gateway (no record), and the
    attacker's nginx hears nothing. (Why the forged address in these tests is 203.0.113.66.)"""
    m = env.mark()
    r = env.curl("https://allowed.test/?m=%s" % m.marker, "--resolve",
                 "allowed.test:443:%s" % env.addrs.attacker, timeout=10)
    assert r.rc == 7 and r.http_code == 0, (r.rc, r.stderr)  # couldn't connect
    before, _ = env.audit_barrier(m)
    assert before == []
    m.canaries.assert_untouched()


# --- D2: a name sluice cannot resolve --------------------------------------------------------

def test_a_name_sluice_cannot_resolve_is_dns_failed_not_the_forged_address(env):
    """An allowed wildcard name that sluice's resolver answers NXDOMAIN, pinned by the sandbox
    to the attacker's address: 502 dns_failed over TLS, nothing dialled, no fallback to the
    original destination."""
    m = env.mark()
    name = "nxd-%s.wild.test" % m.marker
    r = env.curl("https://%s/whoami.txt" % name, "--resolve", "%s:443:%s" % (name, DOC4))
    assert r.rc == 0 and r.http_code == 502, (r.rc, r.stderr)
    denial(r.final, 502, "dns_failed")
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "deny", "dns_failed", name, name, 502,
                 rule="wild", upstream=None)
    assert m.dns.asked(name), "sluice did not ask its own resolver"
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)
    assert env.cdn_hits(m.marker) == []


def test_a_name_sluice_cannot_resolve_over_a_raw_socket(env):
    m = env.mark()
    name = "nxd-%s.wild.test" % m.marker
    ex = env.exchange(DOC4, 443, [get("/", host=name)], sni=name)
    assert ex.tls_error is None, ex.tls_error
    denial(ex, 502, "dns_failed")
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "deny", "dns_failed", name, name, 502,
                 client=ex.client)
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)


# --- D3: allowed names that resolve to internal addresses ------------------------------------

@pytest.mark.parametrize("name, address", [
    ("loop.wild.test", "127.0.0.1"),          # outside the rule's `ips`
    ("internal.pub.test", None),              # the internal canary (127.0.K.39), no `ips`
    ("cdn.pub.test", "cdn"),                  # loopback, no `ips`: the CDN is not opened here
    ("loop.pub.test", "127.0.0.1"),
    ("meta.pub.test", "169.254.169.254"),
    ("priv.pub.test", "10.0.0.1"),
])
def test_allowed_names_resolving_to_internal_addresses_are_ip_denied(env, name, address):
    address = {"cdn": env.addrs.cdn, None: env.addrs.internal}.get(address, address)
    m = env.mark()
    r = env.curl("https://%s/whoami.txt?m=%s" % (name, m.marker))
    assert r.rc == 0 and r.http_code == 403, (r.rc, r.stderr)
    denial(r.final, 403, "ip_denied")
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % env.gw, "deny", "ip_denied", name, name, 403,
                 upstream=None)
    assert address in rec["addrs"], rec
    m.canaries.assert_untouched()
    assert env.cdn_hits(m.marker) == []
