"""HTTP/1.1 by hand: request bytes exactly as a test wants them, and a response reader that
keeps every byte (head as received, body de-chunked) and tells how the connection ended."""
from dataclasses import dataclass, field
import socket


class ConnectionClosed(Exception):
    pass


@dataclass
class Response:
    status: int
    reason: str
    headers: list = field(default_factory=list)  # [(name, value)] as received
    body: bytes = b""
    raw_head: bytes = b""
    trailers: list = field(default_factory=list)  # [(name, value)] of a chunked body's trailer

    def header(self, name):
        values = self.headers_named(name)
        return values[0] if values else None

    def headers_named(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    @property
    def sluice_reason(self):
        return self.header("Sluice-Reason")

    @property
    def proxy_status(self):
        return self.header("Proxy-Status")


class HttpReader:
    def __init__(self, stream):
        self.stream = stream
        self.buf = b""

    def _fill(self):
        data = self.stream.recv(65536)
        if not data:
            raise ConnectionClosed("closed by peer")
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exactly(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_response(self, method="GET"):
        resp = self.read_head()
        resp.body = self._body(resp, method)
        return resp

    def read_head(self):
        """Only the response head; what came after it stays in `buf`."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        version, status, *reason = lines[0].decode("latin-1").split(" ", 2)
        if not version.startswith("HTTP/1."):
            raise ValueError("not an HTTP response: %r" % lines[0])
        headers = []
        for line in lines[1:]:
            name, _, value = line.decode("latin-1").partition(":")
            headers.append((name.strip(), value.strip()))
        return Response(int(status), reason[0] if reason else "", headers, b"", head)

    def _body(self, resp, method):
        if method == "HEAD" or resp.status in (204, 304) or resp.status < 200 or \
                (method == "CONNECT" and 200 <= resp.status < 300):
            return b""
        te = (resp.header("Transfer-Encoding") or "").lower()
        if te == "chunked":
            body = b""
            while True:
                size = int(self._line().split(b";")[0], 16)
                if size == 0:
                    while True:
                        line = self._line()
                        if not line:
                            return body
                        name, _, value = line.decode("latin-1").partition(":")
                        resp.trailers.append((name.strip(), value.strip()))
                body += self._exactly(size)
                self._line()
        length = resp.header("Content-Length")
        if length is not None:
            return self._exactly(int(length))
        return self.read_to_close()[0]

    def read_to_close(self, timeout=None):
        """Everything until the peer closes. Returns (bytes, how): how is "eof", "reset" or
        "timeout" (still open after `timeout` seconds)."""
        data, self.buf = self.buf, b""
        sock = getattr(self.stream, "sock", None)
        if timeout is not None and sock is not None:
            sock.settimeout(timeout)
        try:
            while True:
                chunk = self.stream.recv(65536)
                if not chunk:
                    return data, "eof"
                data += chunk
        except ConnectionResetError:
            return data, "reset"
        except (socket.timeout, TimeoutError):
            return data, "timeout"


def request_bytes(method, target, host, headers=(), body=b"", keep_alive=True):
    lines = ["%s %s HTTP/1.1" % (method, target)]
    if host is not None:
        lines.append("Host: " + host)
    lines += ["%s: %s" % kv for kv in headers]
    if body or method in ("POST", "PUT"):
        lines.append("Content-Length: %d" % len(body))
    if not keep_alive:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
