"""Fixtures of the gateway integration tests.

Session scope: the bed (certificates, content, nginx, dnsmasq, a silent resolver). Module
scope: one sluice with the standard policy (`sluice`, `gw`). Function scope: sluices with a
variant config (`start_sluice`, `make_gw`). Every process is stopped by PID, every temp
directory removed (set SLUICE_BED_KEEP=1 to keep them for debugging).
Tests that need a running gateway are skipped, with the reason, while `sluice run` does not
exist; the bed's self-tests run regardless.
"""
import sys

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree  # noqa: E402

import contextlib  # noqa: E402
from dataclasses import dataclass  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402

from content import Content  # noqa: E402
from gateway import Gateway, Runner, remove_dir  # noqa: E402
from netutil import BED_ADDRESSES, free_port  # noqa: E402
from peers import Dnsmasq, Nginx, SilentResolver  # noqa: E402
from pki import BedPKI  # noqa: E402
from sluice_proc import binary_path, gateway_missing_reason  # noqa: E402


@dataclass
class Bed:
    dir: str
    pki: BedPKI
    content: Content
    nginx: Nginx
    dns: Dnsmasq
    silent_dns: SilentResolver
    tls_port: int
    plain_port: int


def _start_nginx(directory, www, pki):
    for attempt in range(3):
        tls = free_port(BED_ADDRESSES)
        plain = free_port(BED_ADDRESSES, avoid={tls})
        nginx = Nginx(directory, www, pki, tls, plain)
        try:
            nginx.start()
            return nginx
        except RuntimeError:
            if attempt == 2:  # a port taken between the check and nginx's bind: retry
                raise


def _start_dnsmasq(directory):
    for attempt in range(3):
        dns = Dnsmasq(directory, free_port((Dnsmasq.ADDRESS,), kind=socket.SOCK_DGRAM))
        try:
            dns.start()
            return dns
        except (RuntimeError, TimeoutError):
            dns.stop()
            if attempt == 2:
                raise


TOOLS = {"nginx": "/usr/sbin/nginx", "dnsmasq": "/usr/sbin/dnsmasq", "curl": "curl",
         "openssl": "openssl"}


@pytest.fixture(scope="session")
def bed():
    missing = [n for n, path in TOOLS.items() if not shutil.which(path)]
    if missing:
        pytest.fail("the bed needs %s: run scripts/install-deps --test" % ", ".join(missing))
    directory = tempfile.mkdtemp(prefix="sluice-bed-")
    with contextlib.ExitStack() as stack:
        stack.callback(remove_dir, directory)
        pki = BedPKI(os.path.join(directory, "pki"))
        content = Content(os.path.join(directory, "www"))
        nginx = _start_nginx(os.path.join(directory, "nginx"), content.root, pki)
        stack.callback(nginx.stop)
        dns = _start_dnsmasq(os.path.join(directory, "dns"))
        stack.callback(dns.stop)
        silent = SilentResolver()
        stack.callback(silent.stop)
        yield Bed(directory, pki, content, nginx, dns, silent, nginx.tls_port, nginx.plain_port)


@pytest.fixture
def scratch():
    """A temporary directory for one test, removed afterwards."""
    directory = tempfile.mkdtemp(prefix="sluice-scratch-")
    yield directory
    remove_dir(directory)


# --- sluice ----------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def sluice_binary():
    binary = binary_path()
    reason = gateway_missing_reason(binary)
    if reason:
        pytest.skip(reason)
    return binary


@pytest.fixture(scope="module")
def sluice(sluice_binary, bed):
    """sbx1 with the standard bed policy, shared by the tests of one module."""
    runner = Runner(sluice_binary, bed)
    try:
        yield runner.start()
    finally:
        runner.stop_all()


@pytest.fixture
def start_sluice(sluice_binary, bed):
    """Factory: start_sluice(rules=..., mode=..., dns_servers=..., limits=..., edit=...,
    env={...})."""
    runner = Runner(sluice_binary, bed)
    try:
        yield runner.start
    finally:
        runner.stop_all()


@pytest.fixture(scope="module")
def gw(sluice, bed):
    return Gateway(sluice, bed)


@pytest.fixture
def make_gw(start_sluice, bed):
    """Factory: a Gateway on a freshly started sluice with a variant config."""
    return lambda **kw: Gateway(start_sluice(**kw), bed)


def pytest_terminal_summary(terminalreporter):
    """Each distinct skip reason once, with its count (-q alone would hide them)."""
    reasons = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in sorted(reasons.items()):
        terminalreporter.write_line("SKIPPED %d test(s): %s" % (count, reason))
