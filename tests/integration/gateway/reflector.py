"""An origin that reflects a request header back in another form: the upstream credential
brokering must not trust. nginx can only echo a header as it came; this one encodes it first
(base64, base64url, percent-encoding, hex) or compresses it (gzip), in the response head and
body, optionally trickled in chunks of a few bytes so that the masking sees it cut up.

HTTPS on 127.0.0.20 (the CDN address, where allowed.test and other.test resolve) on a port of
its own, with the bed's certificates for those names (chosen by SNI), so sluice verifies it
like any origin. Every request is recorded (method, path, headers) before it is answered.

  GET /echo?h=NAME&enc=FORM&pre=N&post=M[&trickle=1]
      reflected = "p" * N + <header NAME as received> + "s" * M, in FORM (ENCODERS below, or
      `gzip`: the body gzip-compressed with Content-Encoding: gzip whatever Accept-Encoding
      said, or `te-gzip`: Transfer-Encoding: gzip, chunked); head `X-Echo: <encoded>`, body
      `enc=<encoded>\\n`.
  GET /negotiate?h=NAME
      body `key=<header>\\n`, gzip-compressed (Content-Encoding: gzip) when the request's
      Accept-Encoding lists gzip, as any origin would; `X-Seen-Accept-Encoding` says what came.
  GET /echo-name?h=NAME
      200 with a field whose name carries the header: `X-Key-<header>: 1`.
  GET /early-hints?h=NAME
      103 Early Hints with `Link` fields that carry the header as it is and base64-encoded,
      then 200 `done`.
"""
import base64
import gzip
import http.server
import re
import socketserver
import ssl
import threading
import urllib.parse

CDN_ADDRESS = "127.0.0.20"


def _percent_every_byte(data, upper=True):
    fmt = "%%%02X" if upper else "%%%02x"
    return "".join(fmt % b for b in data).encode()


ENCODERS = {
    "plain": lambda d: d,
    "b64": base64.b64encode,
    "b64nopad": lambda d: base64.b64encode(d).rstrip(b"="),
    "b64url": base64.urlsafe_b64encode,
    "b64urlnopad": lambda d: base64.urlsafe_b64encode(d).rstrip(b"="),
    # RFC 3986: all but the unreserved characters (Python's quote with safe="")
    "url": lambda d: urllib.parse.quote(d, safe="").encode(),
    "url-lower": lambda d: re.sub(rb"%[0-9A-F]{2}", lambda m: m.group(0).lower(),
                                  urllib.parse.quote(d, safe="").encode()),
    # Python's quote as most code calls it: "/" left alone
    "url-slash": lambda d: urllib.parse.quote(d).encode(),
    # application/x-www-form-urlencoded (quote_plus: space as "+")
    "url-form": lambda d: urllib.parse.quote_plus(d, safe="").encode(),
    # JavaScript's encodeURIComponent: also ! ' ( ) * left alone
    "url-js": lambda d: urllib.parse.quote(d, safe="!'()*").encode(),
    "url-every": _percent_every_byte,
    "url-every-lower": lambda d: _percent_every_byte(d, upper=False),
    "hex": lambda d: d.hex().encode(),
    "HEX": lambda d: d.hex().upper().encode(),
}


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 (http.server's naming)
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        self.server.reflector.record(self.command, self.path, self.headers.items())
        value = (self.headers.get(query.get("h", "x-api-key")) or "").encode("latin-1")
        if url.path == "/echo":
            self._echo(query, value)
        elif url.path == "/negotiate":
            self._negotiate(value)
        elif url.path == "/echo-name":
            self._send(200, [("X-Key-" + value.decode("latin-1"), "1")], b"named\n")
        elif url.path == "/early-hints":
            self._early_hints(value)
        else:
            self._send(404, [], b"no such page\n")

    do_HEAD = do_GET  # noqa: N815

    def _echo(self, query, value):
        reflected = b"p" * int(query.get("pre", 0)) + value + b"s" * int(query.get("post", 0))
        enc = query.get("enc", "plain")
        if enc == "gzip":
            self._send(200, [("Content-Encoding", "gzip")],
                       gzip.compress(b"key=" + reflected + b"\n"))
            return
        if enc == "te-gzip":
            body = gzip.compress(b"key=" + reflected + b"\n")
            self.send_response(200)
            self.send_header("Transfer-Encoding", "gzip, chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            return
        encoded = ENCODERS[enc](reflected)
        body = b"enc=" + encoded + b"\n"
        headers = [("X-Echo", encoded.decode("latin-1"))]
        if query.get("trickle"):
            self._trickle(headers, body)
        else:
            self._send(200, headers, body)

    def _early_hints(self, value):
        """103 Early Hints whose Link echoes the header (as it is and base64), then 200."""
        self.send_response_only(103)
        self.send_header("Link", "</k/%s>; rel=preload" % value.decode("latin-1"))
        self.send_header("Link", "</b/%s>; rel=preload" % base64.b64encode(value).decode())
        self.end_headers()
        self._send(200, [], b"done\n")

    def _negotiate(self, value):
        seen = self.headers.get("Accept-Encoding", "")
        body = b"key=" + value + b"\n"
        headers = [("X-Seen-Accept-Encoding", seen), ("Vary", "Accept-Encoding")]
        if "gzip" in seen.lower():
            headers.append(("Content-Encoding", "gzip"))
            body = gzip.compress(body)
        self._send(200, headers, body)

    def _send(self, status, headers, body):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _trickle(self, headers, body):
        """Chunks of 1, 2 and 3 bytes, each its own write (and TLS record)."""
        self.send_response(200)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        at, size = 0, 1
        while at < len(body):
            piece = body[at:at + size]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            at += len(piece)
            size = size % 3 + 1
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, reflector, tls):
        self.reflector = reflector
        self.tls = tls
        super().__init__((CDN_ADDRESS, 0), _Handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        # The handshake happens in the handler's thread, on its first read.
        return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr


class Reflector:
    """The origin; `port` once started. `requests()` lists what it received, in order."""

    def __init__(self, pki):
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        default = pki.cdn["allowed.test"]
        tls.load_cert_chain(default.cert, default.key)
        by_name = {}
        for name in ("allowed.test", "other.test"):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(pki.cdn[name].cert, pki.cdn[name].key)
            by_name[name] = ctx

        def pick(sock, server_name, _ctx):
            if server_name in by_name:
                sock.context = by_name[server_name]
        tls.sni_callback = pick
        self._lock = threading.Lock()
        self._requests = []
        self._server = _Server(self, tls)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def record(self, method, path, headers):
        with self._lock:
            self._requests.append({"method": method, "path": path,
                                   "headers": [(k.lower(), v) for k, v in headers]})

    def requests(self, marker=None):
        with self._lock:
            return [r for r in self._requests if marker is None or marker in r["path"]]
