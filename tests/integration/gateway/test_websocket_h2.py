"""WebSocket over HTTP/2 from the sandbox (RFC 8441; docs/wire.md#websocket, "Over HTTP/2", and
docs/wire.md#http2): sluice advertises SETTINGS_ENABLE_CONNECT_PROTOCOL, and an extended CONNECT
stream (`:protocol websocket`) is the same upgrade request as the HTTP/1.1 form: decided with
method GET and its path, allowed only by a rule with `websocket: true`, asked of the origin in
HTTP/1.1 with a Sec-WebSocket-Key sluice makes, answered `:status 200` on a stream that stays
open, then the WebSocket's frames both ways as the stream's DATA, while the connection's other
streams go on; one record per session (status 101, `proto: "h2"`, `upstream_proto:
"http/1.1"`, the frame bytes relayed each way).

The client is python3-h2 on a raw tunnel (h2client.py, `extended_connect`) writing its frames by
hand (wsframe.py: masked, as a client sends them, so every byte relayed is counted); the origin
is ws_origin.py (python3-websockets) with the subprotocol `chat`, and a second one whose TLS
selects h2 before http/1.1. Oracles: the origins' logs (every request for a feed read, with
its headers, logged before the handshake is checked, so a request that reached an origin is
there even if it was no upgrade; the ALPN of each session; the close each client sent), the
audit log, and the admin endpoint's sluice_websocket_sessions_active."""
import base64
import time

import pytest

import expect
import wsframe
from admin_client import Admin, with_admin
from gateway import Gateway, Runner
from h2client import H2Tunnel
from netutil import wait_until
from oracles import cdn_hits, marker
from sluice_proc import bed_rules
from ws_origin import ADDRESS, NAME, WsOrigin

ENABLE_CONNECT_PROTOCOL = 0x8  # RFC 8441 §3
CANCEL = 0x8
FEEDS = ["/feed/echo", "/feed/push", "/feed/close", "/feed/forged", "/feed/unkeyed",
         "/feed/declined"]


@pytest.fixture(scope="module")
def origin(bed):
    """ws.test, HTTP/1.1 only (it also answers the plain GETs of these tests), selecting the
    subprotocol `chat` when offered."""
    server = WsOrigin(bed.pki, subprotocols=["chat"])
    yield server
    server.close()


@pytest.fixture(scope="module")
def h2origin(bed):
    """ws.test on another port, whose TLS selects h2 before http/1.1 for a client that offers
    both (it speaks no h2: sluice must offer it only http/1.1 for an upgrade)."""
    server = WsOrigin(bed.pki, alpn=["h2", "http/1.1"], subprotocols=["chat"])
    yield server
    server.close()


@pytest.fixture(scope="module")
def wsgw(sluice_binary, bed, origin, h2origin):
    """sluice with the bed's rules, the admin endpoint, and two rules for ws.test (both
    origins' ports): its three feeds with `websocket: true` (segment-wise prefixes: /feed/echo
    matches /feed/echo?m=1, not /feed/echoes, which the origin would serve as an echo), and the
    rest of the host without."""
    ports = [origin.port, h2origin.port]
    rules = bed_rules(bed.tls_port, bed.plain_port) + [
        {"name": "ws-feed", "hosts": [NAME], "ports": ports, "paths": FEEDS,
         "ips": [ADDRESS + "/32"], "websocket": True},
        {"name": "ws-rest", "hosts": [NAME], "ports": ports, "ips": [ADDRESS + "/32"]},
    ]
    runner = Runner(sluice_binary, bed)
    try:
        g = Gateway(runner.start(rules=rules, edit=with_admin()), bed)
        g.admin = Admin(g.sluice)
        yield g
    finally:
        runner.stop_all()


def open_h2(gw, origin):
    """An h2 connection on a CONNECT tunnel to ws.test (ALPN must be h2)."""
    return H2Tunnel(gw.sluice.address, "%s:%d" % (NAME, origin.port), gw.sluice.ca_pem).start()


def still_open(tunnel):
    assert tunnel.terminated is None and tunnel.closed is None, \
        "the connection ended:\n" + tunnel.describe()


class Session:
    """One WebSocket on an extended CONNECT stream: the client's frames go as DATA (`sent`
    counts their bytes), the origin's are parsed from the stream's DATA."""

    def __init__(self, t, path, protocols=(), extensions=None, protocol="websocket"):
        headers = [("sec-websocket-version", "13")]
        if protocols:
            headers.append(("sec-websocket-protocol", ", ".join(protocols)))
        if extensions:
            headers.append(("sec-websocket-extensions", extensions))
        self.t, self.path, self.sent = t, path, 0
        self.id = t.extended_connect(path, protocol=protocol, headers=headers)
        self.stream = t.streams[self.id]

    def head(self):
        """The answer's head (or the stream's end)."""
        return self.t.wait_answer(self.id)

    def send(self, data, end=False):
        self.sent += len(data)
        self.t.send_body(self.id, data, end=end)

    @property
    def frames(self):
        return wsframe.parse(self.stream.body)[0]

    def read_frames(self, count, what):
        self.t.read_until(lambda: len(self.frames) >= count or self.stream.done, what)
        frames = self.frames
        assert len(frames) >= count, "%s: %d frame(s) %r, then the stream ended:\n%s" % (
            what, len(frames), frames, self.t.describe())
        return frames[:count]

    def echo(self, message):
        n = len(self.frames)
        self.send(wsframe.text(message))
        return self.read_frames(n + 1, "the echo of %r" % message[:20])[n].text

    def finish(self, code=1000, reason="done"):
        """The closing handshake as a client makes it: its close frame; the origin's close
        frame (RFC 6455 §5.5.1: the same code), after which the origin closes and sluice
        ends the stream (END_STREAM); then the client's END_STREAM."""
        n = len(self.frames)
        self.send(wsframe.close(code, reason))
        closing = self.read_frames(n + 1, "the origin's close frame")[n]
        assert (closing.opcode, closing.close_code) == (wsframe.CLOSE, code), closing
        self.ended_by_origin()
        self.send(b"", end=True)

    def ended_by_origin(self):
        self.t.read_until(lambda: self.stream.done, "the origin's close to end the stream")
        assert self.stream.ended, "the stream was reset, not ended: " + self.stream.describe()


def accepted(s, protocol=None):
    """The origin's 101 as an h2 client gets it: `:status 200`, the stream left open, no field
    of the HTTP/1.1 handshake (upgrade, connection, sec-websocket-accept), and the subprotocol
    the origin chose, if any."""
    assert (s.status, s.done) == (200, False), s.describe()
    names = {k.lower() for k, _ in s.headers}
    assert not names & {"upgrade", "connection", "sec-websocket-accept"}, s.headers
    assert s.headers_named("sec-websocket-protocol") == ([protocol] if protocol else []), \
        s.headers


def origin_request(origin, path):
    """The one request for `path` the origin read; it asked for the upgrade in HTTP/1.1 terms
    with sluice's own key (16 random bytes, base64: RFC 6455 §4.1) and version 13."""
    hits = [h for p, h in origin.handshakes if p == path]
    assert len(hits) == 1, "the origin read %d request(s) for %s: %r" % (len(hits), path, hits)
    h = hits[0]
    assert (h.get("upgrade"), h.get("connection")) == ("websocket", "Upgrade"), h
    assert len(base64.b64decode(h.get("sec-websocket-key", ""), validate=True)) == 16, h
    assert h.get("sec-websocket-version") == "13", h
    assert h.get("host") == "%s:%d" % (NAME, origin.port), h
    assert not [k for k in h if k.startswith(":")], h
    return h


def refused(stream, status, reason):
    """sluice's own answer on the stream (docs/wire.md#denials), not a reset."""
    assert stream.headers is not None, "no answer: " + stream.describe()
    expect.denial(stream, status, reason)
    assert stream.ended, stream.describe()


def session_record(rec, origin, path, **want):
    expect.record(rec, sandbox="sbx1", mode="connect", decision="allow", rule="ws-feed",
                  reason=None, status=101, upgrade="websocket", proto="h2",
                  upstream_proto="http/1.1", method="GET", sni=NAME,
                  url="https://%s:%d%s" % (NAME, origin.port, path), **want)
    assert rec["upstream"] == "%s:%d" % (ADDRESS, origin.port), rec


def gauge_is(want):
    def check(scrape):
        got = scrape.value("sluice_websocket_sessions_active", sandbox="sbx1")
        return None if got == want else "sluice_websocket_sessions_active is %r, not %r" % (
            got, want)
    return check


# --- SETTINGS ---------------------------------------------------------------------------------

def test_sluice_advertises_enable_connect_protocol(wsgw, origin):
    """RFC 8441 §3: a client may send `:protocol` only once the server's SETTINGS carry
    SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 (docs/wire.md#websocket, "Over HTTP/2")."""
    with open_h2(wsgw, origin) as t:
        t.read_until(lambda: t.remote_settings_seen, "sluice's SETTINGS")
        assert t.settings_received.get(ENABLE_CONNECT_PROTOCOL) == 1, t.settings_received


# --- Allowed sessions -------------------------------------------------------------------------

@pytest.mark.parametrize("protocols", [(), ("superchat", "chat")],
                         ids=["no_subprotocol", "subprotocol"])
def test_echo_session_is_relayed_as_data_and_recorded(wsgw, h2origin, protocols):
    """An allowed session, end to end: the origin read an HTTP/1.1 upgrade (Upgrade,
    Connection, a Sec-WebSocket-Key sluice made, version 13, the client's
    sec-websocket-protocol as sent) on a TLS session whose ALPN is http/1.1 although it would
    pick h2 (h2origin); the client got `:status 200` with the protocol chosen and no HTTP/1.1
    handshake field; its masked frames, one over 126 bytes, came back echoed, unmasked, as DATA; the
    closing handshake ended the stream. Once both sides ended the stream (the connection still
    open), one record: 101, upgrade websocket, proto h2, upstream_proto http/1.1, method GET,
    and exactly the frame bytes relayed each way (docs/wire.md#websocket)."""
    m, mark = marker(), wsgw.audit.mark()
    path = "/feed/echo?m=" + m
    messages = ["hello", "x" * 5000, "last"]
    origin = h2origin
    with open_h2(wsgw, origin) as t:
        ws = Session(t, path, protocols=protocols)
        accepted(ws.head(), "chat" if protocols else None)
        assert [ws.echo(msg) for msg in messages] == ["echo:" + msg for msg in messages]
        ws.finish(1000, "done")
        assert not [f for f in ws.frames if f.masked], ws.frames
        rec = wsgw.audit.one(mark, lambda r: r["client"] == t.client)
        still_open(t)
    h = origin_request(origin, path)
    assert h.get("sec-websocket-protocol") == (", ".join(protocols) if protocols else None), h
    assert set(origin.alpns) == {"http/1.1"}, origin.alpns
    session_record(rec, origin, path, req_bytes=ws.sent, resp_bytes=len(ws.stream.body))
    assert expect.host_is(rec["host"], NAME, origin.port), rec


def test_permessage_deflate_is_agreed_end_to_end(wsgw, origin):
    """sec-websocket-extensions is end-to-end: the client's offer reaches the origin as sent,
    the origin's choice comes back on the 200, and the origin's frames arrive compressed
    (RSV1) as agreed: sluice relays frames, it neither strips the extension nor inflates."""
    offer = "permessage-deflate; client_max_window_bits"
    path = "/feed/echo?m=" + marker()
    message = "compress me " * 200
    with open_h2(wsgw, origin) as t:
        ws = Session(t, path, extensions=offer)
        head = ws.head()
        accepted(head)
        chosen = head.header("sec-websocket-extensions") or ""
        assert chosen.startswith("permessage-deflate"), head.headers
        ws.send(wsframe.text(message))  # uncompressed (RSV1 clear): allowed, RFC 7692 §6
        reply = ws.read_frames(1, "the echo")[0]
        assert reply.rsv1 and len(reply.payload) < len(message), reply
        assert wsframe.Inflater().message(reply) == ("echo:" + message).encode()
        ws.finish()
    assert origin_request(origin, path).get("sec-websocket-extensions") == offer


def test_frames_are_relayed_whatever_the_data_boundaries(wsgw, origin):
    """DATA frames are bytes of the WebSocket, not its frames: a frame cut across two DATA
    frames, and two frames in one, are relayed as one byte stream (the echoes come back in
    order); a 300 KiB message, beyond the stream windows of both sides (64 KiB), goes to the
    origin as sluice gives the window back and comes back whole as the client reopens its own
    (docs/wire.md#websocket, "Over HTTP/2": under the stream's flow control)."""
    mark = wsgw.audit.mark()
    path = "/feed/echo?m=" + marker()
    big = "b" * (300 << 10)
    with open_h2(wsgw, origin) as t:
        ws = Session(t, path)
        accepted(ws.head())
        cut = wsframe.text("cut in two")
        ws.send(cut[:3])
        ws.send(cut[3:] + wsframe.text("one") + wsframe.text("two"))
        got = ws.read_frames(3, "three echoes")
        assert [f.text for f in got] == ["echo:cut in two", "echo:one", "echo:two"], got
        assert ws.echo(big) == "echo:" + big
        ws.finish()
        rec = wsgw.audit.one(mark, lambda r: r["client"] == t.client)
    session_record(rec, origin, path, req_bytes=ws.sent, resp_bytes=len(ws.stream.body))


def test_data_sent_before_the_200_goes_first(wsgw, origin):
    """DATA the client sends right behind its HEADERS, before sluice has the origin's 101, are
    held and are the first bytes the origin gets (docs/wire.md#websocket, "Over HTTP/2"): the
    echo of that frame is the first frame back."""
    path = "/feed/echo?m=" + marker()
    with open_h2(wsgw, origin) as t:
        ws = Session(t, path)
        ws.send(wsframe.text("early"))
        accepted(ws.head())
        assert ws.read_frames(1, "the echo of the early frame")[0].text == "echo:early"
        assert ws.echo("later") == "echo:later"
        ws.finish()


def test_origin_frames_arrive_as_they_are_sent(wsgw, origin):
    """Frames are relayed as they come, not gathered: the origin's first tick is at the client
    before the origin has sent its last (push_gap apart), then its close frame (1000), which
    the client answers with its own and END_STREAM; the origin's close ends the stream."""
    with open_h2(wsgw, origin) as t:
        started = time.monotonic()
        ws = Session(t, "/feed/push")
        accepted(ws.head())
        ws.read_frames(1, "the first tick")
        first_at = time.monotonic()
        frames = ws.read_frames(origin.push_count + 1, "every tick and the close")
        assert [f.text for f in frames[:-1]] == ["tick-%d" % i for i in range(origin.push_count)]
        assert (frames[-1].opcode, frames[-1].close_code) == (wsframe.CLOSE, 1000), frames[-1]
        ws.send(wsframe.close(1000), end=True)
        ws.ended_by_origin()
    last_sent_at = (origin.push_count - 1) * origin.push_gap  # at the earliest
    assert first_at - started < last_sent_at, (first_at - started, last_sent_at)


def test_origin_close_ends_the_session_and_the_connection_goes_on(wsgw, origin):
    """The origin closes first (4001 "bye"): its close frame reaches the client, the client
    answers it with its own close frame, and the origin's close of its connection ends the
    stream (END_STREAM) and the session: its record is written and the gauge is back to 0
    although the client has not ended its side of the stream (docs/wire.md#websocket, "Over
    HTTP/2": the origin's close ends the stream). The h2 connection goes on: a GET on a new
    stream is answered (the origin's own 404 under ws-rest)."""
    mark = wsgw.audit.mark()
    with open_h2(wsgw, origin) as t:
        ws = Session(t, "/feed/close")
        accepted(ws.head())
        closing = ws.read_frames(1, "the origin's close frame")[0]
        assert (closing.opcode, closing.close_code, closing.close_reason) == \
            (wsframe.CLOSE, 4001, "bye"), closing
        ws.send(wsframe.close(4001))
        ws.ended_by_origin()
        rec = wsgw.audit.one(mark, lambda r: r["client"] == t.client)
        wsgw.admin.wait_for(gauge_is(0), "the ended session no longer counted")
        plain = t.one("GET", "/nothing")
        assert (plain.status, plain.body) == (404, b"no such feed\n"), plain.describe()
        still_open(t)
    session_record(rec, origin, "/feed/close", req_bytes=ws.sent,
                   resp_bytes=len(ws.stream.body))


def test_client_end_stream_is_its_close(wsgw, origin):
    """The client's END_STREAM is its close, passed on after the bytes before it
    (docs/wire.md#websocket): a text frame and a close frame (1000 "bye") in the DATA that end
    the stream all reach the origin, whose log has the close it read; the origin's close then
    ends the stream; the record has every byte the client sent."""
    m, mark = marker(), wsgw.audit.mark()
    path = "/feed/echo?m=" + m
    with open_h2(wsgw, origin) as t:
        ws = Session(t, path)
        accepted(ws.head())
        ws.send(wsframe.text("tail") + wsframe.close(1000, "bye"), end=True)
        ws.ended_by_origin()
        rec = wsgw.audit.one(mark, lambda r: r["client"] == t.client)
    wait_until(lambda: [c for c in origin.closes if c[0] == path], 10, "the origin's session end")
    assert [c[1:] for c in origin.closes if c[0] == path] == [(1000, "bye")], origin.closes
    session_record(rec, origin, path, req_bytes=ws.sent, resp_bytes=len(ws.stream.body))


def test_origin_that_refuses_the_upgrade_is_an_ordinary_answer(wsgw, origin):
    """The client's sec-websocket-version goes to the origin as sent: 8, which the origin
    refuses (400, RFC 6455 §4.4). An origin's answer other than 101 is an ordinary response
    (docs/wire.md#websocket): on the stream with the origin's body, the stream ended, the
    connection still open; recorded allowed, with the origin's status and upgrade websocket."""
    m, mark = marker(), wsgw.audit.mark()
    path = "/feed/echo?m=" + m
    with open_h2(wsgw, origin) as t:
        sid = t.extended_connect(path, headers=[("sec-websocket-version", "8")])
        s = t.wait(sid)[0]
        assert (s.status, s.ended) == (400, True), s.describe()
        assert b"Sec-WebSocket-Version" in s.body, s.describe()
        still_open(t)
        rec = wsgw.audit.one(mark, lambda r: r["client"] == t.client)
    assert [h.get("sec-websocket-version") for p, h in origin.handshakes if p == path] == ["8"]
    expect.record(rec, decision="allow", rule="ws-feed", status=400, upgrade="websocket",
                  proto="h2", method="GET", resp_bytes=len(s.body))


@pytest.mark.parametrize("feed", ["forged", "unkeyed"])
def test_a_101_without_the_accept_for_sluices_key_is_not_a_websocket(wsgw, origin, feed):
    """An extended CONNECT carries no key (RFC 8441): sluice's HTTP/1.1 handshake with the
    origin sends its own, and sluice, as that handshake's client, checks the origin's
    Sec-WebSocket-Accept (RFC 6455 §4.1). A 101 with another accept, or none, is no WebSocket:
    502 upstream_connect on the stream, never a 200 opening a session; the connection goes on."""
    m, mark = marker(), wsgw.audit.mark()
    path = "/feed/%s?m=%s" % (feed, m)
    with open_h2(wsgw, origin) as t:
        sid = t.extended_connect(path, headers=[("sec-websocket-version", "13")])
        s = t.wait(sid)[0]
        assert s.status == 502, s.describe()
        still_open(t)
        rec = wsgw.audit.one(mark, lambda r: r["client"] == t.client)
    assert [p for p, _ in origin.handshakes if p == path] == [path]  # the origin was asked
    expect.record(rec, decision="deny", rule="ws-feed", status=502, reason="upstream_connect",
                  upgrade="websocket", proto="h2")


def test_an_ordinary_200_to_the_upgrade_is_no_tunnel(wsgw, origin):
    """RFC 8441 §5: a 2xx to an extended CONNECT says the tunnel is established. The origin
    declines the WebSocket with an ordinary 200 and a body (its HTTP/1.1 answer to the
    upgrade sluice asked for): the client must not read that as an open tunnel, nor the body
    as the WebSocket's bytes. 502 upstream_connect on the stream; the connection goes on."""
    m, mark = marker(), wsgw.audit.mark()
    path = "/feed/declined?m=" + m
    with open_h2(wsgw, origin) as t:
        sid = t.extended_connect(path, headers=[("sec-websocket-version", "13")])
        s = t.wait(sid)[0]
        assert s.status == 502, s.describe()
        assert b"no WebSocket here" not in s.body, s.describe()
        still_open(t)
        rec = wsgw.audit.one(mark, lambda r: r["client"] == t.client)
    assert [p for p, _ in origin.handshakes if p == path] == [path]  # the origin was asked
    expect.record(rec, decision="deny", rule="ws-feed", status=502, reason="upstream_connect",
                  upgrade="websocket", proto="h2")


def test_client_reset_cuts_the_session(wsgw, origin):
    """A RST_STREAM (CANCEL) from the client cuts the session (docs/wire.md#websocket): the
    origin's connection is dropped (it read no close frame: 1006), the session is recorded
    with what it relayed, and the connection's next stream is answered."""
    m, mark = marker(), wsgw.audit.mark()
    path = "/feed/echo?m=" + m
    with open_h2(wsgw, origin) as t:
        ws = Session(t, path)
        accepted(ws.head())
        assert ws.echo("before the reset") == "echo:before the reset"
        t.cancel(ws.id, CANCEL)
        wait_until(lambda: [c for c in origin.closes if c[0] == path], 10,
                   "the origin's connection to be dropped")
        plain = t.one("GET", "/nothing")
        assert plain.status == 404, plain.describe()
        still_open(t)
        rec = wsgw.audit.one(mark, lambda r: r["client"] == t.client and r["upgrade"])
    assert [c[1] for c in origin.closes if c[0] == path] == [1006], origin.closes
    session_record(rec, origin, path, req_bytes=ws.sent)


def test_other_streams_go_on_beside_open_sessions(wsgw, origin):
    """Two sessions and a plain GET on one connection, interleaved: a session opened and used,
    a GET answered while it is open (the origin's 404 for a path no feed, under ws-rest), a
    second session opened beside the first, then messages on both. Each session is an
    upstream connection of its own with a key of its own (RFC 6455 §4.1: a fresh nonce), and
    one record; the GET has its own (proto h2, no upgrade)."""
    m, mark = marker(), wsgw.audit.mark()
    with open_h2(wsgw, origin) as t:
        a = Session(t, "/feed/echo?m=%s-a" % m)
        accepted(a.head())
        assert a.echo("one") == "echo:one"
        plain = t.one("GET", "/nothing?m=" + m)
        assert (plain.status, plain.body) == (404, b"no such feed\n"), plain.describe()
        b = Session(t, "/feed/echo?m=%s-b" % m)
        accepted(b.head())
        assert (b.echo("two"), a.echo("three")) == ("echo:two", "echo:three")
        b.finish()
        assert a.echo("four") == "echo:four"
        a.finish()
        still_open(t)
        recs = wsgw.audit.wait(mark, lambda r: r["client"] == t.client, count=3)
    assert len(recs) == 3, recs
    keys = {origin_request(origin, s.path)["sec-websocket-key"] for s in (a, b)}
    assert len(keys) == 2, keys
    by_url = {r["url"]: r for r in recs}
    for s in (a, b):
        session_record(by_url["https://%s:%d%s" % (NAME, origin.port, s.path)], origin,
                       s.path, req_bytes=s.sent, resp_bytes=len(s.stream.body))
    get = by_url["https://%s:%d/nothing?m=%s" % (NAME, origin.port, m)]
    expect.record(get, decision="allow", rule="ws-rest", status=404, upgrade=None, proto="h2",
                  upstream_proto="http/1.1", method="GET")


def test_sessions_active_gauge_counts_the_open_session(wsgw, origin):
    """sluice_websocket_sessions_active (docs/metrics.md) counts an h2 session from the
    origin's 101 to its end: 1 while it is open (and no record yet: it is written when the
    session ends), 0 once it ended, then its record."""
    m, mark = marker(), wsgw.audit.mark()
    path = "/feed/echo?m=" + m
    wsgw.admin.wait_for(gauge_is(0), "no session before")
    with open_h2(wsgw, origin) as t:
        ws = Session(t, path)
        accepted(ws.head())
        wsgw.admin.wait_for(gauge_is(1), "the open session counted")
        assert not [r for r in wsgw.audit.since(mark) if r["client"] == t.client]
        assert ws.echo("still open") == "echo:still open"
        ws.finish()
        wsgw.admin.wait_for(gauge_is(0), "the ended session no longer counted")
        rec = wsgw.audit.one(mark, lambda r: r["client"] == t.client)
    session_record(rec, origin, path)


# --- Refusals -----------------------------------------------------------------------------------

def test_upgrade_on_a_rule_without_websocket_is_refused_on_its_stream(wsgw, origin):
    """/feed/echoes is ws-rest's, which allows GET but not the WebSocket: an extended CONNECT
    for it is 403 upgrade_not_allowed on its stream (with the headers of docs/wire.md#denials),
    the origin never reads it (it would serve that path as an echo), and the connection goes
    on: an allowed session opened after it (the barrier in the origin's log) works. The
    refusal's record says upgrade websocket, method GET, proto h2."""
    m, mark = marker(), wsgw.audit.mark()
    denied_path, barrier = "/feed/echoes?m=" + m, "/feed/echo?m=%s-ok" % m
    with open_h2(wsgw, origin) as t:
        denied = Session(t, denied_path)
        t.wait(denied.id)
        refused(denied.stream, 403, "upgrade_not_allowed")
        ok = Session(t, barrier)
        accepted(ok.head())
        assert ok.echo("after") == "echo:after"
        ok.finish()
        still_open(t)
        recs = wsgw.audit.wait(mark, lambda r: r["client"] == t.client, count=2)
    origin_request(origin, barrier)
    assert [p for p, _ in origin.handshakes if p == denied_path] == []
    deny = [r for r in recs if r["decision"] == "deny"]
    assert len(deny) == 1, recs
    expect.record(deny[0], reason="upgrade_not_allowed", status=403, upgrade="websocket",
                  method="GET", proto="h2", rule=None, upstream=None,
                  url="https://%s:%d%s" % (NAME, origin.port, denied_path))


@pytest.mark.parametrize("protocol", ["connect-udp", "webtransport", "h2c"])
def test_protocol_other_than_websocket_is_bad_request(wsgw, origin, protocol):
    """A `:protocol` other than websocket is 400 bad_request on its stream
    (docs/wire.md#websocket, "Over HTTP/2"), never forwarded (the origin never reads its path,
    one it would serve), and the connection goes on (an allowed session after it, the barrier)."""
    m, mark = marker(), wsgw.audit.mark()
    refused_path, barrier = "/feed/echo?m=" + m, "/feed/echo?m=%s-ok" % m
    with open_h2(wsgw, origin) as t:
        bad = Session(t, refused_path, protocol=protocol)
        t.wait(bad.id)
        refused(bad.stream, 400, "bad_request")
        ok = Session(t, barrier)
        accepted(ok.head())
        ok.finish()
        still_open(t)
        recs = wsgw.audit.wait(mark, lambda r: r["client"] == t.client, count=2)
    origin_request(origin, barrier)
    assert [p for p, _ in origin.handshakes if p == refused_path] == []
    deny = [r for r in recs if r["decision"] == "deny"]
    assert len(deny) == 1, recs
    expect.record(deny[0], reason="bad_request", status=400, proto="h2", upstream=None)


def test_session_for_another_authority_is_refused(wsgw, origin, bed):
    """Edge case (S8): an extended CONNECT whose :authority names another allowed host, on the
    tunnel to ws.test, is 403 host_mismatch on its stream like any stream
    (docs/wire.md#http2): nothing reaches that host's origin (nginx's log, after a barrier)."""
    m = marker()
    with open_h2(wsgw, origin) as t:
        other = t.extended_connect("/whoami.txt?m=" + m, authority="allowed.test:%d"
                                   % bed.tls_port, headers=[("sec-websocket-version", "13")])
        refused(t.wait(other)[0], 403, "host_mismatch")
        still_open(t)
    assert cdn_hits(bed, m) == []
