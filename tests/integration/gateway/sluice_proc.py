"""Running the sluice binary under test: its configuration, its process, its audit log.

The binary is $SLUICE_BINARY (CTest sets it to the built target, so the ASan build runs
these tests against the ASan binary), else build/proxy/sluice of this checkout.
"""
from dataclasses import dataclass
import json
import os
import re
import signal
import subprocess

from audit import AuditLog
import netutil
from netutil import DIE_WITH_US, clean_env, read_text, stop_process, wait_until

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SANDBOX = "sbx1"
PROXY_ADDRESS = "127.0.0.2"


def binary_path():
    return os.environ.get("SLUICE_BINARY") or os.path.join(REPO, "build", "proxy", "sluice")


def gateway_missing_reason(binary):
    """Why the gateway tests cannot run with `binary`, or None when `sluice run` exists."""
    if not os.access(binary, os.X_OK):
        return "no sluice binary at %s (set SLUICE_BINARY or build the project)" % binary
    probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "no-such-config.yaml")
    proc = subprocess.Popen([binary, "run", "-c", probe], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=clean_env())
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        stop_process(proc, signal.SIGKILL)
        return None  # `run` exists (and misbehaves: the tests will say how)
    text = (out + err).decode(errors="replace")
    if "unknown command" in text:
        return "`sluice run` is not implemented yet (%s)" % text.strip().splitlines()[0]
    return None


def is_asan(binary):
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


# --- configuration -------------------------------------------------------------------------

_PLAIN = re.compile(r"^[A-Za-z0-9_/.][A-Za-z0-9_/.:@-]*$")
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}


def _scalar(value, in_flow=False):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if in_flow or not _PLAIN.match(text) or text.lower() in _YAML_WORDS or \
            re.match(r"^[0-9.]+$", text):
        return json.dumps(text)
    return text


def to_yaml(value, indent=0):
    """Block YAML for dicts and lists of dicts; flow lists for lists of scalars."""
    pad = " " * indent
    out = []
    for key, item in value.items():
        if isinstance(item, dict):
            out.append("%s%s:" % (pad, key))
            out.append(to_yaml(item, indent + 2))
        elif isinstance(item, list) and item and isinstance(item[0], dict):
            out.append("%s%s:" % (pad, key))
            for entry in item:
                body = to_yaml(entry, indent + 4)
                out.append("%s  - %s" % (pad, body.lstrip()))
        elif isinstance(item, list):
            out.append("%s%s: [%s]" % (pad, key, ", ".join(_scalar(v, True) for v in item)))
        else:
            out.append("%s%s: %s" % (pad, key, _scalar(item)))
    return "\n".join(out)


def bed_rules(tls_port, plain_port):
    """The policy of sbx1, the test bed's: each rule opens exactly the
    test origin's address with `ips`; nothing else on 127/8 is reachable."""
    t, p = tls_port, plain_port
    return [
        {"name": "cdn", "hosts": ["allowed.test"], "ports": [t], "ips": ["127.0.0.20/32"]},
        {"name": "cdn-plain", "hosts": ["allowed.test"], "schemes": ["http"], "ports": [p],
         "ips": ["127.0.0.20/32"]},
        {"name": "api", "hosts": ["api.allowed.test"], "ports": [t], "methods": ["GET"],
         "paths": ["/v1/public/"], "ips": ["127.0.0.20/32"]},
        {"name": "second", "hosts": ["second.test"], "ports": [t], "ips": ["127.0.0.21/32"]},
        {"name": "h2", "hosts": ["h2.test"], "ports": [t], "ips": ["127.0.0.25/32"]},
        {"name": "atk", "hosts": ["atk.wild.test"], "ports": [t], "ips": ["127.0.0.66/32"]},
        {"name": "refused", "hosts": ["refused.wild.test"], "ports": [t],
         "ips": ["127.0.0.22/32"]},
        {"name": "wild", "hosts": ["*.wild.test"], "ports": [t], "ips": ["127.0.0.20/32"]},
        # No `ips`: only globally reachable addresses, so every *.pub.test answer of the bed
        # (all loopback, link-local or private) must be refused by docs/policy.md#addresses alone.
        {"name": "pub", "hosts": ["*.pub.test"], "ports": [t]},
    ]


def make_config(bed, workdir, listen_port, rules=None, mode="enforce", dns_servers=None,
                limits=None, edit=None):
    """The config of one sluice: sbx1 with the bed policy. `edit(config, workdir)`, if given,
    may change it in place (more sandboxes, per-sandbox audit paths, ...)."""
    limits_cfg = {"max_header_bytes": "16KiB", "handshake_timeout": "5s",
                  "idle_timeout": "30s", "shutdown_grace": "2s"}
    limits_cfg.update(limits or {})
    config = {
        "version": 1,
        "dns": {"servers": dns_servers or ["%s:%d" % (bed.dns.ADDRESS, bed.dns.port)],
                "timeout": "1s", "max_ttl": "1s"},
        "upstream": {"ca_file": bed.pki.test_ca.cert, "connect_timeout": "3s"},
        "audit": {"path": os.path.join(workdir, "audit.jsonl"), "hash_bodies": True},
        "limits": limits_cfg,
        "sandboxes": [{"name": SANDBOX, "listen": "%s:%d" % (PROXY_ADDRESS, listen_port),
                       "ca": os.path.join(workdir, "ca-" + SANDBOX), "policy": "bed",
                       "mode": mode}],
        "policies": {"bed": {"rules": rules if rules is not None
                             else bed_rules(bed.tls_port, bed.plain_port)}},
    }
    if edit is not None:
        edit(config, workdir)
    return config


def write_config(config, path):
    with open(path, "w") as f:
        f.write(to_yaml(config) + "\n")
    return path


# --- the process ---------------------------------------------------------------------------

def listening(addr, port):
    """Is addr:port in LISTEN state? Read from /proc, so that checking readiness makes no
    connection (a probe connection would be a client with an audit record of its own)."""
    return netutil.listener(addr, port) is not None


def _endpoint(text):
    host, port = text.rsplit(":", 1)
    return host.strip("[]"), int(port)


@dataclass
class SandboxView:
    name: str
    address: tuple
    proxy_url: str
    ca_pem: str
    audit: AuditLog


class Sluice:
    def __init__(self, binary, workdir, config, env=None, nofile=None):
        self.binary = binary
        self.extra_env = dict(env or {})  # on top of clean_env(), e.g. SLUICE_LOG or resolver vars
        self.nofile = nofile  # its RLIMIT_NOFILE, soft and hard (None: this process's)
        self.workdir = workdir
        self.config = config
        sandbox = config["sandboxes"][0]
        if "listen" in sandbox:
            host, port = sandbox["listen"].rsplit(":", 1)
            self.address = (host, int(port))
            self.proxy_url = "http://%s:%s" % (host, port)
        else:  # a transparent-only sandbox: no proxy to point a client at
            self.address = self.proxy_url = None
        self.ca_pem = os.path.join(sandbox["ca"], "ca.pem")
        # Every TCP listener (explicit proxy, transparent, the TCP side of dns_listen), every
        # dns_listen's UDP socket and every CA of the config, for readiness (IPv4 endpoints).
        self.listeners = [_endpoint(s[key]) for s in config["sandboxes"]
                          for key in ("listen", "transparent", "dns_listen") if key in s]
        self.udp_listeners = [_endpoint(s["dns_listen"]) for s in config["sandboxes"]
                              if "dns_listen" in s]
        self.ca_pems = [os.path.join(s["ca"], "ca.pem") for s in config["sandboxes"]]
        self.config_path = os.path.join(workdir, "sluice.yaml")
        self.stderr_path = os.path.join(workdir, "sluice.stderr")
        self.audit = AuditLog(config["audit"]["path"], config["audit"]["hash_bodies"])
        self.proc = None
        self.ready = False
        self.exit_code = None
        self.exit_checked = False  # a test asserted the exit status itself (signal tests)

    def start(self, timeout=60):
        write_config(self.config, self.config_path)
        with open(os.path.join(self.workdir, "sluice.stdout"), "wb") as out, \
                open(self.stderr_path, "wb") as err:
            # prlimit (util-linux, like setpriv) execs sluice too: the PID stays sluice's
            limit = [] if self.nofile is None else \
                ["prlimit", "--nofile=%d:%d" % (self.nofile, self.nofile), "--"]
            self.proc = subprocess.Popen(
                DIE_WITH_US + limit + [self.binary, "run", "-c", self.config_path],
                cwd=self.workdir,
                stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                env=clean_env(**self.extra_env))

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError("sluice exited with %d before listening:\n%s"
                                   % (self.proc.returncode, self.stderr()))
            # and it handles SIGTERM (stop() sends it; before its handler exists the
            # default action would kill it, exit -15)
            return all(listening(*a) for a in self.listeners) and \
                all(netutil.udp_bound(*a) for a in self.udp_listeners) and \
                all(os.path.exists(p) for p in self.ca_pems) and \
                netutil.signal_handled(self.proc.pid, signal.SIGTERM)
        wait_until(ready, timeout, "sluice to listen on %s" %
                   ", ".join("%s:%d" % a for a in self.listeners))
        self.ready = True
        return self

    def stderr(self):
        return read_text(self.stderr_path)

    def sandbox_view(self, name):
        """Another sandbox of this process as a Gateway can use it: its listener, its CA, and
        the audit log it writes to (its own `audit` path, else the global one)."""
        sandbox = [s for s in self.config["sandboxes"] if s["name"] == name][0]
        host, port = sandbox["listen"].rsplit(":", 1)
        return SandboxView(name, (host, int(port)), "http://%s:%s" % (host, port),
                           os.path.join(sandbox["ca"], "ca.pem"),
                           AuditLog(sandbox.get("audit", self.config["audit"]["path"]),
                                    self.config["audit"]["hash_bodies"]))

    def vm_hwm_kib(self):
        for line in read_text("/proc/%d/status" % self.proc.pid).splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise AssertionError("no VmHWM for pid %d" % self.proc.pid)

    def stop(self, timeout=30):
        """SIGTERM by PID; returns the exit status (None if it had to be killed)."""
        if self.proc is not None and self.exit_code is None:
            self.exit_code = stop_process(self.proc, signal.SIGTERM, timeout)
        return self.exit_code


def run_once(binary, config_path, timeout=20):
    """`sluice run -c FILE` expected to exit by itself (it cannot start): the CompletedProcess."""
    try:
        return subprocess.run([binary, "run", "-c", config_path], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              env=clean_env())
    except subprocess.TimeoutExpired:
        raise AssertionError("`sluice run -c %s` was still running after %ds: it should have "
                             "refused to start" % (config_path, timeout)) from None
