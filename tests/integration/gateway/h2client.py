"""A raw HTTP/2 client through sluice's explicit proxy (docs/wire.md#http2), on python3-h2.

CONNECT H:port by hand (tlsraw.connect_tunnel), TLS on memory BIOs with the sandbox CA and an
ALPN list of the test's choosing (tlsraw.TLSStream), then an h2.connection.H2Connection driven
over that TLS session: every frame visible, nothing retried, nothing lenient.

    tunnel = H2Tunnel(gw.sluice.address, gw.authority("allowed.test"), gw.sluice.ca_pem)
    tunnel.start()                              # fails unless ALPN selected h2
    a = tunnel.request("GET", "/whoami.txt")    # a stream id; :authority is the CONNECT's
    b = tunnel.request("GET", "/x", authority="evil.test")
    sa, sb = tunnel.wait(a, b)                  # each Stream: status, headers, body, reset

`strict=False` makes a connection that sends header blocks exactly as given (no lower-casing, no
validation): for the malformed streams of RFC 9113 §8.1-8.3. What sluice sends is always
validated by h2 (a connection-specific field or an upper-case name in a response, a DATA frame
beyond the window this client granted): a peer that breaks HTTP/2 fails the test with the
error h2 found. The receive windows are h2's defaults (65,535 bytes per stream and for the
connection) and are reopened with WINDOW_UPDATE only as the data is consumed, so a response
larger than a window arrives whole only if sluice waits for the updates; `hold_window` stops
the reopening (a stream held in flight by flow control) until release_window(); `hold_streams`
does it for the streams it names only, and start(conn_window=N) grants the connection a larger
window, so that a held stream cannot hold the others up through it. `extended_connect` opens
an RFC 8441 stream (`:protocol`) once sluice's SETTINGS are in (`settings_received`); its
DATA both ways are sent with send_body(..., end=False) and read from the Stream. GOAWAY frames
are taken out before h2 sees them and kept in `terminated`: h2 4.1 closes its connection on a
GOAWAY and would refuse the frames of the streams a graceful shutdown lets finish.
"""
from dataclasses import dataclass, field
import socket
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions

from tlsraw import TLSStream, connect_tunnel

SAME = object()  # "the SNI is the CONNECT authority's host"


def error_name(code):
    """PROTOCOL_ERROR for 1, ...; the number for a code RFC 9113 does not name."""
    try:
        return h2.errors.ErrorCodes(code).name
    except ValueError:
        return str(code)


GOAWAY = 0x7


@dataclass
class Goaway:
    last_stream_id: int
    error_code: int
    additional_data: bytes


@dataclass
class Stream:
    """What came back on one stream. Quacks like http1.Response for expect.denial."""
    id: int
    headers: list = None            # [(name, value)] of the final response, as received
    informational: list = field(default_factory=list)  # header lists of 1xx responses
    data: bytearray = field(default_factory=bytearray)
    trailers: list = None
    ended: bool = False             # END_STREAM received
    reset: int = None               # error code of an RST_STREAM sluice sent, else None

    @property
    def done(self):
        return self.ended or self.reset is not None

    @property
    def status(self):
        value = self.header(":status")
        return int(value) if value is not None else None

    @property
    def body(self):
        return bytes(self.data)

    def header(self, name):
        values = self.headers_named(name)
        return values[0] if values else None

    def headers_named(self, name):
        return [v for k, v in (self.headers or []) if k.lower() == name.lower()]

    @property
    def sluice_reason(self):
        return self.header("sluice-reason")

    @property
    def proxy_status(self):
        return self.header("proxy-status")

    def describe(self):
        reset = None if self.reset is None else error_name(self.reset)
        return "stream %d: headers %r, %d body bytes %r, ended %s, reset %s" % (
            self.id, self.headers, len(self.data), bytes(self.data[:200]), self.ended, reset)


class H2Tunnel:
    """One CONNECT tunnel to `authority` with TLS (ALPN `alpn`) and, after start(), HTTP/2."""

    def __init__(self, proxy, authority, cafile, alpn=("h2", "http/1.1"), sni=SAME,
                 strict=True, timeout=10):
        self.authority = authority
        self.timeout = timeout
        self.sock, self.connect, _ = connect_tunnel(proxy, authority)
        self.client = "%s:%d" % self.sock.getsockname()
        if self.connect.status != 200:
            self.sock.close()
            raise AssertionError("CONNECT %s: %d %r" % (authority, self.connect.status,
                                                        self.connect.headers))
        host = authority.rsplit(":", 1)[0]
        self.tls = TLSStream(self.sock, host if sni is SAME else sni, cafile, alpn=alpn)
        self.alpn = self.tls.alpn()
        self.peer_names = self.tls.peer_dns_names() if cafile else []
        self.config = h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8",
            validate_outbound_headers=strict, normalize_outbound_headers=strict)
        self.conn = None
        self.streams = {}
        self.remote_settings_seen = False
        self.settings_received = {}  # {setting code: value} from sluice's SETTINGS frames
        self.terminated = None      # the Goaway sluice sent, if any
        self._rx = bytearray()      # received bytes not yet a whole frame
        self.hold_window = False    # True: read DATA but reopen no window until released
        self.hold_streams = set()   # the same, for these streams only
        self._held = []
        self.closed = None          # "eof" or "reset" once the TCP connection ended
        self.pings_acked = set()    # the opaque data of each PING sluice acknowledged
        self._pings = 0

    # --- the connection ------------------------------------------------------------------

    def start(self, conn_window=None):
        """Send the connection preface; fails unless the TLS handshake selected h2.
        `conn_window`: the connection's receive window, if larger than 65,535 bytes (a
        WINDOW_UPDATE on stream 0 right after the preface; the streams' windows stay)."""
        if self.alpn != "h2":
            self.sock.close()
            raise AssertionError("ALPN is not h2: the handshake selected %r" % self.alpn)
        self.conn = h2.connection.H2Connection(config=self.config)
        self.conn.initiate_connection()
        if conn_window is not None and conn_window > 65535:
            self.conn.increment_flow_control_window(conn_window - 65535)
        self._flush()
        return self

    def _flush(self):
        data = self.conn.data_to_send()
        if data:
            self.tls.sendall(data)

    def _pump(self, deadline):
        """Read once (until `deadline` at most) and hand the bytes to h2. False on timeout or
        when the connection is gone."""
        if self.closed:
            return False
        self.sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = self.tls.recv(65536)
        except (socket.timeout, TimeoutError):
            return False
        except (ConnectionResetError, BrokenPipeError):
            self.closed = "reset"
            return False
        if not data:
            self.closed = "eof"
            return False
        try:
            events = self.conn.receive_data(self._frames_for_h2(data))
        except h2.exceptions.ProtocolError as e:
            raise AssertionError("sluice broke HTTP/2 (h2 says %s: %s); streams so far:\n%s"
                                 % (type(e).__name__, e, self.describe())) from e
        for event in events:
            self._on(event)
        self._flush()
        return True

    def _frames_for_h2(self, data):
        """The whole frames received so far, GOAWAY frames taken out and kept in `terminated`:
        h2 closes its side of the connection on a GOAWAY and refuses the frames of the streams
        the GOAWAY lets finish (a graceful shutdown), which this client must read."""
        self._rx += data
        out, pos = bytearray(), 0
        while len(self._rx) - pos >= 9:
            length = int.from_bytes(self._rx[pos:pos + 3], "big")
            end = pos + 9 + length
            if len(self._rx) < end:
                break
            if self._rx[pos + 3] == GOAWAY:
                payload = bytes(self._rx[pos + 9:end])
                self.terminated = Goaway(int.from_bytes(payload[0:4], "big") & 0x7fffffff,
                                         int.from_bytes(payload[4:8], "big"), payload[8:])
            else:
                out += self._rx[pos:end]
            pos = end
        del self._rx[:pos]
        return bytes(out)

    def _stream(self, stream_id):
        return self.streams.setdefault(stream_id, Stream(stream_id))

    def _on(self, event):
        if isinstance(event, h2.events.ResponseReceived):
            self._stream(event.stream_id).headers = list(event.headers)
        elif isinstance(event, h2.events.InformationalResponseReceived):
            self._stream(event.stream_id).informational.append(list(event.headers))
        elif isinstance(event, h2.events.TrailersReceived):
            self._stream(event.stream_id).trailers = list(event.headers)
        elif isinstance(event, h2.events.DataReceived):
            self._stream(event.stream_id).data += event.data
            self._held.append((event.flow_controlled_length, event.stream_id))
            if not self.hold_window:
                self.release_window()
        elif isinstance(event, h2.events.StreamEnded):
            self._stream(event.stream_id).ended = True
        elif isinstance(event, h2.events.StreamReset):
            self._stream(event.stream_id).reset = int(event.error_code)
        elif isinstance(event, h2.events.PingAckReceived):
            self.pings_acked.add(bytes(event.ping_data))
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            self.remote_settings_seen = True
            for code, changed in event.changed_settings.items():
                self.settings_received[int(code)] = changed.new_value

    def release_window(self):
        """Reopen the windows for every DATA byte read so far (WINDOW_UPDATE, as h2 sees fit:
        consumed at once), but those of the streams in `hold_streams`."""
        held, self._held = self._held, []
        for length, stream_id in held:
            if stream_id in self.hold_streams:
                self._held.append((length, stream_id))
                continue
            try:
                self.conn.acknowledge_received_data(length, stream_id)
            except h2.exceptions.StreamClosedError:
                pass
        self._flush()

    def describe(self):
        lines = [s.describe() for s in self.streams.values()]
        if self.terminated is not None:
            lines.append("GOAWAY %s last_stream_id=%s %r" % (
                error_name(self.terminated.error_code), self.terminated.last_stream_id,
                self.terminated.additional_data))
        if self.closed:
            lines.append("connection closed (%s)" % self.closed)
        return "\n".join(lines) or "(nothing received)"

    # --- streams -------------------------------------------------------------------------

    def request(self, method, path, authority=None, scheme="https", headers=(), body=None,
                end=True, raw=None):
        """Open a stream: the pseudo-header fields (`authority` defaults to the CONNECT's),
        then `headers`; or exactly the header list `raw`. `body` (bytes) is sent as DATA,
        within the flow-control windows; `end=False` leaves the stream open."""
        stream_id = self.conn.get_next_available_stream_id()
        block = raw if raw is not None else [
            (":method", method), (":scheme", scheme),
            (":authority", self.authority if authority is None else authority),
            (":path", path)] + list(headers)
        self.conn.send_headers(stream_id, block, end_stream=end and not body)
        self._flush()
        self._stream(stream_id)
        if body:
            self.send_body(stream_id, body, end)
        return stream_id

    def extended_connect(self, path, protocol="websocket", authority=None, headers=()):
        """Open an RFC 8441 extended CONNECT stream (`:method CONNECT`, `:protocol`, `:scheme
        https`, `:authority`, `:path`, then `headers`), left open for DATA both ways
        (send_body(..., end=False)). Reads sluice's SETTINGS first: a client may send
        `:protocol` only once the server has advertised SETTINGS_ENABLE_CONNECT_PROTOCOL
        (RFC 8441 §3; h2 4.1 does not check it, `settings_received` has what came)."""
        self.read_until(lambda: self.remote_settings_seen, "sluice's SETTINGS")
        return self.request(None, None, end=False, raw=[
            (":method", "CONNECT"), (":protocol", protocol), (":scheme", "https"),
            (":authority", self.authority if authority is None else authority),
            (":path", path)] + list(headers))

    def send_body(self, stream_id, data, end=True):
        """DATA frames of at most the peer's frame size and only within the windows it
        granted, reading its WINDOW_UPDATEs meanwhile; stops if the stream is closed."""
        deadline = time.monotonic() + self.timeout
        view = memoryview(data)
        while view:
            try:
                room = min(self.conn.local_flow_control_window(stream_id),
                           self.conn.max_outbound_frame_size)
            except h2.exceptions.StreamClosedError:
                return
            if room <= 0:
                if self._stream(stream_id).done:
                    return  # answered or reset before the whole body went
                if not self._pump(deadline) and (self.closed or time.monotonic() >= deadline):
                    raise AssertionError("stream %d: %d body bytes never got window to go:\n%s"
                                         % (stream_id, len(view), self.describe()))
                continue
            try:
                self.conn.send_data(stream_id, bytes(view[:room]))
            except h2.exceptions.StreamClosedError:
                return
            view = view[room:]
            self._flush()
        if end:
            try:
                self.conn.end_stream(stream_id)
            except h2.exceptions.StreamClosedError:
                return
            self._flush()

    def send_trailers(self, stream_id, headers):
        """The trailer section `headers` (a HEADERS frame that ends the stream)."""
        self.conn.send_headers(stream_id, list(headers), end_stream=True)
        self._flush()

    def ping(self):
        """A PING, read until sluice acknowledges it: sluice has processed every frame sent
        before it (a barrier between two writes that must reach sluice in separate reads)."""
        self._pings += 1
        data = self._pings.to_bytes(8, "big")
        self.conn.ping(data)
        self._flush()
        self.read_until(lambda: data in self.pings_acked, "the PING's acknowledgement")

    def cancel(self, stream_id, error_code=0x8):
        """RST_STREAM (CANCEL by default): the client gives up on a stream."""
        self.conn.reset_stream(stream_id, error_code)
        self._flush()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def wait(self, *stream_ids, timeout=None):
        """Read until each stream ended or was reset; returns their Streams, in order. Fails,
        with what arrived, if they are not all done by the deadline."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not all(self._stream(s).done for s in stream_ids):
            if not self._pump(deadline) and (self.closed or time.monotonic() >= deadline):
                raise AssertionError("stream(s) %s not done (%s):\n%s" % (
                    [s for s in stream_ids if not self._stream(s).done],
                    "connection closed: %s" % self.closed if self.closed else "timed out",
                    self.describe()))
        return [self.streams[s] for s in stream_ids]

    def read_until(self, predicate, what, timeout=None):
        """Read until predicate() holds; fails, with what arrived, at the deadline."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not predicate():
            if not self._pump(deadline) and (self.closed or time.monotonic() >= deadline):
                raise AssertionError("%s: not so (%s):\n%s" % (
                    what, "connection closed: %s" % self.closed if self.closed else "timed out",
                    self.describe()))

    def wait_answer(self, stream_id, timeout=None):
        """Read until the stream has any answer: a 1xx, a final response head, or its end
        (e.g. to see whether `expect: 100-continue` is answered before sending the body)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        s = self._stream(stream_id)
        while not (s.informational or s.headers is not None or s.done):
            if not self._pump(deadline) and (self.closed or time.monotonic() >= deadline):
                raise AssertionError("stream %d: no answer (%s):\n%s" % (
                    stream_id, "connection closed: %s" % self.closed if self.closed
                    else "timed out", self.describe()))
        return s

    def one(self, *args, **kw):
        """request(...) then wait for it."""
        return self.wait(self.request(*args, **kw))[0]

    def close(self):
        try:
            if self.conn is not None and not self.closed:
                self.conn.close_connection()
                self._flush()
        except (OSError, h2.exceptions.ProtocolError):
            pass
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
