"""The bed of the transparent-mode tests (test_transparent_*.py, docs/wire.md#transparent-mode,
#the-sandboxs-resolver, docs/audit.md).

One module, one environment (`transparent_env`): a sandbox namespace made by
examples/sandbox-netns.sh (so the script is part of what is tested), sluice on the gateway
side with `transparent` and `dns_listen` bound to the gateway address (started after `up`:
the address must exist), and peers of its own. In transparent mode sluice dials H on the port
the sandbox dialled, so the origins listen on 443 and 80, on loopback addresses of their own:

  127.0.K.30  :443 :80   nginx "CDN": allowed.test, other.test, evil.test, a.wild.test,
                         mixed.wild.test;
                         certificates from the test CA chosen by SNI, content by Host (role cdn)
  127.0.K.33  :random    dnsmasq, sluice's upstream resolver: ZONE below, every query logged
  127.0.K.36  :443 :80   nginx "attacker": allowed.test and attacker.test, from the attacker's
                         CA (role attacker; connection events in attacker.err)
  127.0.K.39  :443 :80   nginx "internal" canary with a certificate sluice would accept
                         (role internal; connection events in internal.err)

K is the first of 0..63 whose ports are free (another run of these tests may hold 0).
Certificates and document roots are the session bed's (`bed.pki`, `bed.content`).

The sandbox runs its clients with `ip netns exec NAME` and no proxy settings (curl, pip,
getent), or, for crafted bytes, sockets made in the namespace by a thread that joined it
(`netns_bed.in_netns`) and then driven from the test with tlsraw/http1.

Addresses a sandbox can dial: 127/8 is the sandbox's own loopback inside its namespace (a
connection to 127.0.K.36 from the sandbox never leaves it), so a forged destination is a
documentation address, 203.0.113.66, which the script's redirect brings to sluice like any
other. To see a sluice that dials the original destination anyway, a table of ours counts
(and drops) every packet the gateway itself sends to the documentation ranges
(`Guard.leaks`): sluice's replies to redirected connections leave with the sandbox's address
as destination, so that count is 0 unless sluice dialled such an address.
"""
import contextlib
from dataclasses import dataclass
import os
import re
import socket
import subprocess
import tempfile
import types
import uuid

import pytest

import clients
import content
import dnswire
from audit import AuditLog, check_dns_shape, verify_chain
from gateway import remove_dir
from http1 import HttpReader, request_bytes
import netns_bed
from netns_bed import in_netns
import netutil
from netutil import DIE_WITH_US, clean_env, free_port, wait_port, wait_until
import nginx_conf
from oracles import Canaries, DnsMark
from peers import BARRIER_PREFIX, Dnsmasq, Nginx
from sluice_proc import Sluice
from tlsraw import HandshakeFailed, PlainStream, TLSStream

SANDBOX = "tsbx"
DOC4 = "203.0.113.66"        # "the attacker's address" the sandbox dials (never on this host)
DOC4_DNS = "203.0.113.53"    # an outside resolver the sandbox tries
DOC6 = "2001:db8::66"
PLAIN = object()             # exchange(): no TLS, plain HTTP


# --- addresses, zone, policy -----------------------------------------------------------------

@dataclass
class Addrs:
    cdn: str
    dns: str
    attacker: str
    internal: str


def _candidates():
    for k in range(64):
        yield Addrs(*("127.0.%d.%d" % (k, last) for last in (30, 33, 36, 39)))


def _bindable(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as nginx does
        s.bind((addr, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def zone(a):
    """sluice's upstream DNS. Names not listed are NXDOMAIN (nxd-*.wild.test, D2)."""
    return {
        "allowed.test": [a.cdn], "other.test": [a.cdn], "evil.test": [a.cdn],
        "a.wild.test": [a.cdn],
        # an allowed name with a second answer in a documentation range: the sandbox may dial
        # it (require_match: "among sluice's own answers"), sluice never uses it (`ips`)
        "mixed.wild.test": [a.cdn, "198.51.100.30"],
        "attacker.test": [a.attacker],
        "loop.wild.test": ["127.0.0.1"],
        # under a rule without `ips`: docs/policy.md#addresses alone must refuse these (D3)
        "internal.pub.test": [a.internal], "loop.pub.test": ["127.0.0.1"],
        "meta.pub.test": ["169.254.169.254"], "priv.pub.test": ["10.0.0.1"],
        "cdn.pub.test": [a.cdn],
    }


def rules(a):
    """The sandbox's policy: each origin opened with `ips`, as a user opens a private mirror.
    Default ports: https 443, http 80, which is what the sandbox dials."""
    return [
        {"name": "cdn", "hosts": ["allowed.test"], "schemes": ["https", "http"],
         "ips": [a.cdn + "/32"]},
        {"name": "wild", "hosts": ["*.wild.test"], "ips": [a.cdn + "/32"]},
        {"name": "pub", "hosts": ["*.pub.test"]},
    ]


# --- peers -----------------------------------------------------------------------------------

def render_nginx(d, www, pki, a):
    _server = nginx_conf._server  # noqa: SLF001 (the bed's own helper)
    servers = []
    cdn = ["%s:443 ssl" % a.cdn, "%s:80" % a.cdn]
    servers.append(_server(d, ["_"], [l + " default_server" for l in cdn],
                           pki.cdn["allowed.test"], "%s/allowed.test" % www, "cdn"))
    for name in ("allowed.test", "other.test", "evil.test", "a.wild.test", "mixed.wild.test"):
        servers.append(_server(d, [name], cdn, pki.cdn[name], "%s/%s" % (www, name), "cdn"))
    atk = ["%s:443 ssl" % a.attacker, "%s:80" % a.attacker]
    servers.append(_server(d, ["allowed.test"], [l + " default_server" for l in atk],
                           pki.attacker["allowed.test"], "%s/attacker" % www, "attacker"))
    servers.append(_server(d, ["attacker.test"], atk, pki.attacker["attacker.test"],
                           "%s/attacker" % www, "attacker"))
    internal = ["%s:443 ssl default_server" % a.internal, "%s:80 default_server" % a.internal]
    servers.append(_server(d, ["_"], internal, pki.internal, "%s/internal" % www, "internal"))
    return nginx_conf.wrap(d, servers, os.geteuid() == 0)


class TNginx(Nginx):
    """The transparent bed's nginx: the same logs and oracles as the bed's (peers.Nginx), on
    ports 443 and 80 of its own addresses."""

    def __init__(self, directory, www, pki, addrs):  # noqa: super().__init__ writes another conf
        self.dir = directory
        self.addrs = addrs
        self.tls_port, self.plain_port = 443, 80
        os.makedirs(os.path.join(directory, "tmp"), exist_ok=True)
        self.conf = os.path.join(directory, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(render_nginx(directory, www, pki, addrs))
        self.proc = None

    def start(self):
        args = ["/usr/sbin/nginx", "-p", self.dir, "-c", self.conf,
                "-e", os.path.join(self.dir, "error.log")]
        with open(os.path.join(self.dir, "stderr.log"), "wb") as err:
            self.proc = subprocess.Popen(DIE_WITH_US + args, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err, env=clean_env())
        try:
            for addr in (self.addrs.cdn, self.addrs.attacker, self.addrs.internal):
                for port in (443, 80):
                    wait_port(addr, port, timeout=20, proc=self.proc, what="nginx")
        except Exception:
            self.stop()
            raise RuntimeError("nginx did not start:\n" + self.startup_errors())

    def barrier(self):
        path = BARRIER_PREFIX + uuid.uuid4().hex
        with socket.create_connection((self.addrs.cdn, 80), timeout=10) as s:
            s.sendall(b"GET %s HTTP/1.1\r\nHost: barrier.invalid\r\nConnection: close\r\n\r\n"
                      % path.encode())
            while s.recv(65536):
                pass
        wait_until(lambda: any(e["uri"] == path
                               for e in self.access("cdn", include_barriers=True)),
                   20, "nginx barrier")


class TDnsmasq(Dnsmasq):
    def __init__(self, directory, port, address, zone_):
        super().__init__(directory, port)
        self.ADDRESS = address
        self.ZONE = zone_


def _start_peers(workdir, bed, stack):
    last = None
    for attempt, addrs in enumerate(a for a in _candidates()
                                    if all(_bindable(x, p) for x in (a.cdn, a.attacker,
                                                                     a.internal)
                                           for p in (443, 80))):
        if attempt == 3:
            break
        nginx = TNginx(os.path.join(workdir, "nginx-%d" % attempt), bed.content.root, bed.pki,
                       addrs)
        try:
            nginx.start()
        except RuntimeError as e:  # taken between the check and nginx's bind: the next K
            last = e
            continue
        stack.callback(nginx.stop)
        for _ in range(3):
            dns = TDnsmasq(os.path.join(workdir, "dns"),
                           free_port((addrs.dns,), kind=socket.SOCK_DGRAM), addrs.dns,
                           zone(addrs))
            try:
                dns.start()
                stack.callback(dns.stop)
                return addrs, nginx, dns
            except (RuntimeError, TimeoutError) as e:
                dns.stop()
                last = e
        raise last
    raise RuntimeError("no free loopback addresses with ports 443 and 80 for the transparent "
                       "bed's origins: %s" % last)


# --- the sandbox and the guard ---------------------------------------------------------------

class SluiceSandbox(netns_bed.Sandbox):
    """A namespace wired by the script for a real sluice: no stand-ins, just the port numbers
    sluice will listen on (chosen before `up`, which takes them as arguments)."""

    def listen(self):
        self.tport = free_port(("127.0.0.1",))
        if self._want_dns_port:
            self.dport = self._want_dns_port
        else:
            while True:
                port = free_port(("127.0.0.1",), kind=socket.SOCK_DGRAM, avoid={self.tport})
                if netutil._bindable("127.0.0.1", port, socket.SOCK_STREAM):  # noqa: SLF001
                    self.dport = port
                    break
        self.service_port = free_port(("127.0.0.1",), avoid={self.tport, self.dport})


class Guard:
    """nft table sluicetest_NAME: counts and drops what the gateway itself sends to the
    documentation ranges, i.e. a sluice dialling the sandbox's original destination."""

    def __init__(self, name):
        self.table = "sluicetest_" + name

    def load(self):
        ruleset = ("table inet %s {\n"
                   " chain out {\n"
                   "  type filter hook output priority filter; policy accept;\n"
                   "  ip daddr { 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24 } counter drop\n"
                   "  ip6 daddr 2001:db8::/32 counter drop\n"
                   " }\n}\n" % self.table)
        subprocess.run(["nft", "-f", "-"], input=ruleset, text=True, check=True,
                       capture_output=True)

    def leaks(self):
        out = netns_bed.sh("nft", "list", "table", "inet", self.table).stdout
        return sum(int(m) for m in re.findall(r"counter packets (\d+)", out))

    def remove(self):
        netns_bed.sh("nft", "delete", "table", "inet", self.table, check=False)


# --- exchanges from inside -------------------------------------------------------------------

class _Bytes:
    def __init__(self, data):
        self.data = data

    def recv(self, n=65536):
        data, self.data = self.data, b""
        return data


def parse_response(data):
    """The HTTP response at the start of `data`, or None if it is not one."""
    if not data.startswith(b"HTTP/1."):
        return None
    try:
        return HttpReader(_Bytes(data)).read_response()
    except Exception:  # a cut or odd answer: the caller looks at the bytes
        return None


# Source ports for the sandbox's own test connections: a run of ports below the kernel's
# ephemeral range (32768-60999, which curl and pip in the sandbox draw from), each used once. A
# port used again within conntrack's TIME_WAIT memory (two minutes) toward another original
# destination would clash, after the redirect, with the old connection's tuple to sluice's
# transparent port, and the NAT would pick another source port: sluice would then rightly
# record a client port the test's socket never had.
_source_ports = iter(range(10000 + os.getpid() % 10000, 32768))


def _bind_fresh(sock, family):
    for port in _source_ports:
        try:
            sock.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", port))
            return
        except OSError:
            continue  # in use in this namespace: the next one
    raise AssertionError("the bed ran out of fresh source ports")


def exchange(sock, requests=(), sni=PLAIN, cafile=None, raw=None, pipeline=False,
             close_timeout=10, hello_chunks=None):
    """On a connection the sandbox opened: `raw` bytes (then read until close), or TLS with
    `sni` (None: no server_name) or plain HTTP (PLAIN), then `requests`."""
    ex = clients.Exchange()
    local = sock.getsockname()
    ex.client = ("[%s]:%d" if ":" in local[0] else "%s:%d") % local[:2]  # as docs/audit.md has it
    if raw is not None:
        sock.sendall(raw)
        ex.tail, ex.close_how = HttpReader(PlainStream(sock)).read_to_close(close_timeout)
        sock.close()
        return ex
    if sni is PLAIN:
        stream = PlainStream(sock)
    else:
        try:
            stream = TLSStream(sock, sni, cafile, hello_chunks=hello_chunks)
        except HandshakeFailed as e:
            ex.tls_error = e
            ex.tail, ex.close_how = HttpReader(PlainStream(sock)).read_to_close(close_timeout)
            sock.close()
            return ex
        ex.peer_names = stream.peer_dns_names() if cafile else []
        ex.alpn = stream.alpn()
    reader = HttpReader(stream)
    clients._read_all(reader, list(requests), ex, pipeline)  # noqa: SLF001
    clients._finish(reader, ex, close_timeout)  # noqa: SLF001
    return ex


@dataclass
class Marks:
    audit: int
    dns: DnsMark
    canaries: Canaries
    stderr: int
    marker: str
    leaks: int   # the guard's count: compare with Guard.leaks() afterwards


class Env:
    """One sandbox namespace with a running sluice, as the tests see it."""

    def __init__(self, bed, addrs, nginx, dns, sandbox, guard, sluice):
        self.bed, self.addrs, self.nginx, self.dns = bed, addrs, nginx, dns
        self.sandbox, self.guard, self.sluice = sandbox, guard, sluice
        self.name = sandbox.name
        self.gw, self.sbx, self.gw6, self.sbx6 = sandbox.gw, sandbox.sbx, sandbox.gw6, sandbox.sbx6
        self.tport, self.dport = sandbox.tport, sandbox.dport
        self.ca_pem = sluice.ca_pem
        self.audit = sluice.audit
        self.prefix = ("ip", "netns", "exec", self.name)
        self._peers = types.SimpleNamespace(nginx=nginx, dns=dns)

    # clients in the sandbox

    def curl(self, url, *args, timeout=30, via=()):
        """curl inside the sandbox, no proxy, trusting the sandbox CA. `via`: a command between
        `ip netns exec` and curl (a private /etc/hosts, say)."""
        return clients.curl(url, *args, cacert=self.ca_pem, timeout=timeout,
                            prefix=self.prefix + tuple(via))

    def pip(self, dest, package=content.PKG):
        return clients.pip_download("https://allowed.test/simple/", package, dest, self.ca_pem,
                                    prefix=self.prefix)

    def run(self, *cmd, timeout=60):
        return subprocess.run([*self.prefix, *cmd], capture_output=True, text=True,
                              timeout=timeout, env=clean_env())

    def connect(self, host, port, timeout=10):
        """A TCP connection opened from inside the sandbox, from a source port this bed has not
        used before (_fresh_source_port): the record's `client` is then exactly the socket's."""
        def make():
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            s = socket.socket(family, socket.SOCK_STREAM)
            try:
                s.settimeout(timeout)
                _bind_fresh(s, family)
                s.connect((host, port))
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            except BaseException:
                s.close()
                raise
        return in_netns(self.name, make)

    def exchange(self, host, port, requests=(), sni=PLAIN, **kw):
        if sni is not PLAIN:
            kw.setdefault("cafile", self.ca_pem)
        return exchange(self.connect(host, port), requests, sni=sni, **kw)

    def query(self, name, qtype=dnswire.A, tcp=False, server=None, port=53, timeout=3.0):
        """A query from inside the sandbox, to its resolver (the gateway, port 53) unless told."""
        return in_netns(self.name, lambda: dnswire.query(server or self.gw, port, name, qtype,
                                                         timeout, tcp=tcp))

    def probe(self, spec, timeout=30):
        return self.sandbox.probe(spec, timeout)

    # oracles

    def mark(self):
        return Marks(self.audit.mark(), DnsMark(self._peers), Canaries(self._peers),
                     len(self.sluice.stderr()), uuid.uuid4().hex[:12], self.guard.leaks())

    def assert_nothing_dialled_outside(self, marks):
        """No packet from the gateway to a documentation address (the sandbox's forged or
        original destinations) since `marks`."""
        assert self.guard.leaks() == marks.leaks, \
            "the gateway sent packets to a documentation address (a dial of orig_dst?)"

    def cdn_hits(self, fragment):
        """CDN requests whose URI holds `fragment` (after a barrier)."""
        self.nginx.barrier()
        return [e for e in self.nginx.access("cdn") if fragment in e["uri"]]

    def accepted_since(self, marks):
        """Clients sluice accepted a connection from since `marks` (its debug log)."""
        text = self.sluice.stderr()[marks.stderr:]
        return re.findall(r"\] accepted from (\S+) for sandbox", text)

    def audit_barrier(self, marks):
        """Waits until a plain-HTTP request made now is on record, and returns the records
        written since `marks` before it: sluice writes records in order, so these are all that
        the attempts before it left."""
        path = "/whoami.txt?barrier=%s" % uuid.uuid4().hex[:12]
        ex = self.exchange(self.gw, 80, [get(path)])
        assert ex.final is not None and ex.final.status == 200, \
            "audit barrier: %r %r" % (ex.final, ex.error)
        records = self.audit.wait(marks.audit, lambda r: path in (r["url"] or ""))
        since = self.audit.since(marks.audit)
        position = [i for i, r in enumerate(since) if path in (r["url"] or "")][0]
        assert position == len(since) - 1, "records after the barrier: %r" % since[position:]
        return since[:position], records[0]

    def sluice_log(self, marks=None):
        return self.sluice.stderr()[marks.stderr if marks else 0:]


def get(path, host="allowed.test", headers=()):
    """One request that asks the server to close after answering."""
    return request_bytes("GET", path, host, headers=headers, keep_alive=False)


def check_record(env, rec, orig_dst, decision, reason, sni, host, status, **more):
    """A transparent record (docs/audit.md): this sandbox, from the sandbox's address, mode
    transparent, orig_dst what the sandbox dialled; `host` is checked with or without a port
    (... : not checked, for any field). A set means "one of"."""
    want = dict(sandbox=SANDBOX, mode="transparent", orig_dst=orig_dst, decision=decision,
                reason=reason, sni=sni, status=status)
    want.update(more)
    for key, value in want.items():
        if value is Ellipsis:
            continue
        if isinstance(value, (set, frozenset)):
            assert rec.get(key) in value, "%s=%r, expected one of %r in %r" % (
                key, rec.get(key), value, rec)
        else:
            assert rec.get(key) == value, "%s=%r, expected %r in %r" % (key, rec.get(key),
                                                                        value, rec)
    assert rec["client"].startswith(env.sbx + ":") or \
        (env.sbx6 and rec["client"].startswith("[%s]:" % env.sbx6)), rec
    port = int(orig_dst.rsplit(":", 1)[1])
    if host is Ellipsis:  # not checked
        pass
    elif host is None:
        assert rec["host"] is None, rec
    else:
        assert rec["host"] in (host, "%s:%d" % (host, port)), rec


# --- the environment -------------------------------------------------------------------------

def _sandbox_config(env_sandbox, workdir, original_dst, mode, explicit_port, transparent_host):
    s = {"name": SANDBOX}
    if explicit_port:
        s["listen"] = "%s:%d" % (env_sandbox.gw, explicit_port)
    s["transparent"] = "%s:%d" % (transparent_host or env_sandbox.gw, env_sandbox.tport)
    s["dns_listen"] = "%s:%d" % (env_sandbox.gw, env_sandbox.dport)
    s["ca"] = os.path.join(workdir, "ca-" + SANDBOX)
    s["policy"] = "transparent"
    s["mode"] = mode
    s["original_dst"] = original_dst
    return s


def make_config(bed, workdir, addrs, dns, sandbox, original_dst, mode, explicit_port,
                transparent_host=None):
    return {
        "version": 1,
        "dns": {"servers": ["%s:%d" % (dns.ADDRESS, dns.port)], "timeout": "1s",
                "max_ttl": "1s"},
        "upstream": {"ca_file": bed.pki.test_ca.cert, "connect_timeout": "3s"},
        "audit": {"path": os.path.join(workdir, "audit.jsonl"), "hash_bodies": True},
        "limits": {"max_header_bytes": "16KiB", "handshake_timeout": "5s",
                   "idle_timeout": "30s", "shutdown_grace": "2s"},
        "sandboxes": [_sandbox_config(sandbox, workdir, original_dst, mode, explicit_port,
                                      transparent_host)],
        "policies": {"transparent": {"rules": rules(addrs)}},
    }


@contextlib.contextmanager
def transparent_env(bed, binary, original_dst="ignore", mode="enforce", v6=False,
                    dns_port=None, explicit=False, transparent_host=None):
    """Peers, a sandbox made by the script, the guard table, then sluice; all removed again
    (sluice stopped by PID and checked to exit 0, `down`, then by hand whatever `down` left,
    and a check that nothing of the sandbox is left). Skips where namespaces cannot be made."""
    reason = netns_bed.unavailable_reason()
    if reason:
        pytest.skip(reason)
    etc_netns_existed = os.path.isdir("/etc/netns")
    with contextlib.ExitStack() as stack:
        workdir = tempfile.mkdtemp(prefix="sluice-tp-")
        stack.callback(remove_dir, workdir)
        if not etc_netns_existed:
            stack.callback(lambda: os.path.isdir("/etc/netns") and not os.listdir("/etc/netns")
                           and os.rmdir("/etc/netns"))
        addrs, nginx, dns = _start_peers(workdir, bed, stack)

        sandbox = SluiceSandbox(v6=v6, dns_port=dns_port)

        def remove_sandbox():
            sandbox.cleanup()
            left = sandbox.leftovers()
            assert not left, "left behind: %s" % left
        stack.callback(remove_sandbox)
        sandbox.up()
        guard = Guard(sandbox.name)
        stack.callback(guard.remove)
        guard.load()

        explicit_port = sandbox.service_port if explicit else None
        config = make_config(bed, workdir, addrs, dns, sandbox, original_dst, mode,
                             explicit_port, transparent_host)
        sluice = Sluice(binary, workdir, config, env={"SLUICE_LOG": "debug"})
        # the sandbox's own address, IPv4 as a.b.c.d, IPv6 in brackets (never a mapped form)
        clients_re = re.escape(sandbox.sbx) + (
            "|\\[%s\\]" % re.escape(sandbox.sbx6) if sandbox.sbx6 else "")
        sluice.audit = AuditLog(config["audit"]["path"], True,
                                client_re=r"^(%s):\d+$" % clients_re)

        def check_audit_log():
            """After sluice stopped: the whole log chains (docs/audit.md#the-chain) and every record
            is a transparent one of this sandbox, with the destination the sandbox dialled."""
            if not sluice.ready:
                return
            lines = sluice.audit.lines()
            assert verify_chain(lines) == 0, "the audit log's chain breaks at line %d" % \
                verify_chain(lines)
            odd = [r for r in sluice.audit.records() if r["mode"] != "transparent" or
                   r["sandbox"] != SANDBOX or not r["orig_dst"]]
            assert not odd, "records that are not transparent ones of %s: %r" % (SANDBOX, odd)
            for r in sluice.audit.dns_records():  # what its resolver refused
                check_dns_shape(r)
                assert r["sandbox"] == SANDBOX, r
        stack.callback(check_audit_log)

        def stop_sluice():
            code = sluice.stop()
            if sluice.ready:
                assert code == 0, "sluice exited with %r on SIGTERM; stderr:\n%s" % (
                    code, sluice.stderr()[-4000:])
        stack.callback(stop_sluice)
        sluice.start()
        env = Env(bed, addrs, nginx, dns, sandbox, guard, sluice)
        env.explicit_port = explicit_port
        yield env

