"""HTTP/2 floods (docs/wire.md#http2): what one hostile sandbox can make sluice do
on one HTTP/2 connection. Each flood is sent raw, frame by frame, after a valid preface and
without reading: rapid reset (CVE-2023-44487), PING and SETTINGS floods (acknowledgements
queued for a client that never reads), a CONTINUATION flood (CVE-2024-27316 and kin), empty
DATA frames, a SETTINGS frame of too many entries, a header list over `max_header_bytes`, an
HPACK bomb. Each flood ends the connection with GOAWAY ENHANCE_YOUR_CALM and a record of the
tunnel saying which flood (`error`, docs/audit.md#errors); a header list too large is a 431 on
its stream. sluice's memory stays bounded, and another connection of the same sandbox is served
meanwhile."""
import struct
import time

import hpack
import pytest

from admin_client import Admin, with_admin
from gateway import Gateway, Runner
from h2client import H2Tunnel
from oracles import cdn_hits, marker

ENHANCE_YOUR_CALM = 0xB
HEADERS, DATA, RST_STREAM, SETTINGS, PING, CONTINUATION = 0x1, 0x0, 0x3, 0x4, 0x6, 0x9
END_STREAM, END_HEADERS = 0x1, 0x4


@pytest.fixture(scope="module")
def gw(sluice_binary, bed):
    """sbx1 with the standard bed policy and the admin endpoint (the flood counter)."""
    runner = Runner(sluice_binary, bed)
    try:
        g = Gateway(runner.start(edit=with_admin()), bed)
        g.admin = Admin(g.sluice)
        yield g
    finally:
        runner.stop_all()


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


# Each flood, and the `error` its tunnel's record names.
FLOODS = {
    "rapid_reset": "h2_rapid_reset",
    "ping": "h2_control_frame_flood",
    "settings": "h2_control_frame_flood",  # acknowledgements queued for a client not reading
    "settings_entries": "h2_settings_flood",
    "continuation": "h2_continuation_flood",
    "empty_data": "h2_empty_data_flood",
}


def tunnel_record(gw, mark, t):
    """The record of the tunnel `t` (its connection's own, with `error`), once written. (The
    streams the client reset have theirs, with error client_reset: docs/audit.md#errors.)"""
    [rec] = gw.audit.wait(mark, lambda r: r["client"] == t.client and
                          r["error"] not in (None, "client_reset"))
    return rec


@pytest.mark.parametrize("kind", sorted(FLOODS))
def test_flood_ends_the_connection_with_enhance_your_calm(gw, kind):
    error = FLOODS[kind]
    before = gw.admin.scrape().value("sluice_connection_errors_total", 0, sandbox="sbx1",
                                     error=error)
    mark = gw.audit.mark()
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
    elif kind == "settings_entries":
        payload = frame(SETTINGS, 0, 0, struct.pack(">HI", 0x3, 100) * 40)
    elif kind == "continuation":
        payload = frame(HEADERS, 0, 1, block) + frame(CONTINUATION, 0, 1, b"") * 20000
    else:
        payload = frame(HEADERS, END_HEADERS, 1, get_block(t, "/upload/x")) + \
            frame(DATA, 0, 1, b"") * 20000
    flood_and_read(t, payload)
    t.close()
    calmed(t)
    rec = tunnel_record(gw, mark, t)
    assert (rec["error"], rec["decision"], rec["reason"], rec["status"], rec["proto"]) == \
        (error, "deny", "bad_request", None, "h2"), rec
    assert (rec["method"], rec["url"], rec["sni"]) == \
        ("CONNECT", "https://" + t.authority, "allowed.test"), rec
    gw.admin.wait_for(
        lambda s: None if s.value("sluice_connection_errors_total", 0, sandbox="sbx1",
                                  error=error) == before + 1 else s.series(
                                      "sluice_connection_errors_total"),
        "the flood counted once")
    still_serving(gw)


# Connection errors of RFC 9113 that are no flood: GOAWAY's code, and the record's `error`.
CONNECTION_ERRORS = {
    "data_on_stream_0": (0x1, "h2_protocol_error"),      # PROTOCOL_ERROR (RFC 9113 §6.1)
    "bad_hpack_index": (0x9, "h2_compression_error"),    # COMPRESSION_ERROR (§4.3)
}


@pytest.mark.parametrize("kind", sorted(CONNECTION_ERRORS))
def test_connection_error_ends_the_connection_on_record(gw, kind):
    code, error = CONNECTION_ERRORS[kind]
    mark = gw.audit.mark()
    t = open_raw(gw)
    if kind == "data_on_stream_0":
        payload = frame(DATA, 0, 0, b"x")
    else:  # an indexed field far past both tables
        payload = frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\xff\xff\x7f")
    flood_and_read(t, payload)
    t.close()
    assert t.terminated is not None and t.terminated.error_code == code, t.describe()
    rec = tunnel_record(gw, mark, t)
    assert (rec["error"], rec["decision"], rec["reason"], rec["status"], rec["proto"]) == \
        (error, "deny", "bad_request", None, "h2"), rec
    still_serving(gw)


def test_hpack_bomb_is_refused_on_its_stream_and_stays_small(gw, bed):
    """An HPACK bomb: one 4,000-byte field, put in the dynamic table once and then named by
    its index (one byte) 4,000 times: 16 MB of header list from a 7 KB block (h2's encoder
    does exactly that with a repeated field). It counts against `max_header_bytes` as it
    decodes: 431 header_too_large on its stream, nothing forwarded, the connection goes on."""
    bomb_fields = [("x-bombs", "b" * 4000)] * 4000
    assert len(hpack.Encoder().encode(bomb_fields)) < 8192  # what makes it a bomb
    m, mark = marker(), gw.audit.mark()
    with open_raw(gw) as t:
        bomb = t.one("GET", "/whoami.txt?m=" + m, headers=bomb_fields)
        ok = t.one("GET", "/whoami.txt")
    assert (bomb.status, bomb.sluice_reason) == (431, "header_too_large"), bomb.describe()
    assert (ok.status, ok.body) == (200, b"allowed.test\n"), ok.describe()
    assert cdn_hits(bed, m) == []
    recs = gw.audit.wait(mark, lambda r: r["client"] == t.client, count=2)
    assert sorted((r["decision"], r["reason"], r["status"]) for r in recs) == \
        [("allow", None, 200), ("deny", "header_too_large", 431)], recs
