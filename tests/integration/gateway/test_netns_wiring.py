"""examples/sandbox-netns.sh: a network namespace whose only way out is sluice
(docs/wire.md#transparent-mode, #the-sandboxs-resolver; D8, D10, I9, T5, T6 of
docs/threat-model.md).

No sluice here: threads bound to the gateway address play its `transparent` listener (they
read SO_ORIGINAL_DST) and its `dns_listen` resolver, and a "host service" on the gateway
stands for everything else there (sluice's explicit proxy and admin ports, sshd). Probes run
inside the sandbox (`ip netns exec NAME /usr/bin/python3 netns_probe.py`), all at once. A drop
is a silence: the probe times out, and the listener it would have reached has no record.

Each test makes its own namespace (sbt<random>), a /30 in 10.200.0.0/16 and a ULA /64, and
its finalizer removes them (`down`, then by hand whatever `down` left, then a check that
nothing is left). Needs root (CAP_NET_ADMIN); skips with the reason otherwise. Documentation
addresses are only dialled from inside a sandbox: the host's ip_forward stays as it is, and the
test that needs forwarding turned on builds its own gateway and "outside" namespaces.
"""
import contextlib
import os
import random
import shutil
import socket
import stat
import subprocess

import pytest

from netns_bed import (PYTHON, SCRIPT, Recorder, Sandbox, in_netns, interface_names,
                       netns_names, sh, unavailable_reason, wait_until)

NEG = 1.5  # seconds a probe that must be dropped waits for an answer
POS = 5.0  # ... and one that must get through (it returns as soon as it does)

DOC4 = "203.0.113.66"
DOC4_DNS = "203.0.113.53"
DOC4_HTTP = "198.51.100.7"
DOC6 = "2001:db8::66"


@pytest.fixture(scope="module")
def netns_ok():
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    etc_netns_existed = os.path.isdir("/etc/netns")
    yield
    if not etc_netns_existed:  # the script made it for the first sandbox: leave none behind
        with contextlib.suppress(OSError):
            os.rmdir("/etc/netns")


@pytest.fixture
def make_sandbox(netns_ok):
    """Factory: make_sandbox(up=True, **Sandbox options); all removed at the end."""
    made = []

    def make(up=True, **kw):
        sandbox = Sandbox(**kw)
        made.append(sandbox)
        if up:
            sandbox.up()
        return sandbox

    yield make
    for sandbox in reversed(made):
        sandbox.cleanup()
    left = [thing for sandbox in made for thing in sandbox.leftovers()]
    assert not left, "left behind: %s" % left


def tcp(host, port, tag, timeout=NEG, **kw):
    return dict(kind="tcp", host=host, port=port, tag=tag, timeout=timeout, **kw)


def udp(host, port, tag, timeout=NEG):
    return dict(kind="udp", host=host, port=port, tag=tag, timeout=timeout)


def dns(kind, host, port, qname, timeout=NEG, **kw):
    return dict(kind="dns_" + kind, host=host, port=port, qname=qname, timeout=timeout, **kw)


def icmp(host, timeout=NEG):
    return dict(kind="icmp", host=host, timeout=timeout)


def assert_dropped(results, keys):
    outcomes = {k: results[k] for k in keys}
    assert all(r["outcome"] == "timeout" for r in outcomes.values()), outcomes


def assert_redirected(sandbox, results, key, host, port):
    """The probe `key` (to host:port) reached the transparent stand-in, which read host:port
    as the original destination."""
    assert results[key] == {"outcome": "reply", "data": "ORIG %s %d\n" % (host, port)}, results
    seen = sandbox.standins.matching(role="transparent", tag=sandbox.tag(key))
    assert len(seen) == 1 and seen[0]["orig"] == [host, port], seen
    gw = sandbox.gw6 if ":" in host else sandbox.gw
    assert seen[0]["local"] == [gw, sandbox.tport]


def icmp_or_skip(sandbox, own):
    """Raw ICMP sockets work inside the sandbox (echo to its own address answers), or skip."""
    r = sandbox.probe({"own": icmp(own, timeout=POS)})["own"]
    if r["outcome"] == "permission":
        pytest.skip("no raw ICMP socket inside the namespace: %s" % r.get("detail"))
    assert r["outcome"] == "reply", r


# --- what gets through -----------------------------------------------------------------------

def test_web_ports_to_any_address_reach_the_transparent_listener(make_sandbox):
    sb = make_sandbox()
    targets = {"doc443": (DOC4, 443), "doc80": (DOC4_HTTP, 80), "gw443": (sb.gw, 443),
               "gw80": (sb.gw, 80), "lan443": ("192.168.77.9", 443)}
    results = sb.probe({k: tcp(h, p, sb.tag(k), POS) for k, (h, p) in targets.items()})
    for key, (host, port) in targets.items():
        assert_redirected(sb, results, key, host, port)
    assert all(e["peer"] == sb.sbx for e in sb.standins.matching(role="transparent"))
    assert sb.counter("redirect to :%d" % sb.tport) >= len(targets)


def test_dns_reaches_dns_listen_on_the_gateway_and_nowhere_else(make_sandbox):
    """D8: UDP and TCP 53 to the gateway is sluice's resolver; 53 anywhere else is dropped,
    and so is the resolver's own port dialled directly."""
    sb = make_sandbox()
    q = {k: "%s.%s.test" % (k, sb.name) for k in
         ("udp", "tcp", "other_udp", "other_tcp", "direct_udp", "direct_tcp")}
    results = sb.probe({
        "udp": dns("udp", sb.gw, 53, q["udp"], POS),
        "tcp": dns("tcp", sb.gw, 53, q["tcp"], POS),
        "other_udp": dns("udp", DOC4_DNS, 53, q["other_udp"]),
        "other_tcp": dns("tcp", DOC4_DNS, 53, q["other_tcp"]),
        "direct_udp": dns("udp", sb.gw, sb.dport, q["direct_udp"]),
        "direct_tcp": dns("tcp", sb.gw, sb.dport, q["direct_tcp"]),
    })
    for key in ("udp", "tcp"):
        assert results[key] == {"outcome": "reply", "rcode": 0, "addresses": [sb.gw]}, results
        seen = sb.standins.matching(role="dns", proto=key, qname=q[key])
        assert len(seen) == 1 and seen[0]["peer"] == sb.sbx, seen
    assert_dropped(results, ("other_udp", "other_tcp", "direct_udp", "direct_tcp"))
    asked = {e["qname"] for e in sb.standins.matching(role="dns")}
    assert asked == {q["udp"], q["tcp"]}


def test_the_sandbox_resolver_is_the_gateway(make_sandbox):
    sb = make_sandbox()
    inside = sh("ip", "netns", "exec", sb.name, "cat", "/etc/resolv.conf").stdout
    assert inside == "nameserver %s\n" % sb.gw
    with open(os.path.join(sb.etc_dir, "resolv.conf")) as f:
        assert f.read() == inside
    # The C library's resolver inside the sandbox asks the stand-in, and gets the gateway.
    name = "libc.%s.test" % sb.name
    code = "import socket; print(socket.getaddrinfo(%r, 443, socket.AF_INET)[0][4][0])" % name
    r = sh("ip", "netns", "exec", sb.name, PYTHON, "-c", code)
    assert r.stdout.strip() == sb.gw
    assert sb.standins.matching(role="dns", qname=name)


def test_dns_port_53_is_served_without_a_redirect(make_sandbox):
    """With --dns-port 53 there is nothing to redirect; the input chain lets 53 in itself."""
    sb = make_sandbox(dns_port=53)
    assert sb.dport == 53
    assert not sb.redirects_to(53)
    results = sb.probe({
        "udp": dns("udp", sb.gw, 53, "u.%s.test" % sb.name, POS),
        "tcp": dns("tcp", sb.gw, 53, "t.%s.test" % sb.name, POS),
        "other": dns("udp", DOC4_DNS, 53, "o.%s.test" % sb.name),
        "transparent_direct": tcp(sb.gw, sb.tport, sb.tag("transparent_direct")),
    })
    for key in ("udp", "tcp"):
        assert results[key] == {"outcome": "reply", "rcode": 0, "addresses": [sb.gw]}, results
    assert_dropped(results, ("other", "transparent_direct"))
    assert {e["qname"] for e in sb.standins.matching(role="dns")} == \
        {"u.%s.test" % sb.name, "t.%s.test" % sb.name}


def test_tcp_ports_option_chooses_what_is_redirected(make_sandbox):
    sb = make_sandbox(tcp_ports="8080 443")
    results = sb.probe({"alt": tcp(DOC4, 8080, sb.tag("alt"), POS),
                        "tls": tcp(DOC4, 443, sb.tag("tls"), POS),
                        "http": tcp(DOC4_HTTP, 80, sb.tag("http"))})
    assert_redirected(sb, results, "alt", DOC4, 8080)
    assert_redirected(sb, results, "tls", DOC4, 443)
    assert_dropped(results, ("http",))


# --- what does not ---------------------------------------------------------------------------

def test_everything_else_from_the_sandbox_is_dropped(make_sandbox):
    """T5, T6, I9: other TCP ports, the gateway's own services (the transparent port dialled
    directly included), QUIC and other UDP, anywhere."""
    sb = make_sandbox()
    gw_probes = {
        "transparent_direct": tcp(sb.gw, sb.tport, sb.tag("transparent_direct")),
        "service": tcp(sb.gw, sb.service_port, sb.tag("service")),
        "ssh": tcp(sb.gw, 22, sb.tag("ssh")),
        "service_udp": udp(sb.gw, sb.service_udp_port, sb.tag("service_udp")),
        "quic_gw": udp(sb.gw, 443, sb.tag("quic_gw")),
    }
    away_probes = {
        "ssh_away": tcp(DOC4, 22, sb.tag("ssh_away")),
        "alt_tls": tcp(DOC4, 8443, sb.tag("alt_tls")),
        "quic": udp(DOC4, 443, sb.tag("quic")),
        "udp_exfil": udp(DOC4, 9999, sb.tag("udp_exfil")),
        "dot": tcp(DOC4_DNS, 853, sb.tag("dot")),
    }
    dropped_before = _input_drops(sb)
    results = sb.probe({**gw_probes, **away_probes,
                        "barrier": tcp(DOC4, 443, sb.tag("barrier"), POS)})
    assert_redirected(sb, results, "barrier", DOC4, 443)
    assert_dropped(results, list(gw_probes) + list(away_probes))
    assert sb.standins.matching(role="sink") == []
    assert [e["tag"] for e in sb.standins.matching(role="transparent")] == [sb.tag("barrier")]
    assert _input_drops(sb) - dropped_before >= len(gw_probes)


def _input_drops(sb):
    """Packets the input chain's final drop has counted."""
    r = sb.nft("list", "chain", "inet", sb.table, "input")
    lines = [line.strip() for line in r.stdout.splitlines() if "counter packets" in line]
    assert len(lines) == 1 and lines[0].endswith("drop"), lines
    return int(lines[0].split("counter packets ")[1].split()[0])


def test_icmp_echo_is_dropped(make_sandbox):
    sb = make_sandbox()
    icmp_or_skip(sb, sb.sbx)
    before = _input_drops(sb)
    results = sb.probe({"away": icmp(DOC4), "gateway": icmp(sb.gw)})
    assert_dropped(results, ("away", "gateway"))
    assert _input_drops(sb) > before  # the echo to the gateway met the input chain's drop


def test_spoofed_source_address_is_dropped(make_sandbox):
    """D10: root in the sandbox adds another address of the link's /29 and sends from it.
    Without the guard, sluice would answer that address (a reply routed back over the veth
    here, to a third party elsewhere); the guard drops it before conntrack."""
    sb = make_sandbox(plen=29)
    spoofed = sb.sbx.rsplit(".", 1)[0] + ".3"
    sb.in_sandbox("addr", "add", spoofed + "/29", "dev", sb.sbx_if)
    before = sb.counter("ip saddr != %s" % sb.sbx)
    results = sb.probe({"spoofed": tcp(DOC4, 443, sb.tag("spoofed"), source=spoofed),
                        "spoofed_dns": dns("udp", sb.gw, 53, "spoofed.%s.test" % sb.name,
                                           source=spoofed),
                        "own": tcp(DOC4, 443, sb.tag("own"), POS, source=sb.sbx)})
    assert_dropped(results, ("spoofed", "spoofed_dns"))
    assert_redirected(sb, results, "own", DOC4, 443)
    assert not sb.standins.matching(role="dns")
    assert sb.counter("ip saddr != %s" % sb.sbx) - before >= 2


# --- IPv6 ------------------------------------------------------------------------------------

def test_ipv6_with_gateway6_is_redirected_like_ipv4(make_sandbox):
    sb = make_sandbox(v6=True)
    results = sb.probe({
        "doc6": tcp(DOC6, 443, sb.tag("doc6"), POS),
        "gw6": tcp(sb.gw6, 80, sb.tag("gw6"), POS),
        "doc4": tcp(DOC4, 443, sb.tag("doc4"), POS),
        "dns6": dns("udp", sb.gw6, 53, "v6.%s.test" % sb.name, POS),
        "ssh6": tcp(DOC6, 22, sb.tag("ssh6")),
        "quic6": udp(DOC6, 443, sb.tag("quic6")),
        "transparent_direct6": tcp(sb.gw6, sb.tport, sb.tag("transparent_direct6")),
        "dns_away6": dns("udp", "2001:db8::53", 53, "away6.%s.test" % sb.name),
    })
    assert_redirected(sb, results, "doc6", DOC6, 443)
    assert_redirected(sb, results, "gw6", sb.gw6, 80)
    assert_redirected(sb, results, "doc4", DOC4, 443)
    assert results["dns6"]["outcome"] == "reply", results
    assert [e["peer"] for e in sb.standins.matching(role="dns")] == [sb.sbx6]
    assert_dropped(results, ("ssh6", "quic6", "transparent_direct6", "dns_away6"))
    assert not sb.standins.matching(tag=sb.tag("transparent_direct6"))


def test_icmpv6_echo_is_dropped(make_sandbox):
    sb = make_sandbox(v6=True)
    icmp_or_skip(sb, sb.sbx6)
    results = sb.probe({"away": icmp(DOC6), "gateway": icmp(sb.gw6)})
    assert_dropped(results, ("away", "gateway"))


def _link_local(dev, prefix=()):
    out = sh("ip", "-6", "-o", "addr", "show", "dev", dev, "scope", "link", prefix=prefix).stdout
    return out.split()[3].split("/")[0] if out.strip() else None


def test_ipv6_without_gateway6_is_dropped_whatever_the_sandbox_configures(make_sandbox):
    """T5: no --gateway6, and root in the sandbox routes IPv6 to the gateway's link-local
    address itself, with a static neighbour entry so that the packets do leave the sandbox.
    The guard drops them all: nothing is redirected, nothing reaches a host socket."""
    sb = make_sandbox()
    host_ll = _link_local(sb.host_if)
    if host_ll is None:
        pytest.skip("IPv6 is disabled on the host end of the veth: no IPv6 to drop")
    assert not [line for line in sb.ruleset() if "ip6 " in line and "redirect" in line]
    # Both link-local addresses out of DAD: a tentative address neither sends nor receives,
    # which would make a drop here mean nothing.
    wait_until(lambda: _settled(sb.host_if) and _settled(sb.sbx_if, sb.name), 10,
               "the link-local addresses to leave DAD")
    sink = sb.standins.tcp("%s%%%s" % (host_ll, sb.host_if), 0, "sink")
    link = sh("ip", "-o", "link", "show", "dev", sb.host_if).stdout
    mac = link.split("link/ether ")[1].split()[0]
    sb.in_sandbox("-6", "neigh", "replace", host_ll, "lladdr", mac, "dev", sb.sbx_if,
                  "nud", "permanent")
    sb.in_sandbox("-6", "route", "replace", "default", "via", host_ll, "dev", sb.sbx_if)
    before = sb.counter("meta nfproto ipv6")
    scoped = "%s%%%s" % (host_ll, sb.sbx_if)
    results = sb.probe({
        "doc6": tcp(DOC6, 443, sb.tag("doc6")),
        "gw_ll": tcp(scoped, 443, sb.tag("gw_ll")),
        "gw_ll_service": tcp(scoped, sink, sb.tag("gw_ll_service")),
        "gw_ll_dns": dns("udp", scoped, 53, "ll.%s.test" % sb.name),
        "quic6": udp(DOC6, 443, sb.tag("quic6")),
    })
    assert_dropped(results, results.keys())
    assert sb.standins.events == []
    assert sb.counter("meta nfproto ipv6") - before >= len(results)


def _settled(dev, netns=None):
    prefix = ("ip", "-n", netns) if netns else ("ip",)
    out = sh(*prefix, "-6", "-o", "addr", "show", "dev", dev, "scope", "link").stdout
    return out.strip() and "tentative" not in out


# --- up, down, status ------------------------------------------------------------------------

def test_down_removes_everything_and_a_second_down_is_fine(make_sandbox):
    sb = make_sandbox(v6=True)
    assert sb.script("status", sb.name).returncode == 0
    assert sorted(sb.leftovers()) == sorted(["netns " + sb.name, "link " + sb.host_if,
                                             "nft table " + sb.table, sb.etc_dir])
    r = sb.down()
    assert r.returncode == 0, r.stderr
    assert sb.name not in netns_names()
    links = sh("ip", "-o", "link").stdout
    assert sb.host_if not in links and sb.sbx_if not in links
    assert "inet %s\n" % sb.table not in sh("nft", "list", "tables").stdout + "\n"
    assert not os.path.lexists(sb.etc_dir)
    again = sb.down()
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("already gone") == 4, again.stdout
    status = sb.script("status", sb.name)
    assert status.returncode == 3 and status.stdout.count("absent") == 4, status.stdout


def test_long_name_gets_short_interface_names(make_sandbox):
    name = "sbt-%016x" % random.getrandbits(64)
    sb = make_sandbox(name=name)
    assert len(sb.host_if) <= 15 and len(sb.sbx_if) <= 15
    assert sb.host_if == interface_names(name)[0] != "slh-" + name
    results = sb.probe({"web": tcp(DOC4, 443, sb.tag("web"), POS)})
    assert_redirected(sb, results, "web", DOC4, 443)
    assert sb.down().returncode == 0
    assert sb.leftovers() == []


def test_up_twice_keeps_one_copy_of_the_rules_and_a_different_request_is_refused(make_sandbox):
    sb = make_sandbox(v6=True)
    rules = sb.ruleset()
    again = sb.script(*sb.up_args())
    assert again.returncode == 0, again.stderr
    assert sb.ruleset() == rules
    addrs = sh("ip", "-o", "addr", "show", "dev", sb.host_if, "scope", "global").stdout
    assert addrs.count(" inet ") == 1 and addrs.count(" inet6 ") == 1, addrs
    routes = sb.in_sandbox("route", "show", "default").stdout.strip().splitlines()
    assert len(routes) == 1, routes

    other = sb.gw.rsplit(".", 2)[0] + ".%d." % ((int(sb.gw.split(".")[2]) + 1) % 256)
    refused = sb.script(*sb.up_args(gw=other + "1", sbx=other + "2"))
    assert refused.returncode == 1
    assert "down %s" % sb.name in refused.stderr and other + "1" in refused.stderr, refused.stderr
    assert sb.ruleset() == rules
    assert sh("ip", "-o", "addr", "show", "dev", sb.host_if, "scope", "global").stdout == addrs
    results = sb.probe({"web": tcp(DOC4, 443, sb.tag("web"), POS)})
    assert_redirected(sb, results, "web", DOC4, 443)


def test_up_again_restores_a_deleted_table(make_sandbox):
    """A firewall reload that flushes the ruleset takes the table away: `up` puts it back."""
    sb = make_sandbox()
    rules = sb.ruleset()
    sb.nft("delete", "table", "inet", sb.table)
    status = sb.script("status", sb.name)
    assert status.returncode == 1 and "nft table inet %s: absent" % sb.table in status.stdout
    r = sb.script(*sb.up_args())
    assert r.returncode == 0, r.stderr
    assert sb.ruleset() == rules
    results = sb.probe({"web": tcp(DOC4, 443, sb.tag("web"), POS),
                        "ssh": tcp(sb.gw, 22, sb.tag("ssh"))})
    assert_redirected(sb, results, "web", DOC4, 443)
    assert_dropped(results, ("ssh",))


def test_a_failing_step_is_named_and_undone(make_sandbox, tmp_path):
    """`ip` fails at the sandbox's default route, late in `up`: the message names the step,
    and the table, veth, namespace and /etc/netns entry made before it are gone again."""
    sb = make_sandbox(up=False, v6=True)
    sb.listen()
    fake = tmp_path / "ip"
    fake.write_text('#!/bin/sh\ncase "$*" in *"route replace default"*)\n'
                    '  echo "Error: injected by the test" >&2; exit 2 ;;\nesac\n'
                    'exec %s "$@"\n' % shutil.which("ip"))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, PATH="%s:%s" % (tmp_path, os.environ.get("PATH", "")))
    r = sb.script(*sb.up_args(), env=env)
    assert r.returncode == 1
    assert "injected by the test" in r.stderr
    assert "default route via %s in %s failed" % (sb.gw, sb.name) in r.stderr, r.stderr
    assert "undone" in r.stderr
    assert sb.leftovers() == []


def test_a_foreign_resolv_conf_is_refused_before_anything_changes(make_sandbox):
    sb = make_sandbox(up=False)
    sb.listen()
    os.makedirs(sb.etc_dir)
    foreign = os.path.join(sb.etc_dir, "resolv.conf")
    with open(foreign, "w") as f:
        f.write("nameserver 192.0.2.53\n")
    r = sb.script(*sb.up_args())
    assert r.returncode == 1 and foreign in r.stderr, r.stderr
    assert sb.leftovers() == [sb.etc_dir]
    with open(foreign) as f:
        assert f.read() == "nameserver 192.0.2.53\n"


def test_the_gateways_own_namespace_is_refused_as_the_sandbox(netns_ok):
    """`ip netns attach NAME <a gateway PID>` names the gateway's own namespace: `up NAME`
    would put the sandbox's address and default route on the gateway. Checked in a scratch
    namespace that plays the gateway, so that a regression costs nothing outside it."""
    name = "sbt%06x" % random.getrandbits(24)
    sh("ip", "netns", "add", name)
    try:
        inside = ("nsenter", "--net=/run/netns/" + name, "--")
        sh("ip", "link", "set", "dev", "lo", "up", prefix=inside)
        routes = sh("ip", "route", "show", "table", "all", prefix=inside).stdout
        r = subprocess.run([*inside, SCRIPT, "up", name, "--gateway", "10.200.3.1/30",
                            "--sandbox", "10.200.3.2"], capture_output=True, text=True)
        assert r.returncode == 1 and "namespace this script runs in" in r.stderr, r.stderr
        assert sh("ip", "route", "show", "table", "all", prefix=inside).stdout == routes
        assert sh("nft", "list", "tables", prefix=inside).stdout == ""
        assert not os.path.lexists("/etc/netns/" + name)
    finally:
        sh("ip", "netns", "del", name, check=False)  # with it whatever a regression made there
        with contextlib.suppress(OSError):
            os.unlink("/etc/netns/%s/resolv.conf" % name)
        with contextlib.suppress(OSError):
            os.rmdir("/etc/netns/" + name)


# --- a gateway that forwards -----------------------------------------------------------------

@pytest.fixture
def forwarding_gateway(netns_ok):
    """A gateway namespace with ip_forward=1 and a default route into an "outside" namespace
    that holds the documentation addresses (and has no other link): what would leave the
    gateway is seen there, by canary sockets and an nft counter, and goes nowhere else."""
    tag = "%06x" % random.getrandbits(24)
    gw_ns, out_ns = "sbg" + tag, "sbo" + tag
    gw_if, out_if = "sbg%sa" % tag, "sbg%sb" % tag
    canary = Recorder()
    try:
        sh("ip", "netns", "add", gw_ns)
        sh("ip", "netns", "add", out_ns)
        sh("ip", "-n", gw_ns, "link", "add", gw_if, "type", "veth", "peer", "name", out_if,
           "netns", out_ns)
        for ns, dev, a4, a6 in ((gw_ns, gw_if, "10.201.0.1/30", "fd5d::1/64"),
                                (out_ns, out_if, "10.201.0.2/30", "fd5d::2/64")):
            sh("ip", "-n", ns, "addr", "add", a4, "dev", dev)
            sh("ip", "-n", ns, "addr", "add", a6, "dev", dev, "nodad")
            sh("ip", "-n", ns, "link", "set", "dev", dev, "up")
            sh("ip", "-n", ns, "link", "set", "dev", "lo", "up")
        sh("ip", "-n", gw_ns, "route", "add", "default", "via", "10.201.0.2")
        sh("ip", "-n", gw_ns, "-6", "route", "add", "default", "via", "fd5d::2")
        sh("ip", "netns", "exec", gw_ns, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward && "
           "echo 1 > /proc/sys/net/ipv6/conf/all/forwarding")
        for a in (DOC4 + "/32", DOC4_DNS + "/32", DOC4_HTTP + "/32"):
            sh("ip", "-n", out_ns, "addr", "add", a, "dev", "lo")
        sh("ip", "-n", out_ns, "addr", "add", DOC6 + "/128", "dev", "lo", "nodad")
        sh("ip", "-n", out_ns, "route", "add", "10.200.0.0/16", "via", "10.201.0.1")
        sh("ip", "-n", out_ns, "-6", "route", "add", "fd5c::/16", "via", "fd5d::1")
        subprocess.run(["ip", "netns", "exec", out_ns, "nft", "-f", "-"], check=True, text=True,
                       input="table inet canary {\n chain seen {\n"
                             "  type filter hook prerouting priority raw; policy accept;\n"
                             "  ip saddr 10.200.0.0/16 counter\n"
                             "  ip6 saddr fd5c::/16 counter\n }\n}\n")

        def listen():
            for port in (80, 443, 22, 9999, 8443):
                canary.tcp("0.0.0.0", port, "sink")
            for port in (443, 22):
                canary.tcp("::", port, "sink")
            for port in (53, 443, 9999):
                canary.udp("0.0.0.0", port, "sink")
            canary.udp("::", 443, "sink")
        in_netns(out_ns, listen)

        def outside_counts():
            out = sh("ip", "netns", "exec", out_ns, "nft", "list", "table", "inet",
                     "canary").stdout
            return [int(line.split("counter packets ")[1].split()[0])
                    for line in out.splitlines() if "counter packets" in line]

        # The bed works: the gateway itself reaches the outside.
        def reach():
            with socket.create_connection((DOC4, 9999), timeout=POS) as s:
                s.sendall(b"gateway-selftest\n")
                return s.recv(16)
        assert in_netns(gw_ns, reach) == b"SINK\n"
        wait_until(lambda: canary.matching(tag="gateway-selftest"), POS, "the canary's record")
        yield gw_ns, canary, outside_counts
    finally:
        canary.stop()
        for ns in (gw_ns, out_ns):
            if ns in netns_names():
                sh("ip", "netns", "del", ns, check=False)


def test_nothing_leaves_a_gateway_that_forwards(forwarding_gateway, make_sandbox):
    """T5, T6 with ip_forward=1 and a route out: the forward chain drops what the sandbox
    sends past the gateway, for IPv4 and IPv6. Then, as the control, the table is deleted and
    the same kind of packet does get out: the drop was the table's doing. (The fixtures in
    this order: the sandbox goes, with `down` run in the gateway, before the gateway does.)"""
    gw_ns, canary, outside_counts = forwarding_gateway
    sb = make_sandbox(v6=True, host_ns=gw_ns)
    probes = {
        "ssh": tcp(DOC4, 22, sb.tag("ssh")),
        "alt_tls": tcp(DOC4, 8443, sb.tag("alt_tls")),
        "raw_tcp": tcp(DOC4, 9999, sb.tag("raw_tcp")),
        "quic": udp(DOC4, 443, sb.tag("quic")),
        "udp_exfil": udp(DOC4, 9999, sb.tag("udp_exfil")),
        "dns_away": dns("udp", DOC4_DNS, 53, "away.%s.test" % sb.name),
        "dns_away_tcp": dns("tcp", DOC4_DNS, 53, "awaytcp.%s.test" % sb.name),
        "ssh6": tcp(DOC6, 22, sb.tag("ssh6")),
        "quic6": udp(DOC6, 443, sb.tag("quic6")),
        "icmp": icmp(DOC4),
        "icmp6": icmp(DOC6),
    }
    results = sb.probe({**probes, "web": tcp(DOC4, 443, sb.tag("web"), POS),
                        "web6": tcp(DOC6, 443, sb.tag("web6"), POS)})
    assert_redirected(sb, results, "web", DOC4, 443)  # redirected at the gateway, not routed
    assert_redirected(sb, results, "web6", DOC6, 443)
    for key in ("icmp", "icmp6"):
        if results[key]["outcome"] == "permission":
            del probes[key]
    assert_dropped(results, probes)
    assert canary.matching(role="sink", peer=sb.sbx) == []
    assert canary.matching(role="sink", peer=sb.sbx6) == []
    assert outside_counts() == [0, 0]
    forward = sb.nft("list", "chain", "inet", sb.table, "forward").stdout
    dropped = [int(line.split("counter packets ")[1].split()[0])
               for line in forward.splitlines() if "iifname" in line and "counter" in line]
    assert dropped and dropped[0] >= len(probes), forward

    # The control: without the table, the gateway forwards the sandbox's packets.
    sb.nft("delete", "table", "inet", sb.table)
    leak = sb.probe({"raw_tcp": tcp(DOC4, 9999, sb.tag("leak"), POS)})
    assert leak["raw_tcp"] == {"outcome": "reply", "data": "SINK\n"}, leak
    assert canary.matching(role="sink", tag=sb.tag("leak"), peer=sb.sbx)
    assert outside_counts()[0] > 0


# --- the script itself -----------------------------------------------------------------------

def test_print_nft_shows_the_ruleset_and_changes_nothing():
    base = ["up", "pnt", "--gateway", "10.200.9.1/30", "--sandbox", "10.200.9.2",
            "--transparent-port", "3129", "--dns-port", "5353"]
    r = subprocess.run([SCRIPT, *base, "--print-nft"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    for line in ('iifname "slh-pnt" ip saddr != 10.200.9.2 counter drop',
                 'iifname "slh-pnt" meta nfproto ipv6 counter drop',
                 'iifname "slh-pnt" ip daddr 10.200.9.1 meta l4proto { tcp, udp } th dport 53 '
                 'counter redirect to :5353',
                 'iifname "slh-pnt" meta nfproto ipv4 tcp dport { 80, 443 } counter redirect to '
                 ':3129',
                 'iifname "slh-pnt" ct state established,related accept',
                 'iifname "slh-pnt" ip daddr 10.200.9.1 tcp dport 3129 ct status dnat accept',
                 'iifname "slh-pnt" counter drop',
                 'oifname "slh-pnt" counter drop',
                 "type nat hook prerouting priority dstnat; policy accept;",
                 "type filter hook forward priority filter; policy accept;"):
        assert line in text, line
    v6 = subprocess.run([SCRIPT, *base, "--gateway6", "fd00:200::1/64", "--sandbox6",
                         "fd00:200::2", "--print-nft"], capture_output=True, text=True)
    assert v6.returncode == 0, v6.stderr
    assert 'iifname "slh-pnt" tcp dport { 80, 443 } counter redirect to :3129' in v6.stdout
    assert 'ip6 saddr != { fd00:200::2, fe80::/10 } counter drop' in v6.stdout
    assert "meta nfproto ipv6 counter drop" not in v6.stdout
    if unavailable_reason() is None:  # nft's own check (-c) needs netlink, i.e. root
        for out in (text, v6.stdout):
            check = subprocess.run(["nft", "-c", "-f", "-"], input=out, capture_output=True,
                                   text=True)
            assert check.returncode == 0, check.stderr
        assert "sluice_pnt" not in sh("nft", "list", "tables").stdout


@pytest.mark.parametrize("args, message", [
    ([], "usage"),
    (["up"], "NAME missing"),
    (["up", "a/b"], "NAME 'a/b'"),
    (["up", "-x"], "NAME '-x'"),
    (["up", "ok"], "--gateway"),
    (["up", "ok", "--gateway", "10.200.0.1"], "--sandbox"),
    (["up", "ok", "--gateway", "10.200.0.1", "--sandbox", "10.200.0.2"], "prefix length"),
    (["up", "ok", "--gateway", "10.200.0.1/30", "--sandbox", "10.200.1.2"], "not inside"),
    (["up", "ok", "--gateway", "10.200.0.1/30", "--sandbox", "10.200.0.3"], "broadcast"),
    (["up", "ok", "--gateway", "10.200.0.256/30", "--sandbox", "10.200.0.2"],
     "not an IPv4 address"),
    (["up", "ok", "--gateway", "10.200.0.1/30", "--sandbox", "10.200.0.2", "--dns-port",
      "70000"], "--dns-port 70000"),
    (["up", "ok", "--gateway", "10.200.0.1/30", "--sandbox", "10.200.0.2", "--dns-port",
      "3129"], "must differ"),
    (["up", "ok", "--gateway", "10.200.0.1/30", "--sandbox", "10.200.0.2", "--tcp-ports",
      "80 x"], "'x' is not a port"),
    (["up", "ok", "--gateway", "10.200.0.1/30", "--sandbox", "10.200.0.2", "--gateway6",
      "fd00:200::1/64"], "go together"),
    (["up", "ok", "--gateway", "10.200.0.1/30", "--sandbox", "10.200.0.2", "--gateway6",
      "fd00:200::zz/64", "--sandbox6", "fd00:200::2"], "not an IPv6 address"),
    (["up", "ok", "--gateway", "10.200.0.1/30", "--sandbox", "10.200.0.2", "--bogus"],
     "unknown option"),
    (["up", "ok", "--gateway=10.200.0.1/30"], "write '--gateway 10.200.0.1/30'"),
    (["down", "ok", "extra"], "only NAME"),
    (["frobnicate", "ok"], "unknown command"),
])
def test_bad_usage_is_refused_with_a_message(args, message):
    r = subprocess.run([SCRIPT, *args], capture_output=True, text=True)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr


def test_script_is_shellcheck_clean():
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck is not installed (Debian: shellcheck; scripts/install-deps --test)")
    for shell in ("sh", "dash", "bash"):
        r = subprocess.run(["shellcheck", "--shell", shell, SCRIPT], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stdout
    r = subprocess.run(["sh", "-n", SCRIPT], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
