"""Small helpers shared by the bed: free ports, waiting on events, child processes.

Everything here stays on 127.0.0.0/8. Waiting is always polling for an event with a deadline,
never a sleep that the test's correctness depends on.
"""
import os
import shutil
import signal
import socket
import subprocess
import time

# Addresses the bed binds. A port is "free" for the bed only when it is free on all of them,
# so that the same port number can serve the CDN, the second origin, the attacker, the
# internal canary, and is refused on 127.0.0.22 (where nothing listens, on purpose).
BED_ADDRESSES = ("127.0.0.1", "127.0.0.20", "127.0.0.21", "127.0.0.22", "127.0.0.66")


# Long-lived children (nginx, dnsmasq, sluice) get SIGTERM from the kernel if the test process
# dies without running its finalizers (killed by a CTest timeout): setpriv (util-linux) sets
# the parent-death signal and execs the command, so the child keeps the PID we stop it by.
DIE_WITH_US = ["setpriv", "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") else []


def clean_env(**extra):
    """The environment for every child: no proxy variables, no pip or curl configuration."""
    env = {k: v for k, v in os.environ.items()
           if not k.lower().endswith("_proxy") and not k.startswith("PIP_")
           and k not in ("CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")}
    env.update(extra)
    return env


def _bindable(addr, port, kind):
    s = socket.socket(socket.AF_INET, kind)
    try:
        s.bind((addr, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port(addresses=("127.0.0.1",), kind=socket.SOCK_STREAM, avoid=()):
    """A port number that can be bound on every one of `addresses` right now."""
    for _ in range(200):
        s = socket.socket(socket.AF_INET, kind)
        s.bind((addresses[0], 0))
        port = s.getsockname()[1]
        s.close()
        if port in avoid:
            continue
        if all(_bindable(a, port, kind) for a in addresses):
            return port
    raise RuntimeError("no free port on %s" % (addresses,))


def wait_until(predicate, timeout, what, interval=0.02):
    """Poll `predicate` until it returns a truthy value; return that value or fail."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def port_accepts(addr, port):
    try:
        with socket.create_connection((addr, port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_port(addr, port, timeout=30, proc=None, what=None):
    """Wait until addr:port accepts a TCP connection; fail early if `proc` exits."""
    def ready():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("%s exited with %s before %s:%d accepted"
                               % (what or proc.args[0], proc.returncode, addr, port))
        return port_accepts(addr, port)
    wait_until(ready, timeout, "%s:%d to accept" % (addr, port))


def stop_process(proc, sig=signal.SIGTERM, timeout=20):
    """Send `sig` to this one child (by PID) and reap it; SIGKILL after `timeout`.

    Returns the exit status, or None if it had to be killed."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        os.kill(proc.pid, sig)
    except ProcessLookupError:
        pass
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        return None


def read_text(path):
    try:
        with open(path, "r", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""
