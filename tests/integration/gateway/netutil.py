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
BED_ADDRESSES = ("127.0.0.1", "127.0.0.20", "127.0.0.21", "127.0.0.22", "127.0.0.25",
                 "127.0.0.66")


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


# Every port free_port has handed out in this process. A port is free when picked but nobody
# holds it until sluice binds it, and the kernel draws from ~28,000 of them: two picks for one
# config (a sandbox's listen and another's, or the admin's) would collide about once in 14,000,
# and two sandboxes on one address is a config error, not a retry. Never handing one out twice
# makes that impossible; a suite run takes a few hundred.
_handed_out = set()


def free_port(addresses=("127.0.0.1",), kind=socket.SOCK_STREAM, avoid=()):
    """A port number that can be bound on every one of `addresses` right now, and that no
    earlier call in this process returned."""
    for _ in range(200):
        s = socket.socket(socket.AF_INET, kind)
        s.bind((addresses[0], 0))
        port = s.getsockname()[1]
        s.close()
        if port in avoid or port in _handed_out:
            continue
        if all(_bindable(a, port, kind) for a in addresses):
            _handed_out.add(port)
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


# --- TCP sockets as the kernel sees them (/proc/net/tcp), without making a connection --------

TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
              "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


def _endpoint(hexpair):
    addr, port = hexpair.split(":")
    raw = bytes.fromhex(addr)
    if len(raw) == 16:  # /proc/net/*6: four 32-bit words, each in host (little-endian) order
        words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
        return (socket.inet_ntop(socket.AF_INET6, words), int(port, 16))
    return ("%d.%d.%d.%d" % tuple(reversed(raw)), int(port, 16))


def tcp_sockets():
    """Every IPv4 TCP socket of this network namespace: dicts with local, remote (each
    (address, port)), state (a TCP_STATES name) and rx_queue (for a listener: the connections
    waiting to be accepted)."""
    out = []
    for line in read_text("/proc/net/tcp").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 5:
            continue
        _, rx = fields[4].split(":")
        out.append({"local": _endpoint(fields[1]), "remote": _endpoint(fields[2]),
                    "state": TCP_STATES.get(fields[3], fields[3]), "rx_queue": int(rx, 16)})
    return out


def udp_bound(addr, port):
    """Is a UDP socket bound to addr:port (this namespace)? Read from /proc/net/udp(6)."""
    six = ":" in addr
    if six:
        addr = socket.inet_ntop(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, addr))
    for line in read_text("/proc/net/udp6" if six else "/proc/net/udp").splitlines()[1:]:
        fields = line.split()
        if len(fields) > 2 and _endpoint(fields[1]) == (addr, port):
            return True
    return False


def listener(addr, port):
    """The LISTEN socket on addr:port (IPv4, or IPv6 from /proc/net/tcp6), or None."""
    if ":" in addr:
        addr = socket.inet_ntop(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, addr))
        for line in read_text("/proc/net/tcp6").splitlines()[1:]:
            fields = line.split()
            if len(fields) > 3 and _endpoint(fields[1]) == (addr, port) and fields[3] == "0A":
                return {"local": (addr, port), "state": "LISTEN"}
        return None
    for s in tcp_sockets():
        if s["local"] == (addr, port) and s["state"] == "LISTEN":
            return s
    return None


def socket_state(local, remote):
    """The state of the socket local -> remote (e.g. our client's end), or None if gone."""
    for s in tcp_sockets():
        if s["local"] == tuple(local) and s["remote"] == tuple(remote):
            return s["state"]
    return None


def read_until_closed(sock, timeout, start=None):
    """Read raw bytes until the peer closes. Returns (bytes, how, seconds): how is "eof",
    "reset" or "timeout" (still open after `timeout` seconds); seconds is when that was seen,
    counted from `start` (a time.monotonic() value; default: now)."""
    start = time.monotonic() if start is None else start
    data = b""
    while True:
        left = start + timeout - time.monotonic()
        if left <= 0:
            return data, "timeout", time.monotonic() - start
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return data, "reset", time.monotonic() - start
        except (socket.timeout, TimeoutError):
            return data, "timeout", time.monotonic() - start
        if not chunk:
            return data, "eof", time.monotonic() - start
        data += chunk


def _status_mask(pid, field):
    for line in read_text("/proc/%d/status" % pid).splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1], 16)
    return 0


def signal_handled(pid, sig):
    """Has the process taken charge of `sig` (a handler installed, or the signal blocked for
    sigwait/signalfd)? Until then the default action would kill it."""
    bit = 1 << (sig - 1)
    return bool((_status_mask(pid, "SigCgt") | _status_mask(pid, "SigBlk")) & bit)


def signal_pending(pid, sig):
    """Is `sig` still pending for the process (sent, not yet delivered)?"""
    bit = 1 << (sig - 1)
    return bool((_status_mask(pid, "ShdPnd") | _status_mask(pid, "SigPnd")) & bit)
