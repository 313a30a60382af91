"""Raw clients: CONNECT by hand, and TLS on memory BIOs, so that the ClientHello can be cut
into pieces and sent without SNI or with any SNI. Nothing here is lenient on purpose: a test
wants to see exactly what sluice did.
"""
import socket
import ssl
import time

from http1 import HttpReader


class HandshakeFailed(Exception):
    """The TLS handshake did not complete. kind: "alert" (the peer sent a TLS alert),
    "eof" (closed without one), "reset", or "error" (anything else, e.g. verification)."""

    def __init__(self, kind, detail):
        super().__init__("%s: %s" % (kind, detail))
        self.kind = kind
        self.detail = detail


class PlainStream:
    def __init__(self, sock):
        self.sock = sock

    def sendall(self, data):
        self.sock.sendall(data)

    def recv(self, n=65536):
        return self.sock.recv(n)

    def close(self):
        self.sock.close()


def _alert_kind(err):
    reason = getattr(err, "reason", "") or ""
    if reason.startswith(("SSLV3_ALERT", "TLSV1_", "TLSV13_ALERT")):
        return "alert"
    if isinstance(err, ssl.SSLEOFError) or "EOF" in str(err):
        return "eof"
    return "error"


class TLSStream:
    """TLS over a connected socket through memory BIOs.

    sni None sends no server_name. `hello_chunks`, if given, turns the first flight (the
    ClientHello) into a list of byte strings that are sent as separate writes."""

    def __init__(self, sock, sni, cafile=None, alpn=("http/1.1",), hello_chunks=None):
        self.sock = sock
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False  # the caller checks the names it expects (peer_dns_names)
        if cafile:
            ctx.load_verify_locations(cafile)
            ctx.verify_mode = ssl.CERT_REQUIRED
        else:
            ctx.verify_mode = ssl.CERT_NONE
        if alpn:
            ctx.set_alpn_protocols(list(alpn))
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self._in, self._out, server_hostname=sni)
        self._handshake(hello_chunks)

    def _flush(self, chunker=None):
        data = self._out.read()
        if not data:
            return
        if chunker is None:
            self.sock.sendall(data)
            return
        for piece in chunker(data):
            self.sock.sendall(piece)
            # Only shapes the traffic (separate TCP segments are likelier); correctness of the
            # test does not depend on it.
            time.sleep(0.002)

    def _handshake(self, hello_chunks):
        chunker = hello_chunks
        while True:
            try:
                self.obj.do_handshake()
                self._flush()
                return
            except ssl.SSLWantReadError:
                try:
                    self._flush(chunker)
                except OSError as e:
                    raise HandshakeFailed("reset", str(e)) from e
                chunker = None
            except ssl.SSLError as e:
                try:
                    self._flush()  # our own alert, if any
                except OSError:
                    pass
                raise HandshakeFailed(_alert_kind(e), "%s %s" % (e.reason, e)) from e
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError as e:
                raise HandshakeFailed("reset", str(e)) from e
            if not data:
                self._in.write_eof()
                try:
                    self.obj.do_handshake()
                except ssl.SSLError as e:
                    raise HandshakeFailed(_alert_kind(e), "%s %s" % (e.reason, e)) from e
                raise HandshakeFailed("eof", "peer closed during the handshake")
            self._in.write(data)

    def peer_dns_names(self):
        cert = self.obj.getpeercert()
        return [v for k, v in cert.get("subjectAltName", ()) if k == "DNS"]

    def alpn(self):
        return self.obj.selected_alpn_protocol()

    def sendall(self, data):
        view = memoryview(data)
        while view:
            n = self.obj.write(view)
            view = view[n:]
            self._flush()

    def recv(self, n=65536):
        while True:
            try:
                data = self.obj.read(n)
                self._flush()
                return data
            except ssl.SSLWantReadError:
                self._flush()
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            raw = self.sock.recv(65536)
            if not raw:
                self._in.write_eof()
            else:
                self._in.write(raw)

    def close(self):
        self.sock.close()


def record_splitter(size):
    """A hello_chunks function: re-frame the ClientHello's handshake bytes into TLS records
    of at most `size` bytes each (one TCP write per record)."""
    def split(flight):
        out = []
        pos = 0
        while pos + 5 <= len(flight):
            ctype, version, length = flight[pos], flight[pos + 1:pos + 3], \
                int.from_bytes(flight[pos + 3:pos + 5], "big")
            payload = flight[pos + 5:pos + 5 + length]
            pos += 5 + length
            for i in range(0, len(payload), size):
                piece = payload[i:i + size]
                out.append(bytes([ctype]) + version + len(piece).to_bytes(2, "big") + piece)
        return out
    return split


def byte_splitter(size):
    """A hello_chunks function: the same bytes, `size` bytes per TCP write."""
    return lambda flight: [flight[i:i + size] for i in range(0, len(flight), size)]


def open_proxy(proxy, timeout=30):
    sock = socket.create_connection(proxy, timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


# The CONNECT field by which a client asks for a refusal as the CONNECT's answer rather than in
# band (docs/wire.md#refusals-in-band).
AT_CONNECT = (("Sluice-Refusal", "at_connect"),)


def connect_tunnel(proxy, authority, host_header=None, timeout=30, headers=()):
    """Send CONNECT `authority` (with extra `headers`, [(name, value)]); return (socket,
    CONNECT response, reader of the socket)."""
    sock = open_proxy(proxy, timeout)
    host = authority if host_header is None else host_header
    extra = "".join("%s: %s\r\n" % kv for kv in headers).encode("latin-1")
    sock.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice-bed\r\n%s\r\n"
                 % (authority.encode(), host.encode(), extra))
    reader = HttpReader(PlainStream(sock))
    return sock, reader.read_response("CONNECT"), reader


def client_hello(sni, alpn=("http/1.1",)):
    """The bytes of a real ClientHello for `sni` (the first flight of Python's TLS client),
    for tests that send only part of one."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=sni)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()
