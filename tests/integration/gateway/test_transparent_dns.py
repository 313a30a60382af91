"""Transparent mode: the sandbox's resolver, sluice's `dns_listen`
(docs/wire.md#the-sandboxs-resolver, point 7 of #the-invariant; D7, D8, L5).

The sandbox's /etc/resolv.conf (written by the script) names the gateway; the script brings
UDP and TCP 53 to the gateway to sluice's `dns_listen`. sluice answers A for a name a rule of
the policy matches with the gateway address, AAAA likewise (empty here: this sandbox has no
IPv6 gateway address), every other type of an allowed name with NOERROR and no records, and
every other name with NXDOMAIN. It never forwards a query: dnsmasq, sluice's own upstream
resolver, must not see any of these names, so DNS carries no data out.

Refused names leave DNS records in the audit log (docs/audit.md#dns-records), never request
records: test_refused_names_are_on_record.
Needs root (namespaces, nftables); skips with the reason otherwise.
"""
import base64
import os
import socket
import struct

import pytest

from audit import check_dns_shape
from dnswire import A, AAAA, ANY, HTTPS, NULL, TXT
from netns_bed import in_netns
from netutil import wait_until
from transparent_bed import SANDBOX, transparent_env

MX = 15


@pytest.fixture(scope="module")
def env(bed, sluice_binary):
    with transparent_env(bed, sluice_binary) as e:
        yield e


def secret_name(marker, zone="attacker.test"):
    label = base64.b32encode(b"secret=" + marker.encode()).decode().rstrip("=").lower()
    return "%s.%s" % (label, zone)


# --- D7/D8: names the policy does not allow --------------------------------------------------

@pytest.mark.parametrize("qtype", [A, AAAA, TXT, ANY, NULL, HTTPS, MX],
                         ids=["A", "AAAA", "TXT", "ANY", "NULL", "HTTPS", "MX"])
@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_exfiltration_names_get_nxdomain_and_are_never_forwarded(env, qtype, tcp):
    m = env.mark()
    name = secret_name(m.marker)
    answer = env.query(name, qtype, tcp=tcp)
    assert (answer.rcode, answer.types) == ("NXDOMAIN", []), answer
    assert m.dns.asked_containing(m.marker) == [], "sluice's resolver forwarded the query"


def test_names_the_policy_does_not_allow_get_nxdomain(env):
    """Names dnsmasq would answer (attacker.test, other.test share the CDN), the bare suffix of
    a wildcard (`*.wild.test` never matches wild.test itself), a label-boundary trick, an IP
    literal, a malformed name."""
    m = env.mark()
    for name in ("attacker.test", "other.test", "evil.test", "wild.test",
                 "xwild.test", "allowed.test.attacker.test", "10.0.0.1", "in_valid.wild.test"):
        for qtype in (A, AAAA):
            answer = env.query(name, qtype)
            assert (answer.rcode, answer.addresses) == ("NXDOMAIN", []), (name, answer)
    assert m.dns.names() == [], "sluice's resolver forwarded: %r" % m.dns.names()


# --- allowed names ---------------------------------------------------------------------------

@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_an_allowed_name_resolves_to_the_gateway(env, tcp):
    m = env.mark()
    wild = "%s.wild.test" % m.marker
    for name in ("allowed.test", "ALLOWED.test.", wild, "a.b.%s" % wild):
        answer = env.query(name, A, tcp=tcp)
        assert (answer.rcode, answer.addresses, answer.types) == ("NOERROR", [env.gw], [A]), \
            (name, answer)
        assert answer.authoritative, (name, answer)
    assert m.dns.names() == [], "sluice's resolver forwarded: %r" % m.dns.names()


def test_aaaa_of_an_allowed_name_is_empty_without_an_ipv6_gateway(env):
    """No `dns_listen` or `transparent` address of the IPv6 family: nothing to answer."""
    m = env.mark()
    answer = env.query("allowed.test", AAAA)
    assert (answer.rcode, answer.types) == ("NOERROR", []), answer
    assert m.dns.names() == []


@pytest.mark.parametrize("qtype", [TXT, ANY, NULL, HTTPS, MX],
                         ids=["TXT", "ANY", "NULL", "HTTPS", "MX"])
def test_other_types_of_an_allowed_name_are_nodata(env, qtype):
    """NOERROR with no records: no TXT to carry data, no HTTPS/SVCB to carry ECH configs."""
    m = env.mark()
    answer = env.query("allowed.test", qtype)
    assert (answer.rcode, answer.types) == ("NOERROR", []), answer
    answer = env.query("%s.wild.test" % m.marker, qtype, tcp=True)
    assert (answer.rcode, answer.types) == ("NOERROR", []), answer
    assert m.dns.names() == []


def test_the_sandbox_libc_resolves_through_sluice(env):
    """What programs in the sandbox see (the script's resolv.conf, glibc): allowed.test is the
    gateway; a name not allowed does not exist."""
    m = env.mark()
    r = env.run("getent", "ahostsv4", "allowed.test")
    assert r.returncode == 0 and {line.split()[0] for line in r.stdout.splitlines()} == \
        {env.gw}, r
    r = env.run("getent", "hosts", "allowed.test")
    assert r.returncode == 0 and r.stdout.split()[0] == env.gw, r
    code = ("import socket; print(sorted({a[4][0] for a in socket.getaddrinfo("
            "'allowed.test', 443, type=socket.SOCK_STREAM)}))")
    r = env.run("/usr/bin/python3", "-c", code)
    assert r.returncode == 0 and r.stdout.strip() == repr([env.gw]), r
    name = secret_name(m.marker)
    r = env.run("getent", "hosts", name)
    assert r.returncode == 2 and r.stdout == "", r
    r = env.run("/usr/bin/python3", "-c",
                "import socket\ntry:\n socket.getaddrinfo(%r, 443)\nexcept socket.gaierror "
                "as e:\n print('gaierror', e.errno)" % name)
    assert r.stdout.strip() == "gaierror %d" % socket.EAI_NONAME, r
    assert m.dns.asked_containing(m.marker) == [] and not m.dns.asked("allowed.test")


def test_dns_to_the_resolver_port_itself_is_dropped(env):
    """Only port 53 on the gateway is redirected to `dns_listen`; its real port is not open
    to the sandbox (the script's input chain)."""
    if env.dport == 53:
        pytest.skip("dns_listen is on port 53 in this environment")
    results = env.probe({
        "udp": dict(kind="dns_udp", host=env.gw, port=env.dport, qname="allowed.test",
                    timeout=1.5),
        "tcp": dict(kind="dns_tcp", host=env.gw, port=env.dport, qname="allowed.test",
                    timeout=1.5),
        "ok": dict(kind="dns_udp", host=env.gw, port=53, qname="allowed.test", timeout=5),
    })
    assert results["ok"] == {"outcome": "reply", "rcode": 0, "addresses": [env.gw]}, results
    assert results["udp"]["outcome"] == "timeout" and results["tcp"]["outcome"] == "timeout", \
        results


def test_refused_names_are_on_record(env):
    """docs/audit.md#dns-records: the names the sandbox's resolver refused are in the sandbox's
    audit log, one record per distinct (name, qtype, answer) per interval with the number of
    queries it stands for; the answered names of an enforce-mode sandbox are not (the connections
    they lead to are). No DNS query is a request record."""
    m = env.mark()
    name = secret_name(m.marker)
    for qtype in (A, AAAA, TXT):
        env.query("allowed.test", qtype)
    for _ in range(3):
        assert env.query(name, A).rcode == "NXDOMAIN"
    assert env.query(name, TXT, tcp=True).rcode == "NXDOMAIN"
    before, barrier = env.audit_barrier(m)
    assert before == [], "DNS queries left request records: %r" % before
    assert barrier["decision"] == "allow"
    # Written when the interval (10 s) ends.
    wait_until(lambda: [r for r in env.audit.dns_records(m.audit)
                        if r["name"] == name and r["qtype"] == "TXT"], 25, "the DNS records")
    records = env.audit.dns_records(m.audit)
    mine = sorted((r["qtype"], r["answer"], r["count"]) for r in records if r["name"] == name)
    assert mine == [("A", "nxdomain", 3), ("TXT", "nxdomain", 1)], records
    assert not [r for r in records if r["name"] == "allowed.test"], records
    for r in records:
        check_dns_shape(r)
        assert r["sandbox"] == SANDBOX, r
        assert r["client"].rsplit(":", 1)[0].strip("[]") in (env.sbx, env.sbx6), r


def test_malformed_and_odd_queries_get_no_data_out(env):
    """A query of class CHAOS (version.bind) is REFUSED; garbage gets FORMERR or nothing; the
    resolver stays up."""
    def raw(packet):
        def send():
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.settimeout(2)
                s.sendto(packet, (env.gw, 53))
                try:
                    return s.recv(4096)
                except (socket.timeout, TimeoutError):
                    return None
        return in_netns(env.name, send)

    qid = int.from_bytes(os.urandom(2), "big")
    chaos = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + b"\x07version\x04bind\x00" + \
        struct.pack("!HH", TXT, 3)
    reply = raw(chaos)
    assert reply is not None and reply[:2] == chaos[:2] and reply[3] & 0xF == 5, reply
    assert struct.unpack("!H", reply[6:8])[0] == 0  # no answer records
    garbage = raw(b"\x12\x34" + b"\xff" * 30)
    assert garbage is None or garbage[3] & 0xF in (1, 4), garbage  # FORMERR / NOTIMP
    answer = env.query("allowed.test", A)
    assert answer.addresses == [env.gw], answer
