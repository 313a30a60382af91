"""The bed of test_netns_wiring.py: sandboxes made by examples/sandbox-netns.sh, and threads
that play sluice's sandbox-facing listeners (the stand-ins) or a canary outside.

Everything runs in namespaces the tests create: the sandbox, and for the forwarding test a
gateway and an "outside" namespace with no link to the real network. The documentation
addresses (203.0.113.x, 198.51.100.x, 2001:db8::x) are only ever destinations dialled from
inside a sandbox. Every object here has a cleanup that removes what it made, by name.
"""
import contextlib
import ctypes
import errno
import hashlib
import json
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SCRIPT = os.path.join(REPO, "examples", "sandbox-netns.sh")
PROBE = os.path.join(HERE, "netns_probe.py")
PYTHON = "/usr/bin/python3"

SOL_IP, SOL_IPV6 = socket.IPPROTO_IP, socket.IPPROTO_IPV6
SO_ORIGINAL_DST = 80  # IP6T_SO_ORIGINAL_DST has the same number, at SOL_IPV6
IP_FREEBIND, IPV6_FREEBIND = 15, 78  # bind the gateway address before `up` creates it
CLONE_NEWNET = 0x40000000


def sh(*cmd, check=True, prefix=()):
    r = subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def unavailable_reason():
    """Why these tests cannot run here, or None."""
    for tool in ("ip", "nft"):
        if not shutil.which(tool):
            return "%s is missing (Debian: iproute2, nftables; scripts/install-deps --test)" % tool
    probe = "sbtp%06x" % random.getrandbits(24)
    r = sh("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        return ("`ip netns add` is not permitted here (%s): the netns wiring tests need root "
                "(CAP_NET_ADMIN, CAP_SYS_ADMIN)" % r.stderr.strip())
    sh("ip", "netns", "del", probe, check=False)
    r = sh("nft", "list", "tables", check=False)
    if r.returncode != 0:
        return "nft cannot read the ruleset here (%s)" % r.stderr.strip()
    return None


def interface_names(name):
    """The script's contract: slh-/sls-NAME, or a hash of NAME when that would be too long."""
    if len(name) <= 11:
        return "slh-" + name, "sls-" + name
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    return "slh" + digest, "sls" + digest


def free_subnet_octet(prefix=()):
    """A third octet R with nothing in 10.200.R.0/24 here."""
    for _ in range(100):
        r = random.randrange(256)
        if not sh("ip", "-o", "-4", "addr", "show", "to", "10.200.%d.0/24" % r,
                  prefix=prefix).stdout.strip():
            return r
    raise RuntimeError("no free /24 in 10.200.0.0/16")


# --- namespaces ------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def in_netns(netns, fn):
    """Call fn() on a thread that has joined network namespace `netns`; sockets it creates
    belong to that namespace for good, whichever thread uses them later."""
    out = {}

    def run():
        fd = os.open("/run/netns/" + netns, os.O_RDONLY)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns(%s)" % netns)
            out["value"] = fn()
        except BaseException as exc:  # handed to the caller
            out["error"] = exc
        finally:
            os.close(fd)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def has_phrase(rule, phrase):
    """Whether an nft rule contains the phrase not followed by another digit: the port or
    address it names is the whole one ("redirect to :53" is not in "redirect to :53687")."""
    return re.search(re.escape(phrase) + r"(?![0-9])", rule) is not None


def netns_names():
    return {line.split()[0] for line in sh("ip", "netns", "list").stdout.splitlines() if line}


# --- the stand-ins ---------------------------------------------------------------------------

def original_dst(conn):
    """SO_ORIGINAL_DST of an accepted connection, as (address, port), or None."""
    try:
        if conn.family == socket.AF_INET:
            raw = conn.getsockopt(SOL_IP, SO_ORIGINAL_DST, 16)
            return socket.inet_ntop(socket.AF_INET, raw[4:8]), struct.unpack("!H", raw[2:4])[0]
        raw = conn.getsockopt(SOL_IPV6, SO_ORIGINAL_DST, 28)
        return socket.inet_ntop(socket.AF_INET6, raw[8:24]), struct.unpack("!H", raw[2:4])[0]
    except OSError:
        return None


def dns_qname(msg):
    labels, pos = [], 12
    while pos < len(msg) and msg[pos]:
        labels.append(msg[pos + 1:pos + 1 + msg[pos]].decode(errors="replace"))
        pos += 1 + msg[pos]
    return ".".join(labels), pos + 5


def dns_answer(msg, address):
    """The reply to a query: one A record with `address` (sluice's synthetic answer)."""
    _, end = dns_qname(msg)
    return msg[:2] + struct.pack("!HHHHH", 0x8180, 1, 1, 0, 0) + msg[12:end] + \
        struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(address)


class Recorder:
    """Sockets served by threads; every contact is recorded as an event (a dict).

    Roles: "transparent" (reads SO_ORIGINAL_DST and the client's tag line, answers
    "ORIG addr port"), "dns" (answers an A query with `answer`), "sink" (records and answers
    "SINK"): a host service, or a canary outside, that must never hear from the sandbox."""

    def __init__(self, answer=None):
        self.answer = answer
        self.events = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = []
        self._socks = []

    def _record(self, event):
        """Records the event before the reply goes out: a client that exits on its answer
        must find its contact recorded. A later error is added to the same event."""
        with self._lock:
            if not any(e is event for e in self.events):
                self.events.append(event)

    def _failed(self, event, exc):
        with self._lock:
            event["error"] = repr(exc)
        self._record(event)

    def _bind(self, kind, addr, port, freebind):
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        s = socket.socket(family, kind)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                s.setsockopt(SOL_IPV6, socket.IPV6_V6ONLY, 1)
            if freebind:
                s.setsockopt(*((SOL_IP, IP_FREEBIND) if family == socket.AF_INET
                               else (SOL_IPV6, IPV6_FREEBIND)), 1)
            s.bind(socket.getaddrinfo(addr, port, family, kind, 0, socket.AI_NUMERICHOST)[0][4])
        except OSError:
            s.close()
            raise
        s.settimeout(0.1)
        self._socks.append(s)
        return s

    def tcp(self, addr, port, role, freebind=False):
        s = self._bind(socket.SOCK_STREAM, addr, port, freebind)
        s.listen(64)
        self._start(self._serve_tcp, s, role)
        return s.getsockname()[1]

    def udp(self, addr, port, role, freebind=False):
        s = self._bind(socket.SOCK_DGRAM, addr, port, freebind)
        self._start(self._serve_udp, s, role)
        return s.getsockname()[1]

    def _start(self, target, sock, role):
        t = threading.Thread(target=target, args=(sock, role), daemon=True)
        t.start()
        self._threads.append(t)

    def _serve_tcp(self, sock, role):
        while not self._stop.is_set():
            try:
                conn, peer = sock.accept()
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                return
            with conn:
                self._handle_tcp(conn, peer, sock.getsockname(), role)

    def _handle_tcp(self, conn, peer, local, role):
        conn.settimeout(3)
        event = {"role": role, "proto": "tcp", "peer": peer[0], "local": list(local[:2])}
        try:
            if role == "dns":
                data = b""
                while len(data) < 2 or len(data) < 2 + struct.unpack("!H", data[:2])[0]:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                event["qname"] = dns_qname(data[2:])[0]
                reply = dns_answer(data[2:], self.answer)
                self._record(event)
                conn.sendall(struct.pack("!H", len(reply)) + reply)
            else:
                orig = original_dst(conn) if role == "transparent" else None
                event["orig"] = list(orig) if orig else None
                line = b""
                while not line.endswith(b"\n"):
                    chunk = conn.recv(1024)
                    if not chunk:
                        break
                    line += chunk
                event["tag"] = line.decode(errors="replace").strip()
                self._record(event)
                if role == "transparent":
                    conn.sendall(("ORIG %s %d\n" % orig if orig else "ORIG none\n").encode())
                else:
                    conn.sendall(b"SINK\n")
        except OSError as exc:
            self._failed(event, exc)
            return
        self._record(event)

    def _serve_udp(self, sock, role):
        while not self._stop.is_set():
            try:
                msg, peer = sock.recvfrom(4096)
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                return
            event = {"role": role, "proto": "udp", "peer": peer[0],
                     "local": list(sock.getsockname()[:2])}
            try:
                if role == "dns":
                    event["qname"] = dns_qname(msg)[0]
                    self._record(event)
                    sock.sendto(dns_answer(msg, self.answer), peer)
                else:
                    event["tag"] = msg.decode(errors="replace")
                    self._record(event)
                    sock.sendto(b"SINK", peer)
            except (OSError, struct.error) as exc:
                self._failed(event, exc)
                continue
            self._record(event)

    def matching(self, **fields):
        with self._lock:
            return [e for e in self.events if all(e.get(k) == v for k, v in fields.items())]

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        for s in self._socks:
            s.close()


# --- a sandbox made by the script ------------------------------------------------------------

class Sandbox:
    """One namespace wired by examples/sandbox-netns.sh, with stand-ins for sluice's
    transparent and DNS listeners on the gateway address (bound before `up`, IP_FREEBIND),
    and a "host service" (sluice's explicit proxy or admin port, say) on the gateway too.

    host_ns: run the script, the stand-ins and nft in that namespace instead of this one (the
    forwarding test's gateway). Call cleanup() whatever happens."""

    def __init__(self, name=None, plen=30, v6=False, dns_port=None, tcp_ports=None,
                 host_ns=None):
        self.name = name or "sbt%06x" % random.getrandbits(24)
        self.host_ns = host_ns
        self.prefix = ("nsenter", "--net=/run/netns/" + host_ns, "--") if host_ns else ()
        self.host_if, self.sbx_if = interface_names(self.name)
        self.table = "sluice_" + self.name
        self.etc_dir = "/etc/netns/" + self.name
        octet = free_subnet_octet(self.prefix)
        self.plen = plen
        self.gw, self.sbx = "10.200.%d.1" % octet, "10.200.%d.2" % octet
        self.gw6 = self.sbx6 = None
        if v6:
            ula = "fd5c:%x:%x" % (random.getrandbits(16), random.getrandbits(16))
            self.gw6, self.sbx6 = ula + "::1", ula + "::2"
        self.tcp_ports = tcp_ports
        self.standins = Recorder(answer=self.gw)
        self.tport = self.dport = self.service_port = self.service_udp_port = None
        self._want_dns_port = dns_port

    # the stand-ins, then the script

    def listen(self):
        """Binds the stand-ins (before `up`: the ports go into the script's arguments)."""
        def make():
            rec = self.standins
            for _ in range(20):
                try:
                    tport = rec.tcp(self.gw, 0, "transparent", freebind=True)
                    if self.gw6:
                        rec.tcp(self.gw6, tport, "transparent", freebind=True)
                    dport = rec.udp(self.gw, self._want_dns_port or 0, "dns", freebind=True)
                    rec.tcp(self.gw, dport, "dns", freebind=True)
                    if self.gw6:
                        rec.udp(self.gw6, dport, "dns", freebind=True)
                        rec.tcp(self.gw6, dport, "dns", freebind=True)
                    service = rec.tcp(self.gw, 0, "sink", freebind=True)
                    service_udp = rec.udp(self.gw, 0, "sink", freebind=True)
                    return tport, dport, service, service_udp
                except OSError as exc:  # a port number taken on one address: start over
                    if exc.errno != errno.EADDRINUSE:
                        raise
                    rec.stop()
                    self.standins = rec = Recorder(answer=self.gw)
            raise RuntimeError("no free ports for the stand-ins")
        ports = in_netns(self.host_ns, make) if self.host_ns else make()
        self.tport, self.dport, self.service_port, self.service_udp_port = ports

    def up_args(self, gw=None, sbx=None):
        args = ["up", self.name, "--gateway", "%s/%d" % (gw or self.gw, self.plen),
                "--sandbox", sbx or self.sbx, "--transparent-port", str(self.tport),
                "--dns-port", str(self.dport)]
        if self.gw6:
            args += ["--gateway6", self.gw6 + "/64", "--sandbox6", self.sbx6]
        if self.tcp_ports:
            args += ["--tcp-ports", self.tcp_ports]
        return args

    def script(self, *args, env=None):
        return subprocess.run([*self.prefix, SCRIPT, *args], capture_output=True, text=True,
                              timeout=60, env=env)

    def up(self):
        self.listen()
        r = self.script(*self.up_args())
        assert r.returncode == 0, "up failed: %s%s" % (r.stdout, r.stderr)
        return r

    def down(self):
        return self.script("down", self.name)

    # from inside

    def probe(self, spec, timeout=30):
        """Runs netns_probe.py inside the sandbox: {id: probe} -> {id: result}."""
        r = subprocess.run(["ip", "netns", "exec", self.name, PYTHON, "-B", PROBE,
                            json.dumps(spec)], capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, "probe failed: %s%s" % (r.stdout, r.stderr)
        return json.loads(r.stdout)

    def in_sandbox(self, *cmd):
        return sh("ip", "-n", self.name, *cmd)

    def tag(self, key):
        return "%s-%s" % (self.name, key)

    # what the gateway side shows

    def nft(self, *args, check=True):
        return sh("nft", *args, check=check, prefix=self.prefix)

    def ruleset(self):
        """The table's rules without their counters, or None if it does not exist."""
        r = self.nft("list", "table", "inet", self.table, check=False)
        if r.returncode != 0:
            return None
        return [re.sub(r" counter packets \d+ bytes \d+", "", line.strip())
                for line in r.stdout.splitlines() if line.strip()]

    def redirects_to(self, port):
        """The rules that redirect to exactly this port (not to 53687 when asked for 53)."""
        return [line for line in self.ruleset() or [] if has_phrase(line, "redirect to :%d" % port)]

    def counters(self):
        """{rule text without its counter: packets} for every rule with a counter."""
        out = {}
        r = self.nft("list", "table", "inet", self.table, check=False)
        for line in r.stdout.splitlines():
            if "counter packets" in line:
                head, rest = line.strip().split(" counter packets ", 1)
                packets = int(rest.split()[0])
                tail = rest.split(" ", 3)[3] if len(rest.split(" ", 3)) > 3 else ""
                out[(head + " " + tail).strip()] = packets
        return out

    def counter(self, *words):
        """Packets counted by the one rule whose text contains every word."""
        hits = [(rule, n) for rule, n in self.counters().items()
                if all(has_phrase(rule, w) for w in words)]
        assert len(hits) == 1, "rules matching %s: %s" % (words, hits)
        return hits[0][1]

    def leftovers(self):
        """Whatever of this sandbox still exists, by name: [] once it is all gone."""
        found = []
        if self.name in netns_names():
            found.append("netns " + self.name)
        if self.host_ns is None or self.host_ns in netns_names():  # else gone with it
            links = sh("ip", "-o", "link", "show", prefix=self.prefix).stdout
            for ifname in (self.host_if, self.sbx_if):
                if (" %s:" % ifname) in links or (" %s@" % ifname) in links:
                    found.append("link " + ifname)
            if ("table inet %s\n" % self.table) in self.nft("list", "tables").stdout + "\n":
                found.append("nft table " + self.table)
        if os.path.lexists(self.etc_dir):
            found.append(self.etc_dir)
        return found

    def cleanup(self):
        """`down`, then remove by hand whatever is left (a broken `down` must not leave the
        machine dirty), then stop the stand-ins."""
        try:
            self.down()
            sh("ip", "link", "del", "dev", self.host_if, check=False, prefix=self.prefix)
            if self.name in netns_names():
                sh("ip", "netns", "del", self.name, check=False)
            self.nft("delete", "table", "inet", self.table, check=False)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.etc_dir, "resolv.conf"))
            with contextlib.suppress(FileNotFoundError, OSError):
                os.rmdir(self.etc_dir)
        finally:
            self.standins.stop()


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(0.02)
