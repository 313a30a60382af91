"""Transparent mode and IPv6, with the script's --gateway6/--sandbox6 (TRANSPARENT.md "IPv6";
T5 of docs/threat-model.md; docs/wire.md#transparent-mode, #the-sandboxs-resolver).

A sandbox entry has one `transparent` endpoint. Bound to the gateway's IPv4 address (as these
tests bind it everywhere else), it cannot take the IPv6 connections the script redirects to
the same port on the gateway's IPv6 address: nothing listens there, so the sandbox's IPv6 web
connections and IPv6 DNS are refused at the gateway, reach nothing, and leave no record (the
limitation TRANSPARENT.md states: "leave --gateway6 out"). sluice's resolver has no IPv6
address of its own to give, so AAAA of an allowed name is empty and clients that resolve by
name use IPv4, which works.

(test_transparent_ipv6_wildcard.py: the same sandbox with the transparent listener on the
wildcard [::], which does take both families.)
Needs root (namespaces, nftables); skips with the reason otherwise.
"""
import pytest

from dnswire import A, AAAA
from transparent_bed import DOC6, check_record, transparent_env

NEG = 1.5


@pytest.fixture(scope="module")
def env(bed, sluice_binary):
    with transparent_env(bed, sluice_binary, v6=True) as e:
        yield e


def test_aaaa_is_empty_and_names_lead_to_ipv4(env):
    m = env.mark()
    assert env.query("allowed.test", AAAA).types == []
    assert env.query("allowed.test", A).addresses == [env.gw]
    r = env.curl("https://allowed.test/whoami.txt?m=%s" % m.marker)
    assert (r.rc, r.http_code, r.body) == (0, 200, b"allowed.test\n"), (r.rc, r.stderr)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % env.gw, "allow", None, "allowed.test", "allowed.test", 200)
    assert m.dns.names() == [] or set(m.dns.names()) == {"allowed.test"}


def test_ipv6_web_and_dns_reach_nothing_without_an_ipv6_listener(env):
    m = env.mark()
    probes = {
        "web6": dict(kind="tcp", host=DOC6, port=443, tag="w", timeout=NEG),
        "http6": dict(kind="tcp", host=DOC6, port=80, tag="h", timeout=NEG),
        "gw6_web": dict(kind="tcp", host=env.gw6, port=443, tag="g", timeout=NEG),
        "dns6": dict(kind="dns_udp", host=env.gw6, port=53, qname="allowed.test", timeout=NEG),
        "dns6_tcp": dict(kind="dns_tcp", host=env.gw6, port=53, qname="allowed.test",
                         timeout=NEG),
        "ssh6": dict(kind="tcp", host=DOC6, port=22, tag="s", timeout=NEG),
    }
    results = env.probe(probes)
    for key in ("web6", "http6", "gw6_web", "dns6", "dns6_tcp"):
        assert results[key]["outcome"] in ("refused", "timeout"), results
    assert results["ssh6"]["outcome"] == "timeout", results
    before, barrier = env.audit_barrier(m)
    assert before == [], before
    assert env.accepted_since(m) == [barrier["client"]]
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)
