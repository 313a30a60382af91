"""Transparent mode: what the sandbox sends that is neither web traffic nor DNS to the gateway
never reaches sluice or anything else (T5, T6, I9, D8, D10 of docs/threat-model.md; TRANSPARENT.md),
with a real sluice listening on the gateway address: its transparent port, its `dns_listen` port and
an explicit proxy port (`listen`, for this module) dialled directly, another host service on
the gateway, other ports and UDP (QUIC) anywhere, DNS to another resolver, and IPv6, which
this sandbox has no gateway address for (no --gateway6), even when root in the sandbox routes
it to the gateway's link-local address itself.

Dropped packets leave no audit record and no accepted connection: after the probes time out,
a barrier request must be the only new record and the only connection sluice's debug log
shows it accepting (SLUICE_LOG=debug).
Needs root (namespaces, nftables); skips with the reason otherwise.
"""
import pytest

from netns_bed import sh, wait_until
from transparent_bed import DOC4, DOC4_DNS, DOC6, transparent_env

NEG = 1.5  # seconds a probe that must be dropped waits for an answer


@pytest.fixture(scope="module")
def env(bed, sluice_binary):
    with transparent_env(bed, sluice_binary, explicit=True) as e:
        yield e


def tcp(host, port, tag):
    return dict(kind="tcp", host=host, port=port, tag=tag, timeout=NEG)


def udp(host, port, tag):
    return dict(kind="udp", host=host, port=port, tag=tag, timeout=NEG)


def dns(kind, host, port, qname):
    return dict(kind="dns_" + kind, host=host, port=port, qname=qname, timeout=NEG)


def input_drops(env):
    out = env.sandbox.nft("list", "chain", "inet", env.sandbox.table, "input").stdout
    lines = [line for line in out.splitlines() if "counter packets" in line]
    return int(lines[-1].split("counter packets ")[1].split()[0])


def assert_quiet(env, m):
    """Nothing the probes sent reached sluice: the barrier is the only new record and the only
    connection accepted since `m`; nothing was dialled outside."""
    before, barrier = env.audit_barrier(m)
    assert before == [], "dropped traffic left audit records: %r" % before
    accepted = env.accepted_since(m)
    assert accepted == [barrier["client"]], \
        "sluice accepted %r (only the barrier %s expected)" % (accepted, barrier["client"])
    env.assert_nothing_dialled_outside(m)
    m.canaries.assert_untouched()


def test_everything_but_web_and_dns_is_dropped_before_sluice(env):
    sink = env.sandbox.standins.tcp(env.gw, 0, "sink")  # another service on the gateway
    m = env.mark()
    drops = input_drops(env)
    probes = {
        "transparent_direct": tcp(env.gw, env.tport, "t"),
        "explicit_proxy": tcp(env.gw, env.explicit_port, "e"),
        "dns_port_tcp": dns("tcp", env.gw, env.dport, "allowed.test"),
        "dns_port_udp": dns("udp", env.gw, env.dport, "allowed.test"),
        "host_service": tcp(env.gw, sink, "s"),
        "ssh_gateway": tcp(env.gw, 22, "ssh"),
        "quic_gateway": udp(env.gw, 443, "quic"),
        "ssh_away": tcp(DOC4, 22, "ssh"),
        "alt_tls_away": tcp(DOC4, 8443, "alt"),
        "quic_away": udp(DOC4, 443, "quic"),
        "udp_exfil": udp(DOC4, 9999, "exfil"),
        "dns_away_udp": dns("udp", DOC4_DNS, 53, "allowed.test"),
        "dns_away_tcp": dns("tcp", DOC4_DNS, 53, "allowed.test"),
        "dot_away": tcp(DOC4_DNS, 853, "dot"),
    }
    results = env.probe(probes)
    assert {k: r["outcome"] for k, r in results.items()} == \
        {k: "timeout" for k in probes}, results
    assert env.sandbox.standins.matching(role="sink") == []
    # what was addressed to the gateway itself met the input chain's drop
    assert input_drops(env) - drops >= 7
    assert_quiet(env, m)


def test_sluice_serves_dns_and_web_on_the_redirected_ports_only(env):
    """The control for the test above: the same sandbox does reach sluice through the redirect
    (port 53 on the gateway; 443 to any address)."""
    m = env.mark()
    answer = env.query("allowed.test", tcp=True)
    assert answer.addresses == [env.gw], answer
    r = env.curl("https://allowed.test/whoami.txt?m=%s" % m.marker)
    assert (r.rc, r.http_code) == (0, 200), r.stderr
    rec = env.audit.one(m.audit)
    assert rec["orig_dst"] == "%s:443" % env.gw and rec["decision"] == "allow", rec


def _link_local(dev, prefix=()):
    out = sh("ip", "-6", "-o", "addr", "show", "dev", dev, "scope", "link", prefix=prefix).stdout
    return out.split()[3].split("/")[0] if out.strip() else None


def _settled(dev, netns=None):
    prefix = ("ip", "-n", netns) if netns else ("ip",)
    out = sh(*prefix, "-6", "-o", "addr", "show", "dev", dev, "scope", "link").stdout
    return out.strip() and "tentative" not in out


def test_ipv6_without_gateway6_never_reaches_sluice(env):
    """T5: no --gateway6, so no IPv6 for the sandbox; root in the sandbox routes IPv6 to the
    gateway's link-local address anyway (with a static neighbour entry, so the packets do
    leave). The script's guard drops them all: no connection, no record. (Run last in this
    module: it changes the sandbox's routes.)"""
    sb = env.sandbox
    host_ll = _link_local(sb.host_if)
    if host_ll is None:
        pytest.skip("IPv6 is disabled on the host end of the veth: no IPv6 to drop")
    wait_until(lambda: _settled(sb.host_if) and _settled(sb.sbx_if, sb.name), 10,
               "the link-local addresses to leave DAD")
    mac = sh("ip", "-o", "link", "show", "dev", sb.host_if).stdout.split("link/ether ")[1] \
        .split()[0]
    sb.in_sandbox("-6", "neigh", "replace", host_ll, "lladdr", mac, "dev", sb.sbx_if,
                  "nud", "permanent")
    sb.in_sandbox("-6", "route", "replace", "default", "via", host_ll, "dev", sb.sbx_if)
    m = env.mark()
    v6_drops = sb.counter("meta nfproto ipv6")
    scoped = "%s%%%s" % (host_ll, sb.sbx_if)
    probes = {
        "web6": tcp(DOC6, 443, "w"),
        "http6": tcp(DOC6, 80, "h"),
        "gw_ll_web": tcp(scoped, 443, "g"),
        "gw_ll_transparent": tcp(scoped, env.tport, "t"),
        "gw_ll_dns": dns("udp", scoped, 53, "allowed.test"),
        "quic6": udp(DOC6, 443, "q"),
    }
    results = env.probe(probes)
    assert {k: r["outcome"] for k, r in results.items()} == \
        {k: "timeout" for k in probes}, results
    assert sb.counter("meta nfproto ipv6") - v6_drops >= len(probes)
    assert_quiet(env, m)
