"""docs/threat-model.md on the explicit proxy, the resolution side: D2 (no fallback on failure), D3
and I3-I6 (answers in non-public ranges), D4 (one resolution per decision, only validated
addresses dialled), D6 (the resolver reads no host file, alias file, search list or
localhost shortcut), D7 (every denied shape leaves dnsmasq's log untouched), D10 (answers are
taken only from the configured server).

Points 5 and 7 of docs/wire.md#the-invariant, docs/policy.md#addresses and
docs/wire.md#upstreams."""
import ipaddress
import json
import os
import select
import socket
import struct
import subprocess
import tempfile
import threading

import pytest

import clients
import expect
from http1 import request_bytes
from gateway import Gateway, Runner, remove_dir
from netutil import clean_env
from oracles import Canaries, DnsMark, get, marker
from sluice_proc import bed_rules, make_config, write_config


def rand():
    return marker()


def same_ip(a, b):
    return ipaddress.ip_address(a) == ipaddress.ip_address(b)


def rec_addrs(rec):
    """The addresses of a record's `addrs` (entries may carry a port)."""
    out = []
    for a in rec["addrs"] or []:
        text = a.rsplit(":", 1)[0].strip("[]") if a.count(":") == 1 or a.startswith("[") else a
        out.append(ipaddress.ip_address(text))
    return out


# --- D3, I3-I6: answers that may not be dialled ----------------------------------------------

# *.wild.test opens only 127.0.0.20 with `ips`; *.pub.test has no `ips`, so the table of
# docs/policy.md#addresses alone must refuse each of these answers.
INTERNAL_ANSWERS = [
    "zero.wild.test", "mapped.wild.test", "nat64.wild.test",
    "zero.pub.test", "cgnat.pub.test", "ula.pub.test", "mapped.pub.test", "compat.pub.test",
    "nat64.pub.test", "nat64local.pub.test", "sixtofour.pub.test", "teredo.pub.test",
    "ietf.pub.test", "bench.pub.test", "doc.pub.test", "doc2.pub.test", "doc3.pub.test",
    "reserved.pub.test", "bcast.pub.test", "mcast.pub.test", "loop6.pub.test", "ll6.pub.test",
    "sitelocal.pub.test", "mcast6.pub.test", "discard6.pub.test", "doc6.pub.test",
    "self.pub.test",
]


@pytest.mark.parametrize("name", INTERNAL_ANSWERS)
def test_allowed_name_with_non_public_answer_is_ip_denied(gw, bed, name):
    """Edge case (D3/I3-I6): an allowed name whose only answer (A or AAAA) is unspecified,
    CGNAT, ULA, mapped/compatible IPv4, NAT64, 6to4, Teredo, IETF, benchmarking,
    documentation, reserved, broadcast, multicast, link-local, site-local, discard, or
    sluice's own address: 403 ip_denied, nothing dialled, the answer is in `addrs`."""
    canaries, mark = Canaries(bed), gw.audit.mark()
    ex = gw.tunnel(name, [get("/whoami.txt", host=name)])
    expect.denial(ex, 403, "ip_denied")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="ip_denied", status=403, upstream=None)
    want = [ipaddress.ip_address(a) for a in bed.dns.ZONE[name]]
    assert sorted(rec_addrs(rec), key=str) == sorted(want, key=str), rec
    canaries.assert_untouched()
    # What was refused, and why, is on record and in the answer the client got
    # (docs/audit.md#the-fields, docs/wire.md#denials): the address, its class, the reason.
    denied = rec["denied_addrs"]
    assert sorted(ipaddress.ip_address(d["ip"]) for d in denied) == sorted(want), rec
    # (self.pub.test is sluice's listen address, but not on the port asked: loopback.)
    expected_why = "outside_rule_ips" if ".wild." in name else "not_global"
    assert {d["refused"] for d in denied} == {expected_why}, rec
    body = ex.final.body.decode("latin-1")
    first = denied[0]
    assert "%s (%s," % (first["ip"], first["class"]) in body, body
    if expected_why == "not_global":
        assert first["class"] not in ("global", ""), rec


def test_mixed_v4_v6_answer_dials_only_the_address_inside_ips(gw, bed):
    """Edge case (D3/D5): mixed6.wild.test answers A 127.0.0.20 and AAAA ::1; only the first is
    inside the rule's `ips`, so it is the one dialled, whatever the order of the answers."""
    canaries, mark = Canaries(bed), gw.audit.mark()
    for _ in range(3):
        ex = gw.tunnel("mixed6.wild.test", [get("/whoami.txt", "mixed6.wild.test",
                                                keep_alive=False)])
        assert ex.final.status == 200, ex.final
    recs = gw.audit.wait(mark, lambda r: r["url"] and "mixed6" in r["url"], count=3)
    assert all(r["upstream"] == "127.0.0.20:%d" % gw.t for r in recs), recs
    canaries.assert_untouched()


# --- D4: one resolution per decision, only validated addresses dialled ------------------------

def test_mixed_answer_20_connections_dial_only_validated_address(gw, bed):
    """Edge case (D4; dnsmasq cannot rotate answers, so the rebinding shape is a fixed mixed
    answer 127.0.0.20 + 127.0.0.1 with TTL 0 and max_ttl 1s): 20 connections, each request
    dials 127.0.0.20 only; the internal canary sees nothing."""
    canaries, mark = Canaries(bed), gw.audit.mark()
    clients_seen = []
    for i in range(20):
        ex = gw.tunnel("mixed.wild.test", [get("/whoami.txt?i=%d" % i, "mixed.wild.test",
                                               keep_alive=False)])
        assert (ex.final.status, ex.final.body) == (200, b"mixed.wild.test\n"), i
        clients_seen.append(ex.client)
    recs = gw.audit.wait(mark, lambda r: r["client"] in clients_seen, count=20)
    for rec in recs:
        expect.record(rec, decision="allow", status=200, upstream="127.0.0.20:%d" % gw.t)
        for a in rec_addrs(rec):
            assert a in (ipaddress.ip_address("127.0.0.20"), ipaddress.ip_address("127.0.0.1"))
    canaries.assert_untouched()


def test_mixed_answer_keepalive_stays_on_validated_address(gw, bed):
    """Edge case (D4): 20 requests on one keep-alive tunnel: all reach 127.0.0.20 (nginx logs
    the server address), none the internal canary."""
    canaries, m = Canaries(bed), marker()
    n = 20
    reqs = [get("/whoami.txt?ka=%s&i=%d" % (m, i), "mixed.wild.test", keep_alive=(i < n - 1))
            for i in range(n)]
    ex = gw.tunnel("mixed.wild.test", reqs)
    assert [r.status for r in ex.responses] == [200] * n
    entries = bed.nginx.wait_access("cdn", lambda e: "ka=" + m in e["uri"], count=n)
    assert {e["server_addr"] for e in entries} == {"127.0.0.20"}
    canaries.assert_untouched()


# --- D2: resolution failure is a denial, with no fallback -------------------------------------

def test_nxdomain_with_forged_client_mapping_is_dns_failed(gw, bed):
    """Edge case (D2): the sandbox maps an allowed wildcard name that does not exist to the
    attacker (curl --resolve; through a proxy curl still sends CONNECT by name): 502
    dns_failed, nothing reaches the attacker, dnsmasq was asked exactly that name."""
    name = "nxd-%s.wild.test" % rand()
    canaries, dns, mark = Canaries(bed), DnsMark(bed), gw.audit.mark()
    url = gw.url(name, "/whoami.txt")
    r = gw.curl(url, "--resolve", "%s:%d:127.0.0.66" % (name, gw.t))
    assert (r.http_code, r.sluice_reason) == (502, "dns_failed"), (r.http_code, r.stderr)
    assert expect.proxy_status_error(r.final.proxy_status) in expect.PROXY_STATUS["dns_failed"]
    rec = gw.audit.one(mark, lambda rec: name in (rec["url"] or ""))
    expect.record(rec, decision="deny", reason="dns_failed", status=502, upstream=None)
    assert dns.asked(name), "the allowed name was not resolved through dnsmasq"
    canaries.assert_untouched()


# --- D6: no host file, no alias file, no search list, no localhost shortcut -------------------

def d6_rules(bed):
    t = bed.tls_port
    return [{"name": "single", "hosts": ["localhost", "x.localhost", "loop", "aliasme"],
             "ports": [t], "ips": ["127.0.0.0/8"]},
            {"name": "hostsonly", "hosts": ["hostsonly.wild.test"], "ports": [t],
             "ips": ["127.0.0.0/8"]}] + bed_rules(bed.tls_port, bed.plain_port)


def resolver_env(directory):
    """Everything c-ares (or a libc resolver) reads from the environment or disk by default:
    a hosts file (CARES_HOSTS), an alias file (HOSTALIASES), a search list (LOCALDOMAIN) and
    options (RES_OPTIONS), each pointing names at the internal canary."""
    hosts = os.path.join(directory, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 allowed.test hostsonly.wild.test loop aliasme\n")
    aliases = os.path.join(directory, "hostaliases")
    with open(aliases, "w") as f:
        f.write("aliasme loop.wild.test\nloop loop.wild.test\n")
    return {"CARES_HOSTS": hosts, "HOSTALIASES": aliases, "LOCALDOMAIN": "wild.test",
            "RES_OPTIONS": "ndots:5 rotate", "RESOLV_HOST_CONF": os.devnull}


@pytest.fixture(scope="module")
def d6_gw(sluice_binary, bed):
    directory = tempfile.mkdtemp(prefix="sluice-d6-")
    runner = Runner(sluice_binary, bed)
    try:
        yield Gateway(runner.start(rules=d6_rules(bed), env=resolver_env(directory)), bed)
    finally:
        runner.stop_all()
        remove_dir(directory)


@pytest.mark.parametrize("name", ["localhost", "x.localhost"])
def test_localhost_is_asked_of_dnsmasq_not_answered_locally(d6_gw, bed, name):
    """Edge case (D6): `localhost` (127.0.0.1 in this machine's /etc/hosts, and special in
    RFC 6761) under a rule whose `ips` cover 127/8: sluice asks dnsmasq, which says NXDOMAIN:
    502 dns_failed; nothing reaches the internal canary."""
    g = d6_gw
    canaries, dns, mark = Canaries(bed), DnsMark(bed), g.audit.mark()
    ex = g.tunnel(name, [get("/whoami.txt", host=name)])
    expect.denial(ex, 502, "dns_failed")
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="dns_failed", status=502, upstream=None)
    assert dns.asked(name), "sluice did not ask dnsmasq about %s" % name
    canaries.assert_untouched()


def test_hosts_file_from_environment_is_ignored_for_allowed_name(d6_gw, bed):
    """Edge case (D6a): with CARES_HOSTS mapping allowed.test to 127.0.0.1, allowed.test still
    reaches 127.0.0.20 (dnsmasq's answer)."""
    g = d6_gw
    canaries, mark = Canaries(bed), g.audit.mark()
    ex = g.tunnel("allowed.test", [get("/whoami.txt", keep_alive=False)])
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.upstream_is(rec, "127.0.0.20", g.t)
    canaries.assert_untouched()


def test_name_only_in_hosts_file_is_dns_failed(d6_gw, bed):
    """Edge case (D6a): hostsonly.wild.test exists only in the CARES_HOSTS file: 502
    dns_failed, not a dial to 127.0.0.1."""
    g = d6_gw
    canaries = Canaries(bed)
    ex = g.tunnel("hostsonly.wild.test", [get("/whoami.txt", host="hostsonly.wild.test")])
    expect.denial(ex, 502, "dns_failed")
    canaries.assert_untouched()


@pytest.mark.parametrize("name", ["loop", "aliasme"])
def test_single_label_is_not_expanded_by_search_list_or_aliases(d6_gw, bed, name):
    """Edge case (D6c): with LOCALDOMAIN=wild.test, RES_OPTIONS ndots:5 and a HOSTALIASES file
    mapping the name to loop.wild.test (-> 127.0.0.1, inside this rule's `ips`), sluice asks
    dnsmasq for exactly the single label, never loop.wild.test: 502 dns_failed."""
    g = d6_gw
    canaries, dns, mark = Canaries(bed), DnsMark(bed), g.audit.mark()
    ex = g.tunnel(name, [get("/whoami.txt", host=name)])
    expect.denial(ex, 502, "dns_failed")
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="dns_failed", upstream=None)
    names = dns.names()
    assert name in names, names
    assert not [n for n in names if n.startswith(name + ".") or n == "loop.wild.test"], names
    canaries.assert_untouched()


def test_wildcard_over_localhost_is_a_config_error(sluice_binary, bed, scratch):
    """Edge case (D6b): `*.localhost` in a policy is refused at load (a wildcard over a whole
    top-level domain), so no request can ever rely on it."""
    config = make_config(bed, scratch, 3128, rules=[
        {"name": "lh", "hosts": ["*.localhost"], "ports": [bed.tls_port]}])
    path = write_config(config, os.path.join(scratch, "lh.yaml"))
    r = subprocess.run([sluice_binary, "check", "-c", path], capture_output=True, text=True,
                       timeout=30, env=clean_env())
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "*.localhost" in r.stdout + r.stderr


# --- D7: no denied shape asks DNS ----------------------------------------------------------------

def test_bad_host_names_are_never_resolved(gw, bed):
    """Edge case (D7): names sluice refuses as bad_host (an underscore, an empty label) under
    an allowed wildcard: 403, and dnsmasq hears nothing about them."""
    r = rand()
    dns = DnsMark(bed)
    for name in ("exfil_%s.wild.test" % r, "exfil-%s..wild.test" % r, "exfil-%s.wild.test.." % r):
        ex = clients.tunnel(gw.sluice.address, "%s:%d" % (name, gw.t), [get("/", host=name)],
                            sni="allowed.test", cafile=gw.sluice.ca_pem)
        assert ex.denied_at_connect, name
        expect.denial(ex, 403, "bad_host")
    assert dns.asked_containing(r) == []


def test_not_allowed_scheme_name_is_never_resolved(gw, bed):
    """Edge case (D7): http://exfil-<r>.wild.test:P/ (the wildcard rule is https-only): 403
    not_allowed_scheme, no query."""
    r = rand()
    dns = DnsMark(bed)
    authority = "exfil-%s.wild.test:%d" % (r, gw.p)
    ex = gw.forward([request_bytes("GET", "http://%s/" % authority, authority)])
    expect.denial(ex, 403, "not_allowed_scheme")
    assert dns.asked_containing(r) == []


@pytest.fixture(scope="module")
def narrow_gw(sluice_binary, bed):
    """*.wild.test with GET only and paths /ok/ only."""
    runner = Runner(sluice_binary, bed)
    rules = [{"name": "narrow", "hosts": ["*.wild.test"], "ports": [bed.tls_port],
              "methods": ["GET"], "paths": ["/ok/"], "ips": ["127.0.0.20/32"]}]
    try:
        yield Gateway(runner.start(rules=rules), bed)
    finally:
        runner.stop_all()


@pytest.mark.parametrize("method,path,reason", [
    ("POST", "/ok/x", "not_allowed_method"), ("GET", "/nope", "not_allowed_path")])
def test_not_allowed_method_or_path_name_is_never_resolved(narrow_gw, bed, method, path,
                                                           reason):
    """Edge case (D7, docs/wire.md#the-invariant point 7, "a name that fails 1 to 4"): the tunnel to
    exfil-<r>.wild.test is allowed (host and port match), but the request inside fails the rule's
    method or path: 403 with that reason, and the name never reaches DNS."""
    g = narrow_gw
    r = rand()
    name = "exfil-%s.wild.test" % r
    dns, mark = DnsMark(bed), g.audit.mark()
    ex = g.tunnel(name, [request_bytes(method, path, name, body=b"x" if method == "POST"
                                       else b"")])
    assert ex.connect.status == 200
    expect.denial(ex, 403, reason)
    rec = g.audit.one(mark, lambda rec: rec["client"] == ex.client)
    expect.record(rec, decision="deny", reason=reason, upstream=None, addrs=[])
    assert dns.asked_containing(r) == []


def test_absolute_form_authority_in_tunnel_is_never_resolved(gw, bed):
    """Edge case (D7/S5): inside an allowed tunnel, GET https://exfil-<r>.wild.test:T/ with
    Host allowed.test: 403 host_mismatch, no query for the URI's name."""
    r = rand()
    dns = DnsMark(bed)
    target = "https://exfil-%s.wild.test:%d/" % (r, gw.t)
    ex = gw.tunnel("allowed.test", [get(target, host="allowed.test")])
    expect.denial(ex, 403, "host_mismatch")
    assert dns.asked_containing(r) == []


def test_forward_host_mismatch_name_is_never_resolved(gw, bed):
    """Edge case (D7/S6): GET http://allowed.test:P/ with Host: exfil-<r>.wild.test."""
    r = rand()
    dns = DnsMark(bed)
    ex = gw.forward([request_bytes("GET", gw.url("allowed.test", "/", "http"),
                                   "exfil-%s.wild.test" % r)])
    expect.denial(ex, 403, "host_mismatch")
    assert dns.asked_containing(r) == []


def test_duplicate_host_name_is_never_resolved(gw, bed):
    """Edge case (D7): a second Host header naming exfil-<r>.wild.test: host_duplicate."""
    r = rand()
    dns = DnsMark(bed)
    ex = gw.tunnel("allowed.test", [request_bytes("GET", "/", "allowed.test",
                                                  headers=[("Host", "exfil-%s.wild.test" % r)])])
    expect.denial(ex, 403, "host_duplicate")
    assert dns.asked_containing(r) == []


# --- D10: answers only from the configured server -------------------------------------------

A, AAAA = 1, 28


def parse_query(packet):
    """(id, question bytes, qtype) of a DNS query."""
    pos = 12
    while packet[pos] != 0:
        pos += 1 + packet[pos]
    end = pos + 5
    qtype = struct.unpack("!H", packet[pos + 1:pos + 3])[0]
    return packet[:2], packet[12:end], qtype


def answer_packet(query, address):
    """A response to `query` answering A `address` (or nothing for another type)."""
    qid, question, qtype = parse_query(query)
    answers = b""
    count = 0
    if qtype == A and address:
        answers = b"\xc0\x0c" + struct.pack("!HHIH", A, 1, 1, 4) + socket.inet_aton(address)
        count = 1
    return qid + struct.pack("!HHHHH", 0x8180, 1, count, 0, 0) + question + answers


class Resolver:
    """The configured server of a sluice under test, on 127.0.0.54:<port>: `mode` "answer"
    replies to each query itself with `address`; "spoof" never replies itself, but for each
    query sends the reply (right ID, right question) from two other sources: another address
    with the same port, and the same address with another port."""

    def __init__(self, mode, address):
        self.mode = mode
        self.address = address
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.54", 0))
        self.port = self.sock.getsockname()[1]
        self.other_addr = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.other_addr.bind(("127.0.0.55", self.port))
        self.other_port = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.other_port.bind(("127.0.0.54", 0))
        self.queries = []
        self.spoofed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            ready, _, _ = select.select([self.sock], [], [], 0.05)
            if not ready:
                continue
            packet, source = self.sock.recvfrom(4096)
            self.queries.append((packet, source))
            reply = answer_packet(packet, self.address)
            if self.mode == "answer":
                self.sock.sendto(reply, source)
            else:
                for _ in range(3):
                    self.other_addr.sendto(reply, source)
                    self.other_port.sendto(reply, source)
                    self.spoofed += 2

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=5)
        for s in (self.sock, self.other_addr, self.other_port):
            s.close()


@pytest.fixture
def fake_resolver():
    made = []

    def make(mode, address):
        r = Resolver(mode, address)
        made.append(r)
        return r
    yield make
    for r in made:
        r.stop()


def d10_rules(bed):
    # ips over all of 127/8: an accepted forged answer (127.0.0.1) would be dialled
    return [{"name": "d10", "hosts": ["a.wild.test"], "ports": [bed.tls_port],
             "ips": ["127.0.0.0/8"]}]


def test_control_answer_from_the_configured_server_is_used(make_gw, bed, fake_resolver):
    """The premise of the spoofing test: the same reply packets, sent from the configured
    server's own address and port, are accepted (a.wild.test -> 127.0.0.20: 200)."""
    res = fake_resolver("answer", "127.0.0.20")
    g = make_gw(rules=d10_rules(bed), dns_servers=["127.0.0.54:%d" % res.port])
    ex = g.tunnel("a.wild.test", [get("/whoami.txt", "a.wild.test", keep_alive=False)])
    assert (ex.final.status, ex.final.body) == (200, b"a.wild.test\n")
    assert res.queries


def test_spoofed_answers_from_other_sources_are_ignored(make_gw, bed, fake_resolver):
    """Edge case (D10): the configured server never answers; for every query, replies with the
    right ID and question (a.wild.test -> 127.0.0.1, inside the rule's `ips`) come from
    127.0.0.55 (same port) and from 127.0.0.54 (another port). sluice must ignore them:
    502 dns_failed after its timeout, and nothing reaches the internal canary."""
    res = fake_resolver("spoof", "127.0.0.1")
    g = make_gw(rules=d10_rules(bed), dns_servers=["127.0.0.54:%d" % res.port])
    canaries, mark = Canaries(bed), g.audit.mark()
    ex = g.tunnel("a.wild.test", [get("/whoami.txt", "a.wild.test")])
    assert res.queries and res.spoofed, "the fake resolver saw no query"
    expect.denial(ex, 502, "dns_failed", token_key="dns_timeout")
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="dns_failed", upstream=None)
    canaries.assert_untouched()


def test_nxdomain_over_plain_http_is_dns_failed(make_gw, bed):
    """Edge case (D2, plain HTTP): a wildcard http rule, a name dnsmasq does not know: 502
    dns_failed, nothing dialled (the attacker and internal canaries see nothing)."""
    g = make_gw(rules=[{"name": "wild-http", "hosts": ["*.wild.test"], "schemes": ["http"],
                        "ports": [bed.plain_port], "ips": ["127.0.0.0/8"]}])
    name = "nxd-%s.wild.test" % rand()
    canaries, dns, mark = Canaries(bed), DnsMark(bed), g.audit.mark()
    authority = "%s:%d" % (name, g.p)
    ex = g.forward([request_bytes("GET", "http://%s/" % authority, authority)])
    expect.denial(ex, 502, "dns_failed")
    expect.closed(ex)
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="forward", decision="deny", reason="dns_failed", status=502,
                  upstream=None)
    assert dns.asked(name)
    canaries.assert_untouched()


# --- D9: exfiltration through an allowed wildcard (residual risk) ----------------------------

def test_wildcard_labels_are_policy_compliant_and_resolved(gw, bed):
    """Edge case (D9, a documented residual risk, not a bypass): data in the labels of an
    allowed wildcard (*.wild.test matches one or more labels) is a policy-compliant name; it
    is resolved through the configured resolver (here: NXDOMAIN, 502 dns_failed) and audited
    under the wildcard rule."""
    chunk = "onxw2zjaonswg4tfoq" + rand()
    name = "%s.deep.wild.test" % chunk
    dns, mark = DnsMark(bed), gw.audit.mark()
    ex = gw.tunnel(name, [get("/", host=name)])
    assert ex.connect.status == 200
    expect.denial(ex, 502, "dns_failed")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, rule="wild", reason="dns_failed")
    assert dns.asked(name)


@pytest.mark.parametrize("pattern", ["*.com", "*.github.io", "*.s3.amazonaws.com", "*.co.uk"])
def test_wildcard_over_tenant_suffix_is_a_config_error(sluice_binary, bed, scratch, pattern):
    """Edge case (D9 mitigation, docs/policy.md#host-patterns): a wildcard over a single label or a
    public/multi-tenant suffix is refused at load (exit 2, the pattern named)."""
    config = make_config(bed, scratch, 3128, rules=[
        {"name": "broad", "hosts": [pattern], "ports": [bed.tls_port]}])
    path = write_config(config, os.path.join(scratch, "broad.yaml"))
    r = subprocess.run([sluice_binary, "check", "-c", path], capture_output=True, text=True,
                       timeout=30, env=clean_env())
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert pattern in r.stdout + r.stderr


def test_ipv6_wide_ips_do_not_open_mapped_ipv4(make_gw, bed):
    """Edge case (I4, docs/policy.md#what-ips-covers: an IPv6 entry wider than /96 (`::/0`) covers
    no IPv4 address, mapped or not): with `ips: ["::/0"]`, the AAAA answer ::ffff:127.0.0.1 is
    403 ip_denied, and the internal canary sees nothing."""
    name = "mapped.wild.test"
    g = make_gw(rules=[{"name": "v6-all", "hosts": [name], "ports": [bed.tls_port],
                        "ips": ["::/0"]}])
    canaries, mark = Canaries(bed), g.audit.mark()
    ex = g.tunnel(name, [get("/whoami.txt", host=name)])
    expect.denial(ex, 403, "ip_denied")
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="ip_denied", upstream=None)
    canaries.assert_untouched()


# The other encodings of IPv4 in IPv6 (docs/policy.md#ipv4-carried-in-ipv6: judged by the IPv4
# address; their forms of any denied IPv4 address are denied unless `ips` explicitly covers the
# address). These are asked of `sluice explain --ip` (docs/cli.md#sluice-explain) and not dialled: a
# sluice that wrongly accepted one would send a SYN off the loopback network (these addresses route
# via the default route).
EMBEDDED_V4 = {
    "compatible_loopback": "::7f00:1",
    "nat64_loopback": "64:ff9b::7f00:1",
    "nat64_metadata": "64:ff9b::a9fe:a9fe",
    "nat64_rfc1918": "64:ff9b::a00:1",
    "sixtofour_loopback": "2002:7f00:1::",
    "sixtofour_metadata": "2002:a9fe:a9fe::",
    "mapped_metadata": "::ffff:169.254.169.254",
}


def explain(binary, config_path, url, ip):
    r = subprocess.run([binary, "explain", "-c", config_path, "--sandbox", "sbx1", "--url", url,
                        "--ip", ip], capture_output=True, text=True, timeout=30, env=clean_env())
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None), r.stderr


WIDE_V6 = [("::/0", case) for case in sorted(EMBEDDED_V4)] + \
    [("2000::/3", case) for case in sorted(EMBEDDED_V4) if case.startswith("sixtofour")]


@pytest.mark.parametrize("ips,case", WIDE_V6, ids=["%s-%s" % p for p in WIDE_V6])
def test_ipv6_wide_ips_do_not_open_embedded_ipv4(sluice_binary, bed, scratch, ips, case):
    """Edge case (I4/I5, D3 with an attacker's AAAA answer): a rule `*.wild.test` with
    `ips: ["::/0"]` (any IPv6) or `["2000::/3"]` (global unicast, which holds 2002::/16) must
    not make a NAT64, 6to4 or IPv4-compatible encoding of loopback, link-local (metadata) or
    RFC 1918 dialable: on a NAT64 network 64:ff9b::a9fe:a9fe *is* 169.254.169.254.
    explain: exit 1, deny, ip_denied, the address not usable."""
    config = make_config(bed, scratch, 3128, rules=[
        {"name": "v6-wide", "hosts": ["*.wild.test"], "ports": [bed.tls_port],
         "ips": [ips]}])
    path = write_config(config, os.path.join(scratch, "v6.yaml"))
    ip = EMBEDDED_V4[case]
    code, verdict, err = explain(sluice_binary, path, "https://a.wild.test:%d/" % bed.tls_port, ip)
    assert verdict is not None, err
    assert (code, verdict["decision"], verdict["reason"]) == (1, "deny", "ip_denied"), verdict
    assert [a["usable"] for a in verdict["addresses"]] == [False], verdict
