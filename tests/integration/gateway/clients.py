"""Clients that talk to sluice: a raw CONNECT + TLS + HTTP exchange (every byte visible),
curl, and pip."""
from dataclasses import dataclass, field
import hashlib
import os
import shutil
import subprocess
import tempfile

import pytest

from http1 import ConnectionClosed, HttpReader, Response
from netutil import clean_env
from tlsraw import HandshakeFailed, PlainStream, TLSStream, connect_tunnel, open_proxy

SAME = object()  # "the SNI is the CONNECT authority's host"


@dataclass
class Exchange:
    connect: Response = None            # the CONNECT response (None for plain forwarding)
    tls_error: HandshakeFailed = None   # set when no TLS session was made
    peer_names: list = field(default_factory=list)
    responses: list = field(default_factory=list)
    error: Exception = None             # the connection failed while reading a response
    tail: bytes = b""                   # bytes after the last response, until close
    close_how: str = None               # "eof", "reset", "timeout" (still open), or None
    client: str = None                  # our "ip:port", as sluice's audit record names it
    alpn: str = None                    # the protocol the TLS handshake selected

    @property
    def final(self):
        """The answer that decided the exchange: a refused CONNECT, or the last response."""
        if self.connect is not None and self.connect.status != 200:
            return self.connect
        return self.responses[-1] if self.responses else None

    @property
    def denied_at_connect(self):
        return self.connect is not None and self.connect.status != 200


def _method(req):
    return req.split(b" ", 1)[0].decode()


def _read_all(reader, requests, ex, pipeline):
    if pipeline:
        reader.stream.sendall(b"".join(requests))
    for req in requests:
        if not pipeline:
            reader.stream.sendall(req)
        try:
            resp = reader.read_response(_method(req))
        except (ConnectionClosed, ConnectionResetError, OSError) as e:
            ex.error = e
            return
        ex.responses.append(resp)
        if resp.sluice_reason or (resp.header("Connection") or "").lower() == "close":
            return


def _finish(reader, ex, close_timeout):
    last = ex.final
    if ex.error is None and last is not None and last.status < 400 and \
            (last.header("Connection") or "").lower() != "close":
        reader.stream.close()
        return
    ex.tail, ex.close_how = reader.read_to_close(timeout=close_timeout)
    reader.stream.close()


def tunnel(proxy, authority, requests=(), sni=SAME, cafile=None, hello_chunks=None,
           raw=None, pipeline=False, host_header=None, alpn=("http/1.1",), close_timeout=15,
           connect_headers=()):
    """CONNECT `authority` (with extra `connect_headers`), then either send `raw` bytes, or do
    TLS with `sni` and send `requests` (bytes each) one after another (or all at once with
    `pipeline`)."""
    ex = Exchange()
    sock, ex.connect, reader = connect_tunnel(proxy, authority, host_header,
                                              headers=connect_headers)
    ex.client = "%s:%d" % sock.getsockname()
    if ex.connect.status != 200:
        _finish(reader, ex, close_timeout)
        return ex
    if raw is not None:
        sock.sendall(raw)
        ex.tail, ex.close_how = reader.read_to_close(timeout=close_timeout)
        sock.close()
        return ex
    if sni is SAME:
        sni = authority.rsplit(":", 1)[0]
    try:
        tls = TLSStream(sock, sni, cafile, alpn=alpn, hello_chunks=hello_chunks)
    except HandshakeFailed as e:
        ex.tls_error = e
        ex.tail, ex.close_how = HttpReader(PlainStream(sock)).read_to_close(close_timeout)
        sock.close()
        return ex
    ex.peer_names = tls.peer_dns_names() if cafile else []
    ex.alpn = tls.alpn()
    reader = HttpReader(tls)
    _read_all(reader, list(requests), ex, pipeline)
    _finish(reader, ex, close_timeout)
    return ex


def open_tls_tunnel(proxy, authority, cafile, sni=SAME):
    """CONNECT `authority` and complete TLS, for a test that keeps the session open.
    Returns (socket, TLSStream, HttpReader over it); raises unless the CONNECT got 200."""
    sock, answer, _ = connect_tunnel(proxy, authority)
    if answer.status != 200:
        sock.close()
        raise AssertionError("CONNECT %s: %d %r" % (authority, answer.status, answer.headers))
    tls = TLSStream(sock, authority.rsplit(":", 1)[0] if sni is SAME else sni, cafile)
    return sock, tls, HttpReader(tls)


def forward(proxy, requests, pipeline=False, close_timeout=15):
    """Plain-HTTP forwarding: absolute-form requests straight to the proxy listener."""
    ex = Exchange()
    sock = open_proxy(proxy)
    ex.client = "%s:%d" % sock.getsockname()
    reader = HttpReader(PlainStream(sock))
    _read_all(reader, list(requests), ex, pipeline)
    _finish(reader, ex, close_timeout)
    return ex


# --- curl ----------------------------------------------------------------------------------

@dataclass
class CurlResult:
    rc: int
    http_code: int
    http_connect: int
    blocks: list          # header blocks as Responses (CONNECT answer first when tunnelled)
    body: bytes           # None when the body was larger than keep_body
    body_len: int
    body_sha256: str
    stderr: str

    @property
    def final(self):
        return self.blocks[-1] if self.blocks else None

    @property
    def sluice_reason(self):
        for block in reversed(self.blocks):
            if block.sluice_reason:
                return block.sluice_reason
        return None


def _parse_blocks(text):
    blocks = []
    for raw in text.replace("\r\n", "\n").split("\n\n"):
        lines = [l for l in raw.split("\n") if l]
        if not lines or not lines[0].startswith("HTTP/"):
            continue
        parts = lines[0].split(" ", 2)
        headers = []
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
        # HTTP/2 and 3 have no reason phrase (curl writes "HTTP/2 403 "): None, not "".
        reason = None if parts[0] in ("HTTP/2", "HTTP/3") else (parts[2] if len(parts) > 2 else "")
        blocks.append(Response(int(parts[1]), reason, headers))
    return blocks


def curl(url, *args, proxy=None, cacert=None, timeout=60, keep_body=16 << 20, stdin=None,
         prefix=()):
    """Run curl; the body streams through a SHA-256 so 200 MiB costs no memory. `prefix`: a
    command that runs curl, e.g. ("ip", "netns", "exec", NAME) for a sandbox."""
    with tempfile.NamedTemporaryFile(prefix="curl-headers-") as hdr:
        cmd = [*prefix, "curl", "-sS", "--max-time", str(timeout), "-D", hdr.name, "-o", "-",
               "-w", "%{stderr}\nCURL-W %{http_code} %{http_connect}\n"]
        if proxy:
            cmd += ["-x", proxy]
        else:
            cmd += ["--noproxy", "*"]
        if cacert:
            cmd += ["--cacert", cacert]
        cmd += list(args) + [url]
        with tempfile.TemporaryFile() as errfile, subprocess.Popen(
                cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=errfile, env=clean_env()) as proc:
            if stdin is not None:
                proc.stdin.write(stdin)
                proc.stdin.close()
            digest, length, kept = hashlib.sha256(), 0, []
            while True:
                chunk = proc.stdout.read(1 << 20)
                if not chunk:
                    break
                digest.update(chunk)
                length += len(chunk)
                if length <= keep_body:
                    kept.append(chunk)
            rc = proc.wait(timeout=timeout + 30)
            errfile.seek(0)
            err = errfile.read().decode(errors="replace")
        with open(hdr.name, "r", errors="replace") as f:
            blocks = _parse_blocks(f.read())
    code = connect = 0
    for line in err.splitlines():
        if line.startswith("CURL-W "):
            code, connect = (int(x) for x in line.split()[1:3])
    return CurlResult(rc, code, connect, blocks, b"".join(kept) if length <= keep_body else None,
                      length, digest.hexdigest(), err)


class CurlDownload:
    """curl in the background, writing the body to a file (so a test can watch it grow, e.g.
    to signal sluice while a download is in progress). Stop it with stop(), by PID."""

    def __init__(self, url, out_path, *args, proxy=None, cacert=None, timeout=120):
        self.out_path = out_path
        self._err = tempfile.TemporaryFile()
        cmd = ["curl", "-sS", "--max-time", str(timeout), "-o", out_path,
               "-w", "\nCURL-W %{http_code} %{size_download}\n"]
        if proxy:
            cmd += ["-x", proxy]
        if cacert:
            cmd += ["--cacert", cacert]
        cmd += list(args) + [url]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self._err, env=clean_env())
        self.rc = self.http_code = None
        self.stderr = ""

    def size(self):
        try:
            return os.path.getsize(self.out_path)
        except FileNotFoundError:
            return 0

    def wait(self, timeout):
        """Wait for curl to exit; returns its exit code (raises subprocess.TimeoutExpired)."""
        out, _ = self.proc.communicate(timeout=timeout)
        self.rc = self.proc.returncode
        for line in out.decode(errors="replace").splitlines():
            if line.startswith("CURL-W "):
                self.http_code = int(line.split()[1])
        self._err.seek(0)
        self.stderr = self._err.read().decode(errors="replace")
        self._err.close()
        return self.rc

    def sha256(self):
        with open(self.out_path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


# --- pip -----------------------------------------------------------------------------------

def pip_download(index_url, package, dest, cert, proxy=None, timeout=120, prefix=(), retries=0):
    """`pip download` from one index only: no PyPI, no config files, no cache. `prefix`: a
    command that runs pip, e.g. ("ip", "netns", "exec", NAME) for a sandbox. pip reports a
    connection that failed only when it retries it (`retries`)."""
    cmd = ["/usr/bin/python3", "-m", "pip", "download", "--no-deps", "--no-cache-dir",
           "--disable-pip-version-check", "--no-input", "--retries", str(retries), "--timeout", "30",
           "--index-url", index_url, "--cert", cert, "-d", dest, package]
    if proxy:
        cmd[4:4] = ["--proxy", proxy]
    cmd[0:0] = list(prefix)
    env = clean_env(PIP_CONFIG_FILE=os.devnull)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def sluice_cli(gw, *args):
    """`sluice ARGS...` of gw's binary, from its working directory."""
    return subprocess.run([gw.sluice.binary, *args], capture_output=True, text=True, timeout=60,
                          cwd=gw.sluice.workdir, env=clean_env())


def env_lines(gw, sandbox="sbx1"):
    """What `sluice env` prints for gw's config and `sandbox` (it must succeed)."""
    r = sluice_cli(gw, "env", "-c", gw.sluice.config_path, "--sandbox", sandbox)
    assert r.returncode == 0, r.stderr
    return r.stdout


def chromium():
    """Debian's chromium, or the test is skipped."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("chromium is not installed (scripts/install-deps --test installs it)")
