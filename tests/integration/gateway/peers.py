"""The real peers of the bed: nginx (origins and canaries), dnsmasq (sluice's upstream
resolver), and a resolver that never answers. Each is started by the tests and stopped by PID.
"""
import json
import os
import re
import select
import socket
import subprocess
import threading
import uuid

import dnswire
from netutil import DIE_WITH_US, clean_env, read_text, stop_process, wait_port, wait_until
import nginx_conf

NGINX = "/usr/sbin/nginx"
DNSMASQ = "/usr/sbin/dnsmasq"
BARRIER_PREFIX = "/__barrier/"


class Nginx:
    """Access logs by role: cdn.log, second.log, h2.log, attacker.log, internal.log,
    sink.log."""

    def __init__(self, directory, www, pki, tls_port, plain_port):
        self.dir = directory
        self.tls_port = tls_port
        self.plain_port = plain_port
        os.makedirs(os.path.join(directory, "tmp"), exist_ok=True)
        self.conf = os.path.join(directory, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(nginx_conf.render(directory, www, pki, tls_port, plain_port,
                                      os.geteuid() == 0))
        self.proc = None

    def start(self):
        args = [NGINX, "-p", self.dir, "-c", self.conf,
                "-e", os.path.join(self.dir, "error.log")]
        with open(os.path.join(self.dir, "stderr.log"), "wb") as err:
            self.proc = subprocess.Popen(DIE_WITH_US + args, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err, env=clean_env())
        try:
            for addr in ("127.0.0.20", "127.0.0.21", "127.0.0.66", "127.0.0.1"):
                for port in (self.tls_port, self.plain_port):
                    wait_port(addr, port, timeout=20, proc=self.proc, what="nginx")
            wait_port("127.0.0.25", self.tls_port, timeout=20, proc=self.proc, what="nginx")
        except Exception:
            self.stop()
            raise RuntimeError("nginx did not start:\n" + self.startup_errors())

    def startup_errors(self):
        return read_text(os.path.join(self.dir, "stderr.log")) + \
            read_text(os.path.join(self.dir, "error.log"))[-3000:]

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None

    # --- logs -------------------------------------------------------------------------------

    def access(self, role, include_barriers=False):
        """Parsed access-log entries of one role, oldest first."""
        entries = []
        for line in read_text(os.path.join(self.dir, role + ".log")).splitlines():
            if not line.strip():
                continue
            entry = json.loads(line)
            if include_barriers or not entry["uri"].startswith(BARRIER_PREFIX):
                entries.append(entry)
        return entries

    def wait_access(self, role, predicate, count=1, timeout=20):
        def enough():
            hits = [e for e in self.access(role) if predicate(e)]
            return hits if len(hits) >= count else None
        return wait_until(enough, timeout, "%d %s access-log entries" % (count, role))

    def connection_events(self, role):
        """The info-level error log of a canary: any connection to it leaves a line here."""
        return read_text(os.path.join(self.dir, role + ".err"))

    def canary_mark(self, role):
        return len(self.access(role)), len(self.connection_events(role))

    def canary_hits_since(self, role, mark):
        """What reached a canary (attacker, internal) after `mark`: requests it logged and
        connection-level lines of its info error log. Call barrier() first."""
        requests = self.access(role)[mark[0]:]
        events = self.connection_events(role)[mark[1]:].strip()
        return requests + ([events] if events else [])

    def barrier(self):
        """Make sure nginx has logged what reached it so far: send a request with a unique
        path to the CDN's plain port and wait until it is in the log."""
        path = BARRIER_PREFIX + uuid.uuid4().hex
        with socket.create_connection(("127.0.0.20", self.plain_port), timeout=10) as s:
            s.sendall(b"GET %s HTTP/1.1\r\nHost: barrier.invalid\r\nConnection: close\r\n\r\n"
                      % path.encode())
            while s.recv(65536):
                pass
        wait_until(lambda: any(e["uri"] == path
                               for e in self.access("cdn", include_barriers=True)),
                   20, "nginx barrier")


def dnsmasq_command(address, port, directory, log):
    """dnsmasq answering only what --host-record/--address lines added after these say
    (NXDOMAIN for the rest: no upstream, no hosts file), on `address`:`port` (UDP and TCP),
    in the foreground, every query logged to `log`."""
    args = [DNSMASQ, "--conf-file=/dev/null", "--keep-in-foreground", "--no-resolv",
            "--no-hosts", "--bind-interfaces", "--listen-address=" + address,
            "--port=%d" % port, "--log-queries", "--log-facility=" + log,
            "--pid-file=" + os.path.join(directory, "dnsmasq.pid"), "--address=/#/"]
    if os.geteuid() == 0:
        # else it writes its log as "nobody" into our 0700 dir; and the same group, as a
        # change of group would clear the parent-death signal (DIE_WITH_US)
        args += ["--user=root", "--group=root"]
    return args


class Dnsmasq:
    """dnsmasq as sluice's upstream resolver, with a fixed zone and every query logged."""

    ADDRESS = "127.0.0.53"
    ZONE = {
        "allowed.test": ["127.0.0.20"], "api.allowed.test": ["127.0.0.20"],
        "other.test": ["127.0.0.20"], "evil.test": ["127.0.0.20"],
        "a.wild.test": ["127.0.0.20"], "expired.wild.test": ["127.0.0.20"],
        "wrongname.wild.test": ["127.0.0.20"], "second.test": ["127.0.0.21"],
        "attacker.test": ["127.0.0.66"], "atk.wild.test": ["127.0.0.66"],
        "refused.wild.test": ["127.0.0.22"],
        "ws.test": ["127.0.0.23"],  # the WebSocket origin of test_websocket.py (ws_origin.py)
        "loop.wild.test": ["127.0.0.1"], "meta.wild.test": ["169.254.169.254"],
        "priv.wild.test": ["10.0.0.1"], "mixed.wild.test": ["127.0.0.20", "127.0.0.1"],
        # the same targets under a rule without `ips`: docs/policy.md#addresses alone must deny them
        "cdn.pub.test": ["127.0.0.20"], "loop.pub.test": ["127.0.0.1"],
        "meta.pub.test": ["169.254.169.254"], "priv.pub.test": ["10.0.0.1"],
        # D3/I3-I6/I9 (docs/threat-model.md): more internal answers (A and AAAA) under both rules
        "zero.wild.test": ["0.0.0.0"], "mapped.wild.test": ["::ffff:127.0.0.1"],
        "nat64.wild.test": ["64:ff9b::7f00:1"], "mixed6.wild.test": ["127.0.0.20", "::1"],
        "zero.pub.test": ["0.0.0.0"], "cgnat.pub.test": ["100.100.100.200"],
        "ula.pub.test": ["fd00::1"], "mapped.pub.test": ["::ffff:127.0.0.1"],
        "compat.pub.test": ["::7f00:1"], "nat64.pub.test": ["64:ff9b::7f00:1"],
        "nat64local.pub.test": ["64:ff9b:1::a9fe:a9fe"], "sixtofour.pub.test": ["2002:7f00:1::"],
        "teredo.pub.test": ["2001:0:4136:e378:8000:63bf:3fff:fdd2"],
        "ietf.pub.test": ["192.0.0.192"], "bench.pub.test": ["198.18.0.1"],
        "doc.pub.test": ["192.0.2.1"], "doc2.pub.test": ["198.51.100.1"],
        "doc3.pub.test": ["203.0.113.66"], "reserved.pub.test": ["240.0.0.1"],
        "bcast.pub.test": ["255.255.255.255"], "mcast.pub.test": ["224.0.0.1"],
        "loop6.pub.test": ["::1"], "ll6.pub.test": ["fe80::1"], "sitelocal.pub.test": ["fec0::1"],
        "mcast6.pub.test": ["ff02::1"], "discard6.pub.test": ["100::1"],
        "doc6.pub.test": ["2001:db8::1"], "self.pub.test": ["127.0.0.2"],
        # the bed's own stand-in origins (a Python server per test, on a port of its own)
        "probe.test": ["127.0.0.24"],
        # the origin that speaks HTTP/2 (nginx), and the gRPC origin of test_grpc.py
        # (grpc_origin.py)
        "h2.test": ["127.0.0.25"], "grpc.test": ["127.0.0.26"],
    }
    # Whole subtrees: every name below the key resolves to the address (a wildcard rule's
    # names, as many as a test makes up).
    TREES = {"flood.test": "127.0.0.20"}

    def __init__(self, directory, port):
        self.dir = directory
        self.port = port
        os.makedirs(directory, exist_ok=True)
        self.log = os.path.join(directory, "dnsmasq.log")
        self.proc = None

    def start(self):
        args = dnsmasq_command(self.ADDRESS, self.port, self.dir, self.log)
        for name, addresses in self.ZONE.items():
            args += ["--host-record=%s,%s" % (name, a) for a in addresses]
        args += ["--address=/%s/%s" % item for item in self.TREES.items()]
        with open(os.path.join(self.dir, "stderr.log"), "wb") as err:
            self.proc = subprocess.Popen(DIE_WITH_US + args, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err, env=clean_env())

        def answers():
            if self.proc.poll() is not None:
                raise RuntimeError("dnsmasq exited: " +
                                   read_text(os.path.join(self.dir, "stderr.log")))
            try:
                return self.query("allowed.test", timeout=0.3).addresses == \
                    self.ZONE["allowed.test"]
            except OSError:
                return False
        wait_until(answers, 20, "dnsmasq to answer")

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None

    def query(self, name, qtype=dnswire.A, timeout=3.0):
        return dnswire.query(self.ADDRESS, self.port, name, qtype, timeout)

    def queried_names(self):
        """Every name dnsmasq was asked about, lower-cased, in order."""
        return [m.group(2).lower().rstrip(".") for m in
                re.finditer(r"query\[(\S+)\] (\S+) from", read_text(self.log))]

    def barrier(self):
        """Wait until dnsmasq has logged every query it received before this call."""
        name = "barrier-%s.invalid" % uuid.uuid4().hex[:16]
        self.query(name)
        wait_until(lambda: name in self.queried_names(), 20, "dnsmasq log barrier")

    def was_asked(self, fragment):
        self.barrier()
        return [n for n in self.queried_names() if fragment.lower() in n]


class SilentResolver:
    """A "resolver" that reads every query and never answers: for the DNS-timeout case."""

    ADDRESS = "127.0.0.54"

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((self.ADDRESS, 0))
        self.port = self.sock.getsockname()[1]
        self.received = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            ready, _, _ = select.select([self.sock], [], [], 0.1)
            if ready:
                self.sock.recvfrom(4096)
                self.received += 1

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()
