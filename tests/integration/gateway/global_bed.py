"""A bed with a globally routable origin, for what the loopback bed cannot show: report mode's
"forward anyway" (docs/policy.md#report-mode). Without a matching rule's `ips`, sluice dials
only globally reachable addresses (docs/policy.md#addresses), and every origin of the loopback bed
is on 127/8.

One network namespace the test creates ("slrpt" + random hex) holds everything:

  lo        up, with 127.0.0.1 and ORIGIN (11.22.33.44/32: a unicast address in no
            special-purpose range, so docs/policy.md#addresses counts it as globally reachable)
  ORIGIN    :443 (TLS) :80   nginx, mirror.rpt.test and [*.]stray.rpt.test (role "origin")
  127.0.0.1 :443 (TLS) :80   nginx, inner.rpt.test and loop.rpt.test with a certificate sluice
                             would accept, so a wrong dial completes and is logged (role
                             "internal", connection events in internal.err)
  127.0.0.1 :5353            dnsmasq, sluice's resolver: ZONE, NXDOMAIN for the rest
  127.0.0.1 :3128            sluice, one sandbox in report mode (explicit proxy)

The namespace has no interface but `lo` (checked when it is made) and no route but the
local ones, so nothing sent in it can leave it: "globally routable" is a property of the
address as sluice classifies it, not a path to anything outside. Clients (curl) and peers
run with `ip netns exec NAME`; readiness is read from /proc/PID/net/tcp of a process in the
namespace, so the checks make no connection. Every process is stopped by PID and the
namespace deleted afterwards, also when a test fails.
"""
import contextlib
from dataclasses import dataclass
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid

from audit import verify_chain
import clients
import dnswire
from gateway import remove_dir
import netns_bed
from netns_bed import in_netns
import netutil
from netutil import DIE_WITH_US, clean_env, read_text, stop_process, wait_until
import nginx_conf
from peers import BARRIER_PREFIX, NGINX, Nginx, dnsmasq_command
from pki import CA
from sluice_proc import Sluice, write_config

ORIGIN = "11.22.33.44"
LOOPBACK = "127.0.0.1"
DNS_PORT = 5353
PROXY_PORT = 3128
SANDBOX = "rpt"

MIRROR = "mirror.rpt.test"   # rule "mirror": GET/HEAD under /simple/, https only
STRAY = "stray.rpt.test"     # no rule names it; nor any name under it (dnsmasq answers all)
INNER = "inner.rpt.test"     # rule "inner": /simple/ only, `ips` opens 127.0.0.1
LOOP = "loop.rpt.test"       # no rule, resolves to 127.0.0.1

ZONE = {MIRROR: ORIGIN, INNER: LOOPBACK, LOOP: LOOPBACK}  # exactly these names
ZONE_TREES = {STRAY: ORIGIN}  # the name and every name under it

RULES = [
    {"name": "mirror", "hosts": [MIRROR], "methods": ["GET", "HEAD"], "paths": ["/simple/"]},
    {"name": "inner", "hosts": [INNER], "paths": ["/simple/"], "ips": [LOOPBACK + "/32"]},
]


def unavailable_reason():
    """Why a namespace cannot be made here, or None."""
    if not shutil.which("ip"):
        return "`ip` is missing (Debian: iproute2; scripts/install-deps --test)"
    probe = "slrpt%06x" % random.getrandbits(24)
    r = netns_bed.sh("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        return ("`ip netns add` is not permitted here (%s): the report-forwarding tests need "
                "root (CAP_NET_ADMIN, CAP_SYS_ADMIN)" % r.stderr.strip())
    netns_bed.sh("ip", "netns", "del", probe, check=False)
    return None


# --- the namespace ---------------------------------------------------------------------------

class Namespace:
    def __init__(self):
        self.name = "slrpt%08x" % random.getrandbits(32)
        self.prefix = ("ip", "netns", "exec", self.name)
        self.made = False

    def make(self):
        netns_bed.sh("ip", "netns", "add", self.name)
        self.made = True
        netns_bed.sh("ip", "-n", self.name, "link", "set", "lo", "up")
        netns_bed.sh("ip", "-n", self.name, "addr", "add", ORIGIN + "/32", "dev", "lo")
        links = [line.split(":")[1].strip() for line in
                 netns_bed.sh("ip", "-n", self.name, "-o", "link", "show").stdout.splitlines()]
        assert links == ["lo"], "the namespace must have no way out, it has %r" % links
        routes = netns_bed.sh("ip", "-n", self.name, "route", "show").stdout.strip()
        assert routes == "", "the namespace must have no route out, it has %r" % routes

    def holds(self, pid):
        """Is process `pid` in this namespace (not still on its way in)?"""
        try:
            return os.stat("/proc/%d/ns/net" % pid).st_ino == \
                os.stat("/run/netns/" + self.name).st_ino
        except FileNotFoundError:
            return False

    def tcp_listening(self, pid, addr, port):
        """Is addr:port in LISTEN state in this namespace, as process `pid` (in it) sees it?"""
        if not self.holds(pid):
            return False
        for line in read_text("/proc/%d/net/tcp" % pid).splitlines()[1:]:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A" and \
                    netutil._endpoint(fields[1]) == (addr, port):  # noqa: SLF001
                return True
        return False

    def popen(self, args, directory, env=None):
        """A long-lived process in the namespace; its PID is the program's own (setpriv and
        `ip netns exec` exec it)."""
        with open(os.path.join(directory, "stderr.log"), "ab") as err:
            return subprocess.Popen(DIE_WITH_US + [*self.prefix, *args], cwd=directory,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=err, env=env or clean_env())

    def connect(self, addr, port, timeout=10):
        """A TCP connection made in the namespace."""
        return in_netns(self.name, lambda: socket.create_connection((addr, port), timeout))

    def remove(self):
        if self.made and self.name in netns_bed.netns_names():
            netns_bed.sh("ip", "netns", "del", self.name, check=False)

    def leftovers(self):
        return ["netns " + self.name] if self.name in netns_bed.netns_names() else []


# --- certificates and content ----------------------------------------------------------------

class Files:
    """The test CA (sluice's upstream.ca_file), the origins' certificates, the document roots.
    Each body carries a token of this run, so a body that arrived is known to be nginx's."""

    def __init__(self, directory):
        self.token = uuid.uuid4().hex
        self.ca = CA(os.path.join(directory, "pki"), "sluice report bed test CA")
        self.certs = {MIRROR: self.ca.issue(MIRROR, MIRROR, dns=[MIRROR]),
                      STRAY: self.ca.issue(STRAY, STRAY, dns=[STRAY, "*." + STRAY])}
        self.internal_cert = self.ca.issue("internal", INNER, dns=[INNER, LOOP],
                                           ips=[LOOPBACK])
        self.www = os.path.join(directory, "www")
        self.bodies = {}
        for name in (MIRROR, STRAY):
            self._file(name, "/whoami.txt", "%s %s\n" % (name, self.token))
            self._file(name, "/simple/index.html", "<p>%s simple index %s</p>\n"
                       % (name, self.token))
            self._file(name, "/private/data.txt", "%s private data %s\n" % (name, self.token))
        for path in ("/whoami.txt", "/simple/index.html", "/private/data.txt"):
            self._file("internal", path, "INTERNAL %s %s\n" % (path, self.token))

    def _file(self, docroot, url_path, text):
        path = os.path.join(self.www, docroot, url_path.lstrip("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        self.bodies[(docroot, url_path)] = text.encode()

    def body(self, docroot, url_path):
        return self.bodies[(docroot, url_path)]


# --- peers -----------------------------------------------------------------------------------

def render_nginx(d, files):
    servers = []
    origin = ["%s:443 ssl" % ORIGIN, "%s:80" % ORIGIN]
    servers.append(nginx_conf._server(  # noqa: SLF001 (the bed's own helper)
        d, [MIRROR], [l + " default_server" for l in origin], files.certs[MIRROR],
        os.path.join(files.www, MIRROR), "origin"))
    servers.append(nginx_conf._server(  # noqa: SLF001
        d, [STRAY, "*." + STRAY], origin, files.certs[STRAY], os.path.join(files.www, STRAY),
        "origin"))
    internal = ["%s:443 ssl default_server" % LOOPBACK, "%s:80 default_server" % LOOPBACK]
    servers.append(nginx_conf._server(  # noqa: SLF001
        d, ["_"], internal, files.internal_cert, os.path.join(files.www, "internal"),
        "internal"))
    return nginx_conf.wrap(d, servers, os.geteuid() == 0)


class NsNginx(Nginx):
    """nginx in the namespace, with the bed's logs and oracles (peers.Nginx): roles "origin"
    and "internal"."""

    def __init__(self, ns, directory, files):  # noqa: super().__init__ writes another conf
        self.ns = ns
        self.dir = directory
        self.tls_port, self.plain_port = 443, 80
        os.makedirs(os.path.join(directory, "tmp"), exist_ok=True)
        self.conf = os.path.join(directory, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(render_nginx(directory, files))
        self.proc = None

    def start(self):
        self.proc = self.ns.popen([NGINX, "-p", self.dir, "-c", self.conf,
                                   "-e", os.path.join(self.dir, "error.log")], self.dir)

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError("nginx exited with %d:\n%s" % (self.proc.returncode,
                                                                  self.startup_errors()))
            return all(self.ns.tcp_listening(self.proc.pid, a, p)
                       for a in (ORIGIN, LOOPBACK) for p in (443, 80))
        try:
            wait_until(ready, 20, "nginx to listen in %s" % self.ns.name)
        except Exception:
            self.stop()
            raise

    def barrier(self):
        """Every request that reached nginx before this call is in its logs afterwards."""
        path = BARRIER_PREFIX + uuid.uuid4().hex
        with self.ns.connect(ORIGIN, 80) as s:
            s.sendall(b"GET %s HTTP/1.1\r\nHost: barrier.invalid\r\nConnection: close\r\n\r\n"
                      % path.encode())
            while s.recv(65536):
                pass
        wait_until(lambda: any(e["uri"] == path
                               for e in self.access("origin", include_barriers=True)),
                   20, "nginx barrier")

    def hits(self, role, fragment):
        """Requests of `role` whose URI holds `fragment` (after a barrier)."""
        self.barrier()
        return [e for e in self.access(role) if fragment in e["uri"]]


class NsDnsmasq:
    """dnsmasq in the namespace on 127.0.0.1:5353 (UDP and TCP), answering ZONE, NXDOMAIN for
    everything else, every query logged."""

    def __init__(self, ns, directory):
        self.ns = ns
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self.log = os.path.join(directory, "dnsmasq.log")
        self.proc = None

    def start(self):
        args = dnsmasq_command(LOOPBACK, DNS_PORT, self.dir, self.log)
        args += ["--host-record=%s,%s" % item for item in ZONE.items()]
        args += ["--address=/%s/%s" % item for item in ZONE_TREES.items()]
        self.proc = self.ns.popen(args, self.dir)

        def answers():
            if self.proc.poll() is not None:
                raise RuntimeError("dnsmasq exited: " +
                                   read_text(os.path.join(self.dir, "stderr.log")))
            if not self.ns.holds(self.proc.pid):
                return False
            try:
                return self.query(MIRROR, timeout=0.3).addresses == [ORIGIN]
            except OSError:
                return False
        try:
            wait_until(answers, 20, "dnsmasq to answer in %s" % self.ns.name)
        except Exception:
            self.stop()
            raise

    def query(self, name, qtype=dnswire.A, timeout=3.0):
        return in_netns(self.ns.name,
                        lambda: dnswire.query(LOOPBACK, DNS_PORT, name, qtype, timeout))

    def queried_names(self):
        """Every name dnsmasq was asked about, lower-cased, in order."""
        return [m.group(1).lower().rstrip(".") for m in
                re.finditer(r"query\[\S+\] (\S+) from", read_text(self.log))]

    def asked(self, name):
        """How often `name` was asked, once every query sent before this call is logged."""
        barrier = "barrier-%s.invalid" % uuid.uuid4().hex[:16]
        self.query(barrier)
        wait_until(lambda: barrier in self.queried_names(), 20, "dnsmasq log barrier")
        return self.queried_names().count(name)

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None


class NsSluice(Sluice):
    """sluice run inside the namespace (sluice_proc.Sluice's config, process and audit log;
    readiness read from the namespace)."""

    def __init__(self, binary, workdir, config, ns, env=None):
        super().__init__(binary, workdir, config, env=env)
        self.ns = ns

    def start(self, timeout=60):
        write_config(self.config, self.config_path)
        with open(os.path.join(self.workdir, "sluice.stdout"), "wb") as out, \
                open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                DIE_WITH_US + [*self.ns.prefix, self.binary, "run", "-c", self.config_path],
                cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                env=clean_env(**self.extra_env))

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError("sluice exited with %d before listening:\n%s"
                                   % (self.proc.returncode, self.stderr()))
            return all(self.ns.tcp_listening(self.proc.pid, *a) for a in self.listeners) and \
                all(os.path.exists(p) for p in self.ca_pems) and \
                netutil.signal_handled(self.proc.pid, signal.SIGTERM)
        wait_until(ready, timeout, "sluice to listen in %s" % self.ns.name)
        self.ready = True
        return self


def make_config(workdir, files, mode):
    return {
        "version": 1,
        "dns": {"servers": ["%s:%d" % (LOOPBACK, DNS_PORT)], "timeout": "1s", "max_ttl": "1s"},
        "upstream": {"ca_file": files.ca.cert, "connect_timeout": "3s"},
        "audit": {"path": os.path.join(workdir, "audit.jsonl"), "hash_bodies": True},
        "limits": {"max_header_bytes": "16KiB", "handshake_timeout": "5s",
                   "idle_timeout": "30s", "shutdown_grace": "2s"},
        "sandboxes": [{"name": SANDBOX, "listen": "%s:%d" % (LOOPBACK, PROXY_PORT),
                       "ca": os.path.join(workdir, "ca-" + SANDBOX), "policy": "trial",
                       "mode": mode}],
        "policies": {"trial": {"rules": RULES}},
    }


# --- the environment -------------------------------------------------------------------------

@dataclass
class Env:
    ns: Namespace
    files: Files
    nginx: NsNginx
    dns: NsDnsmasq
    sluice: NsSluice

    @property
    def audit(self):
        return self.sluice.audit

    def curl(self, url, *args, timeout=30):
        """curl in the namespace through sluice, trusting the sandbox CA."""
        return clients.curl(url, *args, proxy=self.sluice.proxy_url, cacert=self.sluice.ca_pem,
                            timeout=timeout, prefix=self.ns.prefix)

    def record_for(self, mark, marker):
        """The one audit record after `mark` whose url carries `marker`."""
        return self.audit.one(mark, lambda r: marker in (r["url"] or ""))


def marker():
    return uuid.uuid4().hex[:12]


@contextlib.contextmanager
def global_env(binary, mode="report"):
    """The namespace, nginx, dnsmasq and sluice (in that order); all stopped by PID and the
    namespace deleted afterwards, whatever happened, and checked gone. After sluice stopped,
    its exit status (0) and its whole audit log's hash chain are checked."""
    with contextlib.ExitStack() as stack:
        workdir = tempfile.mkdtemp(prefix="sluice-rpt-")
        stack.callback(remove_dir, workdir)
        ns = Namespace()

        def remove_ns():
            ns.remove()
            left = ns.leftovers()
            assert not left, "left behind: %s" % left
        stack.callback(remove_ns)  # runs last: every process in it is stopped by then
        ns.make()
        files = Files(workdir)
        nginx = NsNginx(ns, os.path.join(workdir, "nginx"), files)
        stack.callback(nginx.stop)
        nginx.start()
        dns = NsDnsmasq(ns, os.path.join(workdir, "dns"))
        stack.callback(dns.stop)
        dns.start()
        sluice = NsSluice(binary, workdir, make_config(workdir, files, mode), ns,
                          env={"SLUICE_LOG": "debug"})

        def stop_sluice():
            code = sluice.stop()
            if not sluice.ready:
                return
            assert code == 0, "sluice exited with %r on SIGTERM; stderr:\n%s" % (
                code, sluice.stderr()[-4000:])
            lines = sluice.audit.lines()
            assert verify_chain(lines) == 0, "the audit log's chain breaks at line %d" % \
                verify_chain(lines)
        stack.callback(stop_sluice)
        sluice.start()
        yield Env(ns, files, nginx, dns, sluice)


def sluice_log(env):
    """The end of sluice's stderr (SLUICE_LOG=debug), for assertion messages."""
    return env.sluice.stderr()[-4000:]
