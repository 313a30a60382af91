"""Hostile HTTP/2 clients and the peers they need, for the bounds of issue 33: what one sandbox
speaking HTTP/2 can make sluice hold (test_h2_bounds.py; bench/h2_bounds prints the figures).

- RawH2: an HTTP/2 client on a CONNECT tunnel that writes frames by hand (HPACK literals
  without indexing or Huffman, so a header block costs nothing to build) and reads sluice's
  frames itself: every RST_STREAM and GOAWAY counted, each response head decoded (hpack), DATA
  counted and, only when asked (`replenish`), given its window back. h2client.H2Tunnel is the
  strict client; this one is for floods of thousands of streams sent in batches.
- WildcardH2Origin: an nginx of its own on 127.0.0.25 (a port of its own) with `ssl http2`
  and a certificate for every name under `*.h2flood.test` (the bed's test CA): the h2 origin
  of a wildcard rule, since the bed's h2.test holds a certificate for h2.test alone.
- FloodDnsmasq: the bed's dnsmasq with one more tree, h2flood.test -> 127.0.0.25.
- silent_tls_origin: fault_origin.FaultOrigin on 127.0.0.24 as probe.test (TLS completes,
  `/stall/` is read and never answered).
- What sluice holds: its RSS once settled, its descriptors (soak_bed.py has their kinds and
  sluice's sockets to given origins).
"""
import os
import socket
import struct
import subprocess
import time

import hpack

from fault_origin import FaultOrigin
import nginx_conf
from netutil import DIE_WITH_US, clean_env, free_port, read_text, stop_process, wait_port
from peers import NGINX, Dnsmasq
from soak_bed import rss_kib
from tlsraw import TLSStream, connect_tunnel

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
PROTOCOL_ERROR, REFUSED_STREAM, CANCEL, ENHANCE_YOUR_CALM = 0x1, 0x7, 0x8, 0xB
SETTINGS_ENABLE_PUSH, SETTINGS_INITIAL_WINDOW_SIZE = 0x2, 0x4

FRAME_NAMES = {DATA: "DATA", HEADERS: "HEADERS", PRIORITY: "PRIORITY", RST_STREAM: "RST_STREAM",
               SETTINGS: "SETTINGS", PUSH_PROMISE: "PUSH_PROMISE", PING: "PING",
               GOAWAY: "GOAWAY", WINDOW_UPDATE: "WINDOW_UPDATE", CONTINUATION: "CONTINUATION"}

H2_ADDRESS = "127.0.0.25"
H2FLOOD_ZONE = "h2flood.test"
PROBE_ADDRESS = "127.0.0.24"  # probe.test in the bed's zone


def frame(kind, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream_id) + payload


def _hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(name, value):
    """One HPACK field, literal without indexing, new name, no Huffman (RFC 7541 §6.2.2)."""
    n, v = name.encode("latin-1"), value.encode("latin-1")
    return b"\x00" + _hpack_int(len(n), 7) + n + _hpack_int(len(v), 7) + v


def header_block(fields):
    return b"".join(literal(n, v) for n, v in fields)


def large_file(bed, docroot, size):
    """A file of `size` bytes (sparse: zeros but its last 64 KiB) in a document root of the
    bed's nginx, as /bounds/large-SIZE.bin; returns that url path. Made once per root and
    size, and removed with the bed."""
    path = bed.content.path(docroot, "/bounds/large-%d.bin" % size)
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "wb") as f:
            f.truncate(size - 65536)
            f.seek(size - 65536)
            f.write(os.urandom(65536))
        os.rename(path + ".tmp", path)
    return "/bounds/large-%d.bin" % size


class RawH2:
    """CONNECT `authority`, TLS with ALPN h2 only (the sandbox CA verified), the client preface
    and a SETTINGS frame (push off; `stream_window` as SETTINGS_INITIAL_WINDOW_SIZE when given)
    written by hand. `replenish`: give back the window of every DATA byte read (WINDOW_UPDATE on
    the stream and the connection), else never send one."""

    def __init__(self, proxy, authority, cafile, stream_window=None, replenish=False,
                 timeout=10):
        self.authority = authority
        self.timeout = timeout  # for a write: sluice not reading for this long ends the client
        self.sock, answer, _ = connect_tunnel(proxy, authority, timeout=timeout)
        if answer.status != 200:
            self.sock.close()
            raise AssertionError("CONNECT %s: %d %r" % (authority, answer.status,
                                                        answer.headers))
        self.client = "%s:%d" % self.sock.getsockname()
        self.tls = TLSStream(self.sock, authority.rsplit(":", 1)[0], cafile, alpn=("h2",))
        if self.tls.alpn() != "h2":
            self.sock.close()
            raise AssertionError("ALPN %r, not h2" % self.tls.alpn())
        self.replenish = replenish
        self.decoder = hpack.Decoder()
        self.decoder.max_header_list_size = 1 << 20
        self.next_id = 1
        self.statuses = {}      # stream id -> :status of its final head
        self.ended = set()      # streams sluice ended (END_STREAM)
        self.resets = {}        # stream id -> RST_STREAM code from sluice
        self.data = {}          # stream id -> DATA bytes received
        self.goaway = None      # (last_stream_id, code, debug) once sluice sent GOAWAY
        self.goaway_at = None   # time.monotonic() then
        self.closed = None      # "eof", "reset", or "stalled" (a write not taken in time)
        self.frames_in = {}     # frame type (number) -> count received
        self.frames_out = {}    # frame type (number) -> count sent
        self._rx = bytearray()
        self._block = None      # (stream id, fragments, END_STREAM) of an open header block
        settings = struct.pack(">HI", SETTINGS_ENABLE_PUSH, 0)
        if stream_window is not None:
            settings += struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE, stream_window)
        self.send(PREFACE + frame(SETTINGS, 0, 0, settings))

    # --- writing -------------------------------------------------------------------------------

    def send(self, data):
        """Write bytes (whole frames); False once the connection is gone. A write sluice does
        not take within `timeout` ends this client ("stalled": the frames may be cut)."""
        if self.closed:
            return False
        self._count_out(data)
        self.sock.settimeout(self.timeout)
        try:
            self.tls.sendall(data)
            return True
        except (socket.timeout, TimeoutError):
            self.closed = "stalled"
        except OSError:  # reset, broken pipe
            self.closed = "reset"
        return False

    def _count_out(self, data):
        pos = len(PREFACE) if data.startswith(PREFACE) else 0
        while pos + 9 <= len(data):
            length = int.from_bytes(data[pos:pos + 3], "big")
            self.frames_out[data[pos + 3]] = self.frames_out.get(data[pos + 3], 0) + 1
            pos += 9 + length

    def stream_frames(self, method, path, fields=(), body=None, end=True, stream_id=None):
        """The frames of one request (HEADERS, and DATA if `body` is given), as bytes; the
        stream id is the next one (or `stream_id`)."""
        sid = stream_id if stream_id is not None else self.take_id()
        block = header_block([(":method", method), (":scheme", "https"),
                              (":authority", self.authority), (":path", path)] + list(fields))
        no_body_end = END_STREAM if end and body is None else 0
        out = frame(HEADERS, END_HEADERS | no_body_end, sid, block)
        if body is not None:
            out += frame(DATA, END_STREAM if end else 0, sid, body)
        return out

    def take_id(self):
        sid = self.next_id
        self.next_id += 2
        return sid

    def ping(self, opaque=b"sluice33"):
        return self.send(frame(PING, 0, 0, opaque))

    # --- reading -------------------------------------------------------------------------------

    def pump(self, timeout):
        """Read what arrives within `timeout` seconds (at least one read); False when nothing
        came or the connection is gone."""
        if self.closed:
            return False
        self.sock.settimeout(max(0.001, timeout))
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
        self._rx += data
        self._frames()
        return True

    def read_for(self, seconds, until=None):
        """Read for `seconds`, or until `until()` holds or the connection ends."""
        deadline = time.monotonic() + seconds
        while not self.closed and (until is None or not until()):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.pump(min(left, 0.2))

    def _frames(self):
        replies = bytearray()
        pos = 0
        while len(self._rx) - pos >= 9:
            length = int.from_bytes(self._rx[pos:pos + 3], "big")
            end = pos + 9 + length
            if len(self._rx) < end:
                break
            kind, flags = self._rx[pos + 3], self._rx[pos + 4]
            sid = int.from_bytes(self._rx[pos + 5:pos + 9], "big") & 0x7FFFFFFF
            payload = bytes(self._rx[pos + 9:end])
            pos = end
            self.frames_in[kind] = self.frames_in.get(kind, 0) + 1
            if kind == SETTINGS and not flags & ACK:
                replies += frame(SETTINGS, ACK, 0)
            elif kind == PING and not flags & ACK:
                replies += frame(PING, ACK, 0, payload)
            elif kind == GOAWAY and self.goaway is None:
                self.goaway = (int.from_bytes(payload[0:4], "big") & 0x7FFFFFFF,
                               int.from_bytes(payload[4:8], "big"), payload[8:])
                self.goaway_at = time.monotonic()
            elif kind == RST_STREAM:
                self.resets[sid] = int.from_bytes(payload[0:4], "big")
            elif kind in (HEADERS, CONTINUATION):
                if kind == HEADERS:
                    body = payload
                    if flags & 0x8:  # PADDED
                        body = body[1:len(body) - body[0]]
                    if flags & 0x20:  # PRIORITY
                        body = body[5:]
                    self._block = (sid, [body], flags & END_STREAM)
                else:
                    self._block[1].append(payload)
                if flags & END_HEADERS:
                    block_sid, pieces, ends = self._block
                    self._block = None
                    fields = self.decoder.decode(b"".join(pieces), raw=False)
                    status = dict(fields).get(":status")
                    if status is not None and int(status) >= 200:
                        self.statuses.setdefault(block_sid, int(status))
                    if ends:
                        self.ended.add(block_sid)
            elif kind == DATA:
                body = payload
                if flags & 0x8:
                    body = body[1:len(body) - body[0]]
                self.data[sid] = self.data.get(sid, 0) + len(body)
                if flags & END_STREAM:
                    self.ended.add(sid)
                if self.replenish and length:
                    replies += frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", length))
                    if not flags & END_STREAM:
                        replies += frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", length))
        del self._rx[:pos]
        if replies:
            self.send(bytes(replies))

    def done(self, sid):
        return sid in self.ended or sid in self.resets

    def describe(self):
        codes = {}
        for code in self.resets.values():
            codes[code] = codes.get(code, 0) + 1
        statuses = {}
        for status in self.statuses.values():
            statuses[status] = statuses.get(status, 0) + 1
        return ("%d streams opened; heads by status %r; resets by code %r; GOAWAY %r; "
                "closed %r; frames in %r" % ((self.next_id - 1) // 2, statuses, codes,
                                             self.goaway, self.closed, self.frames_in))

    def close(self):
        self.sock.close()


# --- peers -------------------------------------------------------------------------------------

class FloodDnsmasq(Dnsmasq):
    """The bed's zone and trees, and every name under h2flood.test -> 127.0.0.25."""
    TREES = dict(Dnsmasq.TREES, **{H2FLOOD_ZONE: H2_ADDRESS})


def start_flood_dnsmasq(directory):
    """A FloodDnsmasq on a free UDP port of 127.0.0.53 (as conftest starts the bed's)."""
    for attempt in range(3):
        dns = FloodDnsmasq(directory, free_port((Dnsmasq.ADDRESS,), kind=socket.SOCK_DGRAM))
        try:
            dns.start()
            return dns
        except (RuntimeError, TimeoutError):
            dns.stop()
            if attempt == 2:
                raise


def _cert(bed, attr, stem, cn, names):
    if not hasattr(bed, attr):  # issued once per bed
        setattr(bed, attr, bed.pki.test_ca.issue(stem, cn, dns=names))
    return getattr(bed, attr)


class WildcardH2Origin:
    """nginx on 127.0.0.25:`port` (`ssl http2`, default server) for every name under
    h2flood.test, serving h2.test's document root; access log `h2flood.log` in `directory`."""

    def __init__(self, bed, directory):
        self.dir = directory
        os.makedirs(os.path.join(directory, "tmp"), exist_ok=True)
        cert = _cert(bed, "h2flood_cert", "h2flood", "origin." + H2FLOOD_ZONE,
                     ["*." + H2FLOOD_ZONE])
        self.port = free_port((H2_ADDRESS,))
        server = nginx_conf._server(directory, ["_"],
                                    ["%s:%d ssl http2 default_server" % (H2_ADDRESS, self.port)],
                                    cert, bed.content.path("h2.test"), "h2flood")
        self.conf = os.path.join(directory, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(nginx_conf.wrap(directory, [server], os.geteuid() == 0))
        self.proc = None

    def start(self):
        with open(os.path.join(self.dir, "stderr.log"), "wb") as err:
            self.proc = subprocess.Popen(
                DIE_WITH_US + [NGINX, "-p", self.dir, "-c", self.conf,
                               "-e", os.path.join(self.dir, "error.log")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                env=clean_env())
        try:
            wait_port(H2_ADDRESS, self.port, timeout=20, proc=self.proc, what="nginx (h2flood)")
        except Exception:
            self.stop()
            raise RuntimeError("the h2flood nginx did not start:\n" +
                               read_text(os.path.join(self.dir, "error.log"))[-3000:])
        return self

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None


def silent_tls_origin(bed):
    """An origin for probe.test on 127.0.0.24 whose TLS handshake completes and whose /stall/
    requests are read and never answered (fault_origin.FaultOrigin); started."""
    cert = _cert(bed, "probe_cert", "probe", "probe.test", ["probe.test"])
    return FaultOrigin(PROBE_ADDRESS, cert).start()


# --- what sluice holds -------------------------------------------------------------------------

def fd_total(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def settled_rss(pid, window=2.0, tolerance_kib=512, timeout=20.0, interval=0.2):
    """sluice's VmRSS (KiB) once it has moved less than `tolerance_kib` over `window` seconds
    (or after `timeout`): (KiB, seconds waited, settled?)."""
    start = time.monotonic()
    samples = []
    while True:
        now = time.monotonic()
        samples.append((now, rss_kib(pid)))
        recent = [kib for t, kib in samples if t >= now - window]
        if now - start >= window and max(recent) - min(recent) <= tolerance_kib:
            return samples[-1][1], now - start, True
        if now - start >= timeout:
            return samples[-1][1], now - start, False
        time.sleep(interval)  # polling interval
