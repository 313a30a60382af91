"""The client side of a running sluice (Gateway) and the starter that owns sluice
processes (Runner); the fixtures in conftest.py are thin wrappers around these."""
import os
import shutil
import tempfile

import clients
from netutil import free_port
from sluice_proc import PROXY_ADDRESS, Sluice, make_config

KEEP = bool(os.environ.get("SLUICE_BED_KEEP"))  # keep temp dirs for debugging


def remove_dir(path):
    if not KEEP:
        shutil.rmtree(path, ignore_errors=True)


class Runner:
    """Starts sluices with a config built from the bed; stops them all by PID."""

    def __init__(self, binary, bed):
        self.binary = binary
        self.bed = bed
        self.started = []

    def start(self, env=None, nofile=None, **config_kw):
        """A sluice with make_config(**config_kw); `env`: extra environment variables;
        `nofile`: its descriptor limit (RLIMIT_NOFILE, soft and hard)."""
        last_error = None
        for _ in range(3):
            workdir = tempfile.mkdtemp(prefix="sluice-gw-")
            port = free_port((PROXY_ADDRESS,))
            config = make_config(self.bed, workdir, port, **config_kw)
            sluice = Sluice(self.binary, workdir, config, env=env, nofile=nofile)
            self.started.append(sluice)
            try:
                return sluice.start()
            except RuntimeError as e:  # exit 1: the port was taken meanwhile; try another
                last_error = e
                if sluice.proc.returncode != 1:
                    raise
        raise last_error

    def stop_all(self):
        failures = []
        for sluice in self.started:
            code = sluice.stop()
            if sluice.ready and code != 0 and not sluice.exit_checked:
                failures.append("sluice (%s) exited with %r on SIGTERM, expected 0; stderr:\n%s"
                                % (sluice.config_path, code, sluice.stderr()[-4000:]))
            remove_dir(sluice.workdir)
        self.started = []
        assert not failures, "\n".join(failures)


class Gateway:
    """The client side of one sluice: raw tunnels, forwarding, curl, all through it."""

    def __init__(self, sluice, bed):
        self.sluice = sluice
        self.bed = bed
        self.t = bed.tls_port
        self.p = bed.plain_port
        self.audit = sluice.audit

    def authority(self, name, port=None):
        return "%s:%d" % (name, port or self.t)

    def url(self, name, path="/", scheme="https", port=None):
        port = port or (self.t if scheme == "https" else self.p)
        return "%s://%s:%d%s" % (scheme, name, port, path)

    def tunnel(self, name, requests=(), port=None, **kw):
        kw.setdefault("cafile", self.sluice.ca_pem)
        return clients.tunnel(self.sluice.address, self.authority(name, port), requests, **kw)

    def forward(self, requests, **kw):
        return clients.forward(self.sluice.address, requests, **kw)

    def curl(self, url, *args, **kw):
        return clients.curl(url, *args, proxy=self.sluice.proxy_url, cacert=self.sluice.ca_pem,
                            **kw)
