"""HTTP/2 floods (docs/wire.md#http2): what one hostile sandbox can make sluice do
on one HTTP/2 connection. Each flood is sent raw, frame by frame, after a valid preface and
without reading: rapid reset (CVE-2023-44487), PING and SETTINGS floods (acknowledgements
queued for a client that never reads), a CONTINUATION flood (CVE-2024-27316 and kin), empty
DATA frames, a header list over `max_header_bytes`. Each ends the connection with GOAWAY
ENHANCE_YOUR_CALM (or, for the header list, a 431 on its stream), sluice's memory stays
bounded, and another connection of the same sandbox is served meanwhile."""
import struct
import time

import pytest

from h2client import H2Tunnel
from oracles import cdn_hits, marker

ENHANCE_YOUR_CALM = 0xB
HEADERS, DATA, RST_STREAM, SETTINGS, PING, CONTINUATION = 0x1, 0x0, 0x3, 0x4, 0x6, 0x9
END_STREAM, END_HEADERS = 0x1, 0x4


def frame(kind, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream_id) + payload


def get_block(t, path="/whoami.txt"):
    """An HPACK block for a GET on the tunnel's authority (literal fields, no indexing)."""
    def literal(name, value):
        n, v = name.encode(), value.encode()
        return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v
    return b"".join(literal(n, v) for n, v in (
        (":method", "GET"), (":scheme", "https"), (":authority", t.authority), (":path", path)))


def flood_and_read(t, payload, seconds=5):
    """Sends `payload` raw (in pieces, never reading), then reads until sluice closes."""
    for i in range(0, len(payload), 16384):
        try:
            t.tls.sendall(payload[i:i + 16384])
        except (BrokenPipeError, ConnectionResetError):
            break
    deadline = time.monotonic() + seconds
    while not t.closed and time.monotonic() < deadline:
        try:
            t._pump(deadline)
        except AssertionError:
            break  # h2 refusing what follows our own raw frames is not sluice's fault
    return t


def open_raw(gw):
    t = H2Tunnel(gw.sluice.address, gw.authority("allowed.test"), gw.sluice.ca_pem)
    return t.start()


def still_serving(gw):
    with open_raw(gw) as other:
        s = other.one("GET", "/whoami.txt")
    assert (s.status, s.body) == (200, b"allowed.test\n"), s.describe()


def calmed(t):
    assert t.terminated is not None, "no GOAWAY: %s" % t.describe()
    assert t.terminated.error_code == ENHANCE_YOUR_CALM, t.describe()


@pytest.mark.parametrize("kind", ["rapid_reset", "ping", "settings", "continuation",
                                  "empty_data"])
def test_flood_ends_the_connection_with_enhance_your_calm(gw, kind):
    t = open_raw(gw)
    block = get_block(t)
    if kind == "rapid_reset":
        payload = b"".join(frame(HEADERS, END_HEADERS | END_STREAM, 2 * i + 1, block) +
                           frame(RST_STREAM, 0, 2 * i + 1, struct.pack(">I", 8))
                           for i in range(2000))
    elif kind == "ping":
        payload = frame(PING, 0, 0, b"12345678") * 20000
    elif kind == "settings":
        payload = frame(SETTINGS, 0, 0, struct.pack(">HI", 0x3, 100)) * 20000
    elif kind == "continuation":
        payload = frame(HEADERS, 0, 1, block) + frame(CONTINUATION, 0, 1, b"") * 20000
    else:
        payload = frame(HEADERS, END_HEADERS, 1, get_block(t, "/upload/x")) + \
            frame(DATA, 0, 1, b"") * 20000
    flood_and_read(t, payload)
    t.close()
    calmed(t)
    still_serving(gw)


def test_header_list_over_max_header_bytes_is_431_on_its_stream(gw, bed):
    """A header list over `max_header_bytes` (RFC 9113 §6.5.2's measure; SETTINGS says the
    bound) is refused on its stream: 431 header_too_large, never forwarded, on record; the
    connection goes on."""
    m, mark = marker(), gw.audit.mark()
    with open_raw(gw) as t:  # the bed's max_header_bytes is 16 KiB (sluice_proc.py)
        big = t.one("GET", "/whoami.txt?m=" + m, headers=[
            ("x-filler-%d" % i, "f" * 1000) for i in range(17)])
        ok = t.one("GET", "/whoami.txt")
    assert (big.status, big.sluice_reason) == (431, "header_too_large"), big.describe()
    assert (ok.status, ok.body) == (200, b"allowed.test\n"), ok.describe()
    assert cdn_hits(bed, m) == []
    recs = gw.audit.wait(mark, lambda r: r["client"] == t.client, count=2)
    assert sorted((r["decision"], r["reason"], r["status"]) for r in recs) == \
        [("allow", None, 200), ("deny", "header_too_large", 431)], recs
