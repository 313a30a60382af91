"""WebSocket through sluice (docs/wire.md#websocket): python3-websockets as the origin (TLS, its
own address) and as the client, through a CONNECT tunnel whose TLS sluice terminates. A rule with
`websocket: true` lets the upgrade through and the bytes flow both ways as they come; any other
rule answers 403 upgrade_not_allowed before the origin hears of it; every session is one record
(status 101, upgrade websocket, the bytes relayed each way)."""
import asyncio
import os
import shutil
import ssl
import subprocess
import time

import pytest
import websockets

import expect
from gateway import Gateway, Runner
from http1 import HttpReader, request_bytes
from sluice_proc import bed_rules
from tlsraw import TLSStream, connect_tunnel
from oracles import cdn_hits, marker
from ws_origin import ADDRESS, NAME, WsOrigin


@pytest.fixture(scope="module")
def origin(bed):
    server = WsOrigin(bed.pki)
    yield server
    server.close()


@pytest.fixture(scope="module")
def wsgw(sluice_binary, bed, origin):
    """sluice with the bed's rules and two for ws.test: /feed/ with `websocket: true`, and the
    rest of the host without it."""
    rules = bed_rules(bed.tls_port, bed.plain_port) + [
        {"name": "ws-feed", "hosts": [NAME], "ports": [origin.port], "paths": ["/feed/"],
         "ips": [ADDRESS + "/32"], "websocket": True},
        {"name": "ws-rest", "hosts": [NAME], "ports": [origin.port], "ips": [ADDRESS + "/32"]},
    ]
    runner = Runner(sluice_binary, bed)
    try:
        yield Gateway(runner.start(rules=rules), bed)
    finally:
        runner.stop_all()


def run(coroutine):
    return asyncio.new_event_loop().run_until_complete(coroutine)


async def open_ws(gw, origin, path, compression=None):
    """A WebSocket client on a CONNECT tunnel to ws.test, trusting the sandbox CA; without
    permessage-deflate unless asked (so that the bytes relayed can be counted)."""
    sock, answer, _ = connect_tunnel(gw.sluice.address, "%s:%d" % (NAME, origin.port))
    assert answer.status == 200, answer
    sock.setblocking(False)
    ctx = ssl.create_default_context(cafile=gw.sluice.ca_pem)
    client = "%s:%d" % sock.getsockname()
    ws = await websockets.connect("wss://%s:%d%s" % (NAME, origin.port, path), sock=sock,
                                  ssl=ctx, server_hostname=NAME, open_timeout=10,
                                  compression=compression)
    return ws, client


@pytest.mark.parametrize("compression", [None, "deflate"])
def test_echo_session_is_relayed_and_recorded(wsgw, origin, compression):
    """Both without and with permessage-deflate (an extension the two ends agree on: sluice
    relays frames and does not care)."""
    mark = wsgw.audit.mark()
    messages = ["hello", "x" * 5000, "last"]

    async def session():
        ws, client = await open_ws(wsgw, origin, "/feed/echo?m=1", compression)
        answers = []
        for message in messages:
            await ws.send(message)
            answers.append(await asyncio.wait_for(ws.recv(), 10))
        await ws.close()
        return answers, client

    answers, client = run(session())
    assert answers == ["echo:" + m for m in messages]
    path, headers = origin.handshakes[-1]
    assert path == "/feed/echo?m=1"
    # The head sluice wrote asks for the upgrade itself; the WebSocket fields are end-to-end.
    assert headers["upgrade"] == "websocket" and headers["connection"] == "Upgrade", headers
    assert "sec-websocket-key" in headers and headers["host"] == "%s:%d" % (NAME, origin.port)
    rec = wsgw.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, decision="allow", rule="ws-feed", reason=None, status=101,
                  upgrade="websocket", proto="http/1.1", upstream_proto="http/1.1",
                  method="GET", url="https://%s:%d/feed/echo?m=1" % (NAME, origin.port))
    # The bytes relayed each way: every frame's payload plus its header (client frames are
    # masked: 4 more bytes each), close frames included.
    if compression:
        assert rec["req_bytes"] > 0 and rec["resp_bytes"] > 0, rec
        return
    sent = sum(len(m) for m in messages)
    assert rec["req_bytes"] >= sent + 6 * len(messages), rec
    assert rec["resp_bytes"] >= sent + 5 * len(messages) + 2 * len(messages), rec


def test_server_push_arrives_as_it_is_sent(wsgw, origin):
    """Frames are relayed as they come, not gathered: the first tick is at the client before
    the origin has sent the last (the origin waits push_gap between them)."""
    async def session():
        ws, client = await open_ws(wsgw, origin, "/feed/push")
        received = []
        async for message in ws:
            received.append((message, time.monotonic()))
        return received, ws.close_code

    started = time.monotonic()
    received, code = run(session())
    assert [m for m, _ in received] == ["tick-%d" % i for i in range(origin.push_count)]
    assert code == 1000
    first_at = received[0][1] - started
    last_sent_at = (origin.push_count - 1) * origin.push_gap  # at the earliest, after the first
    assert first_at < last_sent_at, (first_at, last_sent_at)


def test_origin_close_ends_the_session_with_its_record(wsgw, origin):
    mark = wsgw.audit.mark()

    async def session():
        ws, client = await open_ws(wsgw, origin, "/feed/close")
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 10)
        return ws.close_code, client

    code, client = run(session())
    assert code == 4001
    rec = wsgw.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, decision="allow", status=101, upgrade="websocket")


def test_upgrade_on_a_rule_without_websocket_is_refused(wsgw, origin):
    """ws-rest allows GET /other on ws.test, but not as a WebSocket: 403 upgrade_not_allowed,
    and the origin never hears of it."""
    mark, before = wsgw.audit.mark(), len(origin.handshakes)

    async def session():
        with pytest.raises(websockets.InvalidStatusCode) as refused:
            await open_ws(wsgw, origin, "/feed-not/echo")
        return refused.value.status_code

    assert run(session()) == 403
    assert len(origin.handshakes) == before
    rec = wsgw.audit.one(mark, lambda r: r["upgrade"] == "websocket")
    expect.record(rec, decision="deny", reason="upgrade_not_allowed", status=403,
                  upstream=None, rule=None)
    # The answer's text says what the rule lacks (issue 34, item 7).
    sock, answer, _ = connect_tunnel(wsgw.sluice.address, "%s:%d" % (NAME, origin.port))
    assert answer.status == 200, answer
    tls = TLSStream(sock, NAME, wsgw.sluice.ca_pem)
    tls.sendall(request_bytes("GET", "/feed-not/echo", "%s:%d" % (NAME, origin.port),
                              headers=[("Connection", "Upgrade"), ("Upgrade", "websocket"),
                                       ("Sec-WebSocket-Version", "13"),
                                       ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")]))
    refusal = HttpReader(tls).read_response("GET")
    assert refusal.status == 403 and refusal.sluice_reason == "upgrade_not_allowed", refusal
    assert b"needs a rule with websocket: true" in refusal.body, refusal.body
    sock.close()


def test_origin_that_refuses_the_upgrade_is_an_ordinary_answer(wsgw, origin):
    mark = wsgw.audit.mark()

    async def session():
        with pytest.raises(websockets.InvalidStatusCode) as refused:
            await open_ws(wsgw, origin, "/feed/none")
        return refused.value.status_code

    assert run(session()) == 404
    rec = wsgw.audit.one(mark, lambda r: r["upgrade"] == "websocket")
    expect.record(rec, decision="allow", rule="ws-feed", status=404, upgrade="websocket")


@pytest.mark.parametrize("feed", ["forged", "unkeyed"])
def test_a_101_without_the_accept_for_the_key_is_not_a_websocket(wsgw, origin, feed):
    """RFC 6455 §4.1: a 101 whose Sec-WebSocket-Accept is not the one the client's key asks
    for (or that has none) is no WebSocket. sluice checks it before anything is relayed as one:
    the client gets 502 upstream_connect, not the origin's 101, and the record says so."""
    m, mark = marker(), wsgw.audit.mark()
    path = "/feed/%s?m=%s" % (feed, m)

    async def session():
        with pytest.raises(websockets.InvalidStatusCode) as refused:
            await open_ws(wsgw, origin, path)
        return refused.value.status_code

    assert run(session()) == 502
    assert [p for p, _ in origin.handshakes if p == path] == [path]  # the origin was asked
    rec = wsgw.audit.one(mark, lambda r: m in (r.get("url") or ""))
    expect.record(rec, decision="deny", rule="ws-feed", status=502, reason="upstream_connect",
                  upgrade="websocket")


def test_request_pipelined_behind_the_upgrade_is_websocket_bytes(wsgw, origin, bed):
    """Edge case: an HTTP request for another tenant sent in the same write as an allowed
    upgrade. Once the origin switched, those bytes are the WebSocket's (relayed to ws.test, whose
    WebSocket reads them as a broken frame), never a request sluice parses, decides or forwards:
    one record, the session's, and nothing reaches the CDN."""
    mark, m = wsgw.audit.mark(), marker()
    sock, answer, _ = connect_tunnel(wsgw.sluice.address, "%s:%d" % (NAME, origin.port))
    assert answer.status == 200
    tls = TLSStream(sock, NAME, wsgw.sluice.ca_pem)
    upgrade = request_bytes("GET", "/feed/echo", "%s:%d" % (NAME, origin.port), headers=[
        ("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")])
    tls.sendall(upgrade + b"GET /whoami.txt?m=%s HTTP/1.1\r\nHost: evil.test\r\n\r\n" % m.encode())
    reader = HttpReader(tls)
    switched = reader.read_response("GET")
    assert switched.status == 101, switched
    reader.read_to_close(timeout=10)
    sock.close()
    recs = wsgw.audit.wait(mark, lambda r: r["host"] == "%s:%d" % (NAME, origin.port), count=1)
    assert [(r["status"], r["upgrade"]) for r in recs] == [(101, "websocket")]
    assert not [r for r in wsgw.audit.since(mark) if r.get("host") == "evil.test"]
    assert cdn_hits(bed, m) == []


# JDK 17's own WebSocket client (java.net.http) through sluice, trusting the sandbox's PKCS#12
# store: it sends `Content-Length: 0` on its opening GET, which is no body (issue 34, item 1).
WS_JAVA = """
import java.net.ProxySelector;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.WebSocket;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;

public class Ws {
    public static void main(String[] args) throws Exception {
        CompletableFuture<String> answer = new CompletableFuture<>();
        WebSocket.Listener listener = new WebSocket.Listener() {
            public CompletionStage<?> onText(WebSocket ws, CharSequence data, boolean last) {
                answer.complete(data.toString());
                return null;
            }
            public void onError(WebSocket ws, Throwable error) {
                answer.completeExceptionally(error);
            }
        };
        HttpClient client = HttpClient.newBuilder().proxy(ProxySelector.getDefault()).build();
        WebSocket ws = client.newWebSocketBuilder().buildAsync(URI.create(args[0]), listener)
                .get(30, TimeUnit.SECONDS);
        ws.sendText(args[1], true).get(30, TimeUnit.SECONDS);
        System.out.println(answer.get(30, TimeUnit.SECONDS));
        ws.sendClose(WebSocket.NORMAL_CLOSURE, "done").get(30, TimeUnit.SECONDS);
    }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="no java (scripts/install-deps --test "
                    "installs openjdk-17-jre-headless)")
def test_java_websocket_client_gets_its_session(wsgw, origin, scratch):
    """java.net.http.WebSocket: its upgrade carries `Content-Length: 0`, which sluice took for a
    body (400 bad_request); now the session opens, the echo comes back, and the head the origin
    got has no Content-Length (sluice writes the upgrade's head itself)."""
    source = os.path.join(scratch, "Ws.java")
    with open(source, "w") as f:
        f.write(WS_JAVA)
    store = os.path.join(os.path.dirname(wsgw.sluice.ca_pem), "ca.p12")
    assert os.path.exists(store), store
    host, port = wsgw.sluice.address
    m = marker()
    mark = wsgw.audit.mark()
    r = subprocess.run(["java", "-Dhttps.proxyHost=%s" % host, "-Dhttps.proxyPort=%d" % port,
                        "-Djavax.net.ssl.trustStore=" + store,
                        "-Djavax.net.ssl.trustStorePassword=changeit",
                        "-Djavax.net.ssl.trustStoreType=PKCS12", source,
                        "wss://%s:%d/feed/echo?m=%s" % (NAME, origin.port, m), "from-java"],
                       capture_output=True, text=True, timeout=120, cwd=scratch)
    assert (r.returncode, r.stdout) == (0, "echo:from-java\n"), r.stdout + r.stderr
    path, headers = origin.handshakes[-1]
    assert path == "/feed/echo?m=" + m
    assert "content-length" not in headers, headers
    rec = wsgw.audit.one(mark, lambda rec: m in (rec.get("url") or ""))
    expect.record(rec, decision="allow", rule="ws-feed", reason=None, status=101,
                  upgrade="websocket")
