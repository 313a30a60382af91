"""The soak's bed around one sluice: its sandboxes and policy, the plans its clients draw, the
abusive sandbox's process, what sluice holds (descriptors, memory, upstream sockets), and the
check that every answered request is on record.

Sandboxes: `load-1` and `load-2` (the mixed traffic with faults; both write the global audit
log, so two sandboxes on two workers share one hash chain), `calm` (the well-behaved client
whose latency is measured) and `abuser` (limited per sandbox), each with an audit file of its
own. Origins: the bed's nginx (allowed.test, 127.0.0.20) for normal traffic, the fault origin
(`*.soak.test`, FAULT_ADDRESS) for the rest; sluice's only resolver is the soak's (SoakResolver).
"""
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

from fault_origin import FaultOrigin
from netutil import clean_env, free_port, read_text
from sluice_proc import PROXY_ADDRESS
from soak_dns import SoakResolver
from soak_load import Plan, Proxy, Request, markers_of
from tlsraw import AT_CONNECT

FAULT_ADDRESS = "127.0.0.71"
RESOLVER_ADDRESS = "127.0.0.73"
LOADS, CALM, ABUSER = ("load-1", "load-2"), "calm", "abuser"
ABUSER_LIMITS = {"max_connections": 24, "requests_per_second": 20, "request_burst": 20}
IDLE_TIMEOUT_S = 3     # also how long pooled upstream connections stay (docs/wire.md#upstreams)
DNS_TIMEOUT_S = 2      # tries of 2/3 s and 4/3 s: the slow answer (1 s) comes in the second


# --- peers -----------------------------------------------------------------------------------

def fault_cert(bed):
    """A certificate for *.soak.test from the test CA (which sluice's upstream leg trusts),
    issued once per session."""
    if not hasattr(bed, "soak_cert"):
        bed.soak_cert = bed.pki.test_ca.issue("soak", "origin.soak.test", dns=["*.soak.test"])
    return bed.soak_cert


class Peers:
    """The fault origin and the soak's resolver; stop() stops both."""

    def __init__(self, bed):
        self.bed = bed
        self.origin = FaultOrigin(FAULT_ADDRESS, fault_cert(bed)).start()
        zone = {"allowed.test": "127.0.0.20", "origin.soak.test": FAULT_ADDRESS,
                "slow.soak.test": FAULT_ADDRESS}
        try:
            self.dns = SoakResolver(RESOLVER_ADDRESS, zone)
        except Exception:
            self.origin.stop()
            raise

    def stop(self):
        self.dns.stop()
        self.origin.stop()


# --- the config ------------------------------------------------------------------------------

def soak_rules(bed, origin):
    return [
        {"name": "nginx", "hosts": ["allowed.test"], "ports": [bed.tls_port],
         "ips": ["127.0.0.20/32"]},
        {"name": "nginx-plain", "hosts": ["allowed.test"], "schemes": ["http"],
         "ports": [bed.plain_port], "methods": ["GET", "HEAD"], "ips": ["127.0.0.20/32"]},
        {"name": "faults", "hosts": ["*.soak.test"], "ports": [origin.tls_port],
         "ips": [FAULT_ADDRESS + "/32"]},
        {"name": "faults-plain", "hosts": ["*.soak.test"], "schemes": ["http"],
         "ports": [origin.plain_port], "ips": [FAULT_ADDRESS + "/32"]},
    ]


def soak_edit(peers):
    """An `edit=` (for admin_client.with_admin) that makes the bed's config the soak's."""
    def edit(config, workdir, _admin_port):
        first = config["sandboxes"][0]
        taken = {int(first["listen"].rsplit(":", 1)[1])}
        sandboxes = []
        for name in LOADS + (CALM, ABUSER):
            if not sandboxes:
                listen = first["listen"]
            else:
                port = free_port((PROXY_ADDRESS,), avoid=taken)
                taken.add(port)
                listen = "%s:%d" % (PROXY_ADDRESS, port)
            sandbox = {"name": name, "listen": listen, "ca": os.path.join(workdir, "ca-" + name),
                       "policy": "soak", "mode": "enforce"}
            if name in (CALM, ABUSER):
                sandbox["audit"] = os.path.join(workdir, "audit-%s.jsonl" % name)
            if name == ABUSER:
                sandbox["limits"] = dict(ABUSER_LIMITS)
            sandboxes.append(sandbox)
        config["sandboxes"] = sandboxes
        config["dns"].update(servers=[peers.dns.server], timeout="%ds" % DNS_TIMEOUT_S)
        config["limits"]["idle_timeout"] = "%ds" % IDLE_TIMEOUT_S
        config["policies"] = {"soak": {"rules": soak_rules(peers.bed, peers.origin)}}
    return edit


def proxies(sluice):
    """{sandbox name: Proxy} of every sandbox of a running sluice."""
    out = {}
    for sandbox in sluice.config["sandboxes"]:
        view = sluice.sandbox_view(sandbox["name"])
        out[view.name] = Proxy(view.name, view.address, view.ca_pem)
    return out


def audit_paths(sluice):
    return sorted({s.get("audit", sluice.config["audit"]["path"])
                   for s in sluice.config["sandboxes"]})


# --- plans -----------------------------------------------------------------------------------

OK, DONE, CUT = frozenset({(200, True)}), True, False
FAULT_EXPECT = {
    "ok": OK, "chunked": OK, "close": OK, "drop": OK, "trickle": OK,
    # the origin resets after 8 KiB of 32: the head went on (body cut), or sluice saw the reset
    # before it forwarded the head (502)
    "reset": frozenset({(200, CUT), (502, DONE)}),
    "stall": frozenset({(504, DONE)}),          # no answer within idle_timeout
    "stallbody": frozenset({(200, CUT)}),       # cut when the body idles
}
FAULT_WEIGHTS = {"ok": 3, "chunked": 2, "close": 1, "drop": 3, "reset": 1, "stall": 1,
                 "stallbody": 1, "trickle": 1}
DNS_EXPECT = {"slow": OK, "servfail": frozenset({(502, DONE)}),
              "timeout": frozenset({(502, DONE)}), "nx": frozenset({(502, DONE)})}


def _denied(status):
    return frozenset({(status, DONE)})


class SoakPlans:
    """What a load sandbox's connection does, drawn by weight (`draw(rng)`)."""

    KINDS = {"nginx-tunnel": 22, "nginx-forward": 22, "fault-tunnel": 16, "fault-forward": 16,
             "dns-fault": 10, "denied": 14}

    def __init__(self, bed, origin):
        self.t, self.p = bed.tls_port, bed.plain_port
        self.ft, self.fp = origin.tls_port, origin.plain_port
        self._kinds = list(self.KINDS)
        self._kind_weights = list(self.KINDS.values())
        self._faults = list(FAULT_WEIGHTS)
        self._fault_weights = list(FAULT_WEIGHTS.values())

    def draw(self, rng):
        kind = rng.choices(self._kinds, self._kind_weights)[0]
        return getattr(self, kind.replace("-", "_"))(rng)

    def nginx_get(self, rng):
        path = rng.choice(["/whoami.txt", "/whoami.txt", "/small.bin"])
        return Request("GET", path + "?m={m}", expect=OK)

    def nginx_tunnel(self, rng):
        return Plan("nginx-tunnel", "tunnel", "allowed.test", self.t,
                    [self.nginx_get(rng) for _ in range(rng.randint(1, 4))])

    def nginx_forward(self, rng):
        return Plan("nginx-forward", "forward", "allowed.test", self.p,
                    [self.nginx_get(rng) for _ in range(rng.randint(1, 4))])

    def _fault_requests(self, rng):
        out = []
        for _ in range(rng.randint(1, 3)):
            b = rng.choices(self._faults, self._fault_weights)[0]
            out.append(Request("GET", "/%s/x?m={m}" % b, expect=FAULT_EXPECT[b], label=b))
        return out

    def fault_tunnel(self, rng):
        return Plan("fault-tunnel", "tunnel", "origin.soak.test", self.ft,
                    self._fault_requests(rng))

    def fault_forward(self, rng):
        return Plan("fault-forward", "forward", "origin.soak.test", self.fp,
                    self._fault_requests(rng))

    def dns_fault(self, rng):
        what = rng.choice(list(DNS_EXPECT))
        tunnel = rng.random() < 0.5
        req = Request("GET", "/close/x?m={m}", expect=DNS_EXPECT[what], label=what)
        return Plan("dns-fault", "tunnel" if tunnel else "forward", what + ".soak.test",
                    self.ft if tunnel else self.fp, [req])

    def denied(self, rng):
        which = rng.randrange(4)
        if which == 0:  # a name no rule matches: refused at the CONNECT (asked for: one
            # record per marker), never resolved. In band: test_refusals_in_band.py.
            return Plan("denied", "tunnel", "m{m}.denied.test", self.t, connect_marker=True,
                        connect_expect=frozenset({403}), connect_fields=AT_CONNECT)
        if which == 1:  # a method the plain rule does not allow
            return Plan("denied", "forward", "allowed.test", self.p,
                        [Request("DELETE", "/whoami.txt?m={m}", expect=_denied(403),
                                 label="method")])
        if which == 2:  # a port no rule of the name allows
            return Plan("denied", "forward", "allowed.test", self.fp,
                        [Request("GET", "/whoami.txt?m={m}", expect=_denied(403),
                                 label="port")])
        return Plan("denied", "tunnel", "allowed.test", self.t,  # another name in Host
                    [Request("GET", "/whoami.txt?m={m}", host="origin.soak.test",
                             expect=_denied(403), label="host")])


def calm_plan(bed):
    """The well-behaved client's connection: CONNECT, TLS, one GET, close."""
    return Plan("calm", "tunnel", "allowed.test", bed.tls_port,
                [Request("GET", "/whoami.txt?m={m}", expect=OK)])


# --- the abusive sandbox ---------------------------------------------------------------------

class AbuseProcess:
    """soak_abuse.py against the abuser's listener; stop() returns its JSON result."""

    def __init__(self, proxy, bed, floods=2, tricklers=2):
        with tempfile.NamedTemporaryFile(prefix="sluice-abuse-", suffix=".json",
                                         delete=False) as f:
            self.out_path = f.name
        config = {"proxy": list(proxy.address), "target": "allowed.test:%d" % bed.plain_port,
                  "max_connections": ABUSER_LIMITS["max_connections"], "floods": floods,
                  "tricklers": tricklers}
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "soak_abuse.py")
        self.proc = subprocess.Popen([sys.executable, script, json.dumps(config), self.out_path],
                                     stdin=subprocess.PIPE, env=clean_env(
                                         PYTHONDONTWRITEBYTECODE="1"))

    def stop(self):
        try:
            self.proc.stdin.close()
            code = self.proc.wait(timeout=90)
            assert code == 0, "the abuser process exited with %r" % code
            with open(self.out_path) as f:
                return json.load(f)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            os.unlink(self.out_path)


# --- what sluice holds -----------------------------------------------------------------------

def fd_count(pid, admin_address):
    """sluice's descriptors, less its connections on the admin endpoint: an admin exchange ends
    with sluice waiting for the client's close, so a scrape's own connection may linger there
    for a moment after the scrape."""
    admin = _hex_endpoint(*admin_address)
    inodes = _socket_inodes(pid)
    lingering = 0
    for line in read_text("/proc/net/tcp").splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[1] == admin and fields[3] != "0A" and fields[9] in inodes:
            lingering += 1
    return len(os.listdir("/proc/%d/fd" % pid)) - lingering


def fd_kinds(pid):
    """Descriptors by what they are (socket, anon_inode:[eventpoll], a file's path, ...)."""
    kinds = collections.Counter()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        kinds[re.sub(r"\[\d+\]$", "", target)] += 1
    return kinds


def rss_kib(pid, field="VmRSS"):
    for line in read_text("/proc/%d/status" % pid).splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError("no %s for pid %d" % (field, pid))


def _socket_inodes(pid):
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _hex_endpoint(address, port):
    return "%s:%04X" % ("".join("%02X" % int(b) for b in reversed(address.split("."))), port)


def upstream_sockets(pid, endpoints):
    """How many of sluice's TCP sockets are connected to one of `endpoints` ((ip, port)s):
    its upstream connections, pooled or in use."""
    wanted = {_hex_endpoint(*e) for e in endpoints}
    inodes = _socket_inodes(pid)
    count = 0
    for line in read_text("/proc/net/tcp").splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[2] in wanted and fields[9] in inodes:
            count += 1
    return count


def origin_endpoints(bed, origin):
    return [("127.0.0.20", bed.tls_port), ("127.0.0.20", bed.plain_port),
            (FAULT_ADDRESS, origin.tls_port), (FAULT_ADDRESS, origin.plain_port)]


def wait_quiet(sluice, admin, endpoints, timeout=30):
    """Until sluice has no client connection (sluice_connections_active is 0 for every
    sandbox) and no upstream connection, pooled or not (they expire after idle_timeout)."""
    def quiet(scrape):
        active = {k: v for k, v in scrape.series("sluice_connections_active").items() if v}
        if active:
            return "connections still active: %r" % active
        held = upstream_sockets(sluice.proc.pid, endpoints)
        return "%d upstream connections still open" % held if held else None
    admin.wait_for(quiet, "sluice to hold no connection", timeout=timeout)


# --- the audit log against what the clients saw ----------------------------------------------

def records_by_marker(records):
    out = collections.defaultdict(list)
    for rec in records:
        for m in set(markers_of(rec)):
            out[m].append(rec)
    return out


def unrecorded(outcomes, by_marker):
    """Problems with answered requests: no record, more than one, or a record whose status
    is not the one the client received. A 503 too_many_connections is sent at accept, before
    any request is read, so it carries no marker: those are counted (connection_refusals)."""
    problems = []
    for out in outcomes:
        if out.status is None or out.reason == "too_many_connections":
            continue
        recs = by_marker.get(out.marker, [])
        if len(recs) != 1:
            problems.append("%s %s %s (status %s): %d records%s" % (
                out.sandbox, out.kind, out.marker, out.status, len(recs),
                "" if not recs else ": " + json.dumps(recs)[:600]))
        elif recs[0]["status"] != out.status:
            problems.append("%s %s %s: the client got %s, the record says %s: %s" % (
                out.sandbox, out.kind, out.marker, out.status, recs[0]["status"],
                json.dumps(recs[0])[:600]))
    return problems


def connection_refusals(outcomes):
    return sum(1 for o in outcomes if o.reason == "too_many_connections")


def unexpected(outcomes, by_marker):
    """Outcomes that the plan said cannot happen (an nginx GET that did not end in a whole
    200, a stall not answered 504, ...): (outcome, its records) each."""
    return [(o, by_marker.get(o.marker, [])) for o in outcomes
            if o.expect and (o.status, o.complete) not in o.expect]


def describe(outcome, recs):
    o = outcome
    return "%s %s %s: status %s %s, complete %s, error %s, after %.2fs; records: %s" % (
        o.sandbox, o.kind, o.marker, o.status, o.reason, o.complete, o.error, o.seconds,
        json.dumps(recs)[:700])


