"""HTTP/2 toward origins (docs/wire.md#http2-toward-origins, docs/wire.md#upstreams): sluice
offers ALPN `h2` and `http/1.1` to a TLS origin (only `http/1.1` for a WebSocket upgrade) and
speaks HTTP/2 when the origin selects it, whatever the sandbox's leg speaks: an HTTP/1.1 client's
requests and an HTTP/2 client's streams alike become streams on an upstream HTTP/2 connection,
recorded with `upstream_proto` "h2" (and `proto` the sandbox's leg, docs/audit.md). Upstream
HTTP/2 sessions are pooled per (sandbox, H, port): the streams of one sandbox share them,
across its client connections, and never another sandbox's.

The origin is the bed's h2.test (nginx on 127.0.0.25 with `listen ... ssl http2`; the bed's
other origins offer HTTP/1.1 only and stay HTTP/1.1 upstreams). Its access log says, per
request, the protocol nginx spoke ($server_protocol "HTTP/2.0") and the connection that carried
it ($connection), which is how pooling is seen. The module's sluice has one worker (a pooled
connection serves only its own worker's clients: docs/wire.md#upstreams) and two sandboxes with the
bed's policy, sbx1 and sbx2. Oracles: nginx's h2 log (after a barrier for anything that must not
arrive), the audit log."""
import asyncio
import hashlib
import os
import re
import socket
import ssl
import subprocess

import pytest
import websockets

import expect
from gateway import Gateway, Runner
from h2client import H2Tunnel
from http1 import request_bytes
from netutil import clean_env, free_port, wait_until
from oracles import cdn_hits, marker
from sluice_proc import PROXY_ADDRESS, bed_rules
from tlsraw import connect_tunnel
from ws_origin import ADDRESS as WS_ADDRESS, NAME as WS_NAME, WsOrigin

NAME, ADDRESS = "h2.test", "127.0.0.25"
MIB_PATH, BIG_PATH = "/h2/mib.bin", "/h2/big.bin"
OTHER = "sbx2"


def sha(data):
    return hashlib.sha256(data).hexdigest()


def with_sbx2(config, workdir):
    """A second sandbox with the bed's policy, its own listener and CA, the global audit log."""
    config["sandboxes"].append({
        "name": OTHER, "listen": "%s:%d" % (PROXY_ADDRESS, free_port((PROXY_ADDRESS,))),
        "ca": os.path.join(workdir, "ca-" + OTHER), "policy": "bed", "mode": "enforce"})


@pytest.fixture(scope="module")
def hgw(sluice_binary, bed):
    runner = Runner(sluice_binary, bed)
    try:
        s = runner.start(edit=with_sbx2, env={"SLUICE_WORKERS": "1"})
        yield Gateway(s, bed)
    finally:
        runner.stop_all()


@pytest.fixture(scope="module")
def sbx2(hgw, bed):
    return Gateway(hgw.sluice.sandbox_view(OTHER), bed)


@pytest.fixture(scope="module")
def files(bed):
    """h2.test/h2/mib.bin, 1 MiB of random bytes (beyond every 64 KiB window), and
    h2.test/h2/big.bin, the bed's 200 MiB file (a download a test never finishes)."""
    mib = os.urandom(1 << 20)
    path = bed.content.path(NAME, MIB_PATH)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(mib)
    big = bed.content.path(NAME, BIG_PATH)
    os.symlink(bed.content.big_path, big)
    yield mib
    os.remove(path)
    os.remove(big)


def open_h2(gw, **start):
    return H2Tunnel(gw.sluice.address, gw.authority(NAME), gw.sluice.ca_pem).start(**start)


def origin_saw(bed, m):
    """h2.test's log entries carrying marker `m` in the URI or x-test (after a barrier)."""
    bed.nginx.barrier()
    return [e for e in bed.nginx.access("h2") if m in e["uri"] or e["x_test"] == m]


def entry(bed, m):
    """The one h2.test log entry whose URI ends with marker `m` (every test puts its markers
    last, so that "m-1" is not "m-10") or whose x-test is `m`."""
    hits = bed.nginx.wait_access("h2", lambda e: e["uri"].endswith(m) or e["x_test"] == m)
    assert len(hits) == 1, hits
    return hits[0]


def spoke_h2(entries):
    """Every entry was an HTTP/2 request (nginx's $server_protocol), on one connection: its
    $connection."""
    assert {e["protocol"] for e in entries} == {"HTTP/2.0"}, \
        "nginx was spoken to in %s" % sorted({e["protocol"] for e in entries})
    conns = {e["connection"] for e in entries}
    assert len(conns) == 1, "carried by %d upstream connections: %s" % (len(conns), conns)
    return conns.pop()


def h2_record(rec, gw, path, proto, sandbox="sbx1", method="GET", **want):
    expect.record(rec, sandbox=sandbox, mode="connect", decision="allow", rule="h2",
                  reason=None, sni=NAME, method=method,
                  url="https://%s:%d%s" % (NAME, gw.t, path), proto=proto,
                  upstream_proto="h2", upstream="%s:%d" % (ADDRESS, gw.t), upgrade=None, **want)


def by_url(gw, recs):
    return {r["url"].split(":%d" % gw.t, 1)[1]: r for r in recs}


def client_records(gw, client, mark, count):
    recs = gw.audit.wait(mark, lambda r: r["client"] == client, count=count)
    assert len(recs) == count, recs
    return recs


# --- 1. ALPN toward the origin ----------------------------------------------------------------

def test_an_h2_origin_is_spoken_to_in_http2(hgw, bed):
    """An origin that selects h2 is spoken to in HTTP/2 (docs/wire.md#http2-toward-origins: the
    upstream leg negotiates its own ALPN): nginx logs the stream as HTTP/2.0 with the path and
    :authority h2.test:T; the answer comes back on the client's stream; the record says proto
    h2, upstream_proto h2, with the body's length and hash."""
    m, mark = marker(), hgw.audit.mark()
    path = "/whoami.txt?m=" + m
    with open_h2(hgw) as t:
        s = t.one("GET", path)
    assert (s.status, s.body, s.ended) == (200, b"h2.test\n", True), s.describe()
    e = entry(bed, m)
    assert (e["request"], e["host"], e["ssl_server_name"]) == (
        "GET %s HTTP/2.0" % path, NAME, NAME), e
    assert e["protocol"] == "HTTP/2.0" and e["http2"] == "h2", e
    # :authority is canonical H with the port, the bed's not being 443 (nginx reads it as Host)
    assert e["http_host"] == "%s:%d" % (NAME, hgw.t), e
    rec = client_records(hgw, t.client, mark, 1)[0]
    h2_record(rec, hgw, path, "h2", status=200, resp_bytes=8, resp_sha256=sha(b"h2.test\n"))


def test_an_origin_without_h2_stays_http11(hgw, bed):
    """Offering h2 changes nothing for an origin that does not select it: the bed's CDN (no
    `http2` on its listen) gets HTTP/1.1 for a stream of an h2 client, recorded
    upstream_proto http/1.1."""
    m, mark = marker(), hgw.audit.mark()
    with H2Tunnel(hgw.sluice.address, hgw.authority("allowed.test"), hgw.sluice.ca_pem
                  ).start() as t:
        s = t.one("GET", "/whoami.txt?m=" + m)
    assert (s.status, s.body) == (200, b"allowed.test\n"), s.describe()
    hits = cdn_hits(bed, m)
    assert [e["protocol"] for e in hits] == ["HTTP/1.1"], hits
    rec = client_records(hgw, t.client, mark, 1)[0]
    expect.record(rec, decision="allow", rule="cdn", proto="h2", upstream_proto="http/1.1")


def test_a_websocket_upgrade_offers_only_http11(make_gw, bed):
    """A WebSocket upgrade goes upstream as HTTP/1.1 (docs/wire.md#http2-toward-origins,
    docs/wire.md#websocket): sluice's ClientHello for it offers http/1.1 only, so an origin that
    would pick h2 (ws_origin with ALPN h2 before http/1.1: a direct handshake offering both
    selects h2) selects http/1.1, and the session works; its record says upstream_proto
    http/1.1, upgrade websocket, 101."""
    origin = WsOrigin(bed.pki, alpn=["h2", "http/1.1"])
    try:
        ctx = ssl.create_default_context(cafile=bed.pki.test_ca.cert)
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        with ctx.wrap_socket(socket.create_connection((WS_ADDRESS, origin.port), timeout=10),
                             server_hostname=WS_NAME) as direct:
            assert direct.selected_alpn_protocol() == "h2"  # the premise
        rules = bed_rules(bed.tls_port, bed.plain_port) + [
            {"name": "ws", "hosts": [WS_NAME], "ports": [origin.port], "websocket": True,
             "ips": [WS_ADDRESS + "/32"]}]
        g = make_gw(rules=rules)
        mark = g.audit.mark()

        async def session():
            sock, answer, _ = connect_tunnel(g.sluice.address, "%s:%d" % (WS_NAME, origin.port))
            assert answer.status == 200, answer
            sock.setblocking(False)
            client = "%s:%d" % sock.getsockname()
            ws = await websockets.connect(
                "wss://%s:%d/feed/echo" % (WS_NAME, origin.port), sock=sock,
                ssl=ssl.create_default_context(cafile=g.sluice.ca_pem),
                server_hostname=WS_NAME, open_timeout=10, compression=None)
            await ws.send("ping")
            got = await asyncio.wait_for(ws.recv(), 10)
            await ws.close()
            return got, client
        got, client = asyncio.new_event_loop().run_until_complete(session())
        assert got == "echo:ping"
        assert origin.alpns == ["http/1.1"], origin.alpns
        rec = g.audit.one(mark, lambda r: r["client"] == client)
        expect.record(rec, decision="allow", rule="ws", status=101, upgrade="websocket",
                      proto="http/1.1", upstream_proto="http/1.1")
    finally:
        origin.close()


# --- 2. An HTTP/1.1 client to an h2 origin ----------------------------------------------------

def chunked_post(path, body, m):
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 5000]), body[i:i + 5000])
                      for i in range(0, len(body), 5000))
    return (b"POST %s HTTP/1.1\r\nHost: %s\r\nX-Test: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
            % (path.encode(), NAME.encode(), m.encode())) + chunks + b"0\r\n\r\n"


def test_http11_client_keep_alive_requests_are_translated_to_h2(hgw, bed):
    """An HTTP/1.1 client on one keep-alive tunnel (docs/wire.md#http2-toward-origins): a GET (the
    origin's content-length kept), the chunked page and the trailer page (h2 answers without
    content-length: chunked toward the client, the origin's trailer in the last chunk, and the
    next request still parses), a HEAD, a POST with Content-Length and one chunked (each body
    stored exactly by nginx), then a last GET. nginx got them all as HTTP/2.0 on one
    connection; each record is proto http/1.1, upstream_proto h2."""
    m = marker()
    body, body2 = os.urandom(100 << 10), os.urandom(70 << 10)
    head_size = len(bed.content.files[(NAME, "/head.txt")])
    page = b"<p>replaced-by-nginx before trailers</p>\n"
    paths = ["/whoami.txt?m=%s-1" % m, "/chunked.html?m=%s-2" % m,
             "/trailer/page.html?m=%s-3" % m, "/head.txt?m=%s-4" % m, "/upload/%s-5" % m,
             "/upload/%s-6" % m, "/whoami.txt?m=%s-7" % m]
    methods = ["GET", "GET", "GET", "HEAD", "POST", "POST", "GET"]
    mark = hgw.audit.mark()
    ex = hgw.tunnel(NAME, [
        request_bytes("GET", paths[0], NAME), request_bytes("GET", paths[1], NAME),
        request_bytes("GET", paths[2], NAME, headers=[("TE", "trailers")]),
        request_bytes("HEAD", paths[3], NAME),
        request_bytes("POST", paths[4], NAME, headers=[("X-Test", m + "-5")], body=body),
        chunked_post(paths[5], body2, m + "-6"),
        request_bytes("GET", paths[6], NAME, keep_alive=False)])
    assert ex.alpn == "http/1.1"
    got = [(r.status, r.body) for r in ex.responses]
    assert got == [(200, b"h2.test\n"), (200, bed.content.chunked_expected), (200, page),
                   (200, b""), (200, b"stored\n"), (200, b"stored\n"), (200, b"h2.test\n")], \
        [(r.status, r.headers, r.body[:80]) for r in ex.responses]
    # HTTP/2 has no reason phrase: the status line carries the status's own name, not
    # "HTTP/1.1 200 " (Java's getResponseMessage() read null; issue 34, item 7).
    assert [r.reason for r in ex.responses] == ["OK"] * 7, [r.head for r in ex.responses]
    first, chunked, trailered, head = ex.responses[:4]
    assert first.header("Content-Length") == "8", first.headers
    for r in (chunked, trailered):
        assert (r.header("Transfer-Encoding") or "").lower() == "chunked", r.headers
    assert [(k.lower(), v) for k, v in trailered.trailers] == [("x-trailer", "trailer-value")], \
        trailered.trailers
    assert head.header("Content-Length") == str(head_size), head.headers
    entries = [entry(bed, "%s-%d" % (m, i)) for i in range(1, 8)]
    spoke_h2(entries)
    for e, sent in ((entries[4], body), (entries[5], body2)):
        with open(e["body_file"], "rb") as f:
            assert f.read() == sent, e
    recs = by_url(hgw, client_records(hgw, ex.client, mark, 7))
    for p, method in zip(paths, methods):
        h2_record(recs[p], hgw, p, "http/1.1", method=method, status=200)
    expect.record(recs[paths[4]], req_bytes=len(body), req_sha256=sha(body))
    expect.record(recs[paths[5]], req_bytes=len(body2), req_sha256=sha(body2))
    expect.record(recs[paths[1]], resp_bytes=len(bed.content.chunked_expected))


def test_curl_http11_through_the_proxy_to_an_h2_origin(hgw, bed):
    """curl --http1.1 -x LISTEN with two URLs: one CONNECT, HTTP/1.1 inside (curl reports 1.1),
    both answered; nginx logs HTTP/2.0 for both; records proto http/1.1, upstream_proto h2."""
    m = marker()
    urls = [hgw.url(NAME, "/whoami.txt?m=%s-%d" % (m, i)) for i in (1, 2)]
    mark = hgw.audit.mark()
    proc = subprocess.run(
        ["curl", "-sS", "--http1.1", "--max-time", "20", "-x", hgw.sluice.proxy_url,
         "--cacert", hgw.sluice.ca_pem, "-w", "%{stderr}CURL-W %{http_version} %{http_code}\n",
         *urls], capture_output=True, timeout=40, stdin=subprocess.DEVNULL, env=clean_env())
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, err
    assert err.count("CURL-W 1.1 200") == 2, err
    assert proc.stdout == b"h2.test\n" * 2
    spoke_h2([entry(bed, "%s-%d" % (m, i)) for i in (1, 2)])
    for u in urls:
        rec = hgw.audit.one(mark, lambda r: r["url"] == u)
        h2_record(rec, hgw, u.split(":%d" % hgw.t, 1)[1], "http/1.1", status=200)


# --- 2. An HTTP/2 client to an h2 origin ------------------------------------------------------

def test_h2_get_beyond_the_windows_arrives_whole(hgw, bed, files):
    """1 MiB on one stream, beyond the 64 KiB stream windows of both legs: the origin's DATA is
    read as the client's WINDOW_UPDATEs come (h2 fails the test if sluice overruns the client's
    window), every byte arrives, and the record has its length and hash."""
    m, mark = marker(), hgw.audit.mark()
    with open_h2(hgw) as t:
        s = t.one("GET", MIB_PATH, headers=[("x-test", m)])
    assert (s.status, len(s.body), s.ended) == (200, len(files), True), s.describe()
    assert sha(s.body) == sha(files)
    spoke_h2([entry(bed, m)])
    rec = client_records(hgw, t.client, mark, 1)[0]
    h2_record(rec, hgw, MIB_PATH, "h2", status=200, resp_bytes=len(files),
              resp_sha256=sha(files))


@pytest.mark.parametrize("with_length", [True, False], ids=["content_length", "no_length"])
def test_h2_post_upload_reaches_the_origin_exactly(hgw, bed, with_length):
    """A 300 KiB POST on a stream (several windows of both legs), with and without
    content-length: nginx stores exactly the bytes sent, over HTTP/2; the record has their
    length and hash."""
    body = os.urandom(300 << 10)
    m, mark = marker(), hgw.audit.mark()
    headers = [("x-test", m)] + ([("content-length", str(len(body)))] if with_length else [])
    with open_h2(hgw) as t:
        s = t.one("POST", "/upload/" + m, headers=headers, body=body)
    assert (s.status, s.body) == (200, b"stored\n"), s.describe()
    e = entry(bed, m)
    spoke_h2([e])
    with open(e["body_file"], "rb") as f:
        assert f.read() == body
    rec = client_records(hgw, t.client, mark, 1)[0]
    h2_record(rec, hgw, "/upload/" + m, "h2", method="POST", status=200, req_bytes=len(body),
              req_sha256=sha(body))


def test_h2_head_204_and_304(hgw, bed):
    """Answers without a body over HTTP/2 on both legs: HEAD (its content-length kept, no
    DATA), 204, and a 304 to a conditional GET (if-none-match with the ETag nginx gave): each
    stream ends with no body, each request reached nginx as HTTP/2.0, each record has its
    status."""
    m, mark = marker(), hgw.audit.mark()
    size = len(bed.content.files[(NAME, "/head.txt")])
    with open_h2(hgw) as t:
        head = t.one("HEAD", "/head.txt?m=%s-1" % m)
        empty = t.one("GET", "/nocontent?m=%s-2" % m)
        full = t.one("GET", "/head.txt?m=%s-3" % m)
        etag = full.header("etag")
        assert etag, full.describe()
        same = t.one("GET", "/head.txt?m=%s-4" % m, headers=[("if-none-match", etag)])
    assert (head.status, head.header("content-length"), head.body, head.ended) == \
        (200, str(size), b"", True), head.describe()
    assert (empty.status, empty.body, empty.ended) == (204, b"", True), empty.describe()
    assert (full.status, len(full.body)) == (200, size), full.describe()
    assert (same.status, same.body, same.ended) == (304, b"", True), same.describe()
    spoke_h2([entry(bed, "%s-%d" % (m, i)) for i in range(1, 5)])
    recs = client_records(hgw, t.client, mark, 4)
    assert sorted((r["method"], r["status"], r["upstream_proto"]) for r in recs) == \
        [("GET", 200, "h2"), ("GET", 204, "h2"), ("GET", 304, "h2"), ("HEAD", 200, "h2")], recs


# --- 5. Trailers -------------------------------------------------------------------------------

@pytest.mark.parametrize("path,length,body", [
    ("/trailer/data.txt", "23", b"a body before trailers\n"),
    ("/trailer/page.html", None, b"<p>replaced-by-nginx before trailers</p>\n")],
    ids=["content_length", "no_length"])
def test_response_trailers_reach_the_h2_client(hgw, bed, path, length, body):
    """h2.test's /trailer/ answers with a trailer after its body (nginx add_trailer: a HEADERS
    frame after the DATA, with END_STREAM), a body with a content-length or without one: the h2
    client gets the trailer as trailers, after the whole body, on a stream that then ends (sent
    with `te: trailers`, as gRPC clients send it)."""
    m, mark = marker(), hgw.audit.mark()
    with open_h2(hgw) as t:
        s = t.one("GET", path + "?m=" + m, headers=[("te", "trailers")])
    assert (s.status, s.header("content-length"), s.body, s.ended) == \
        (200, length, body, True), s.describe()
    assert s.trailers == [("x-trailer", "trailer-value")], s.describe()
    spoke_h2([entry(bed, m)])
    rec = client_records(hgw, t.client, mark, 1)[0]
    h2_record(rec, hgw, path + "?m=" + m, "h2", status=200)


# --- 3. Pooling ---------------------------------------------------------------------------------

def test_concurrent_streams_share_one_upstream_connection(hgw, bed):
    """20 streams opened on one tunnel before any answer is read: all answered, and all carried
    by ONE upstream HTTP/2 connection (one nginx $connection), not one connection each
    (docs/wire.md#http2-toward-origins, "Shared sessions": at most 100 streams a session)."""
    m, mark = marker(), hgw.audit.mark()
    with open_h2(hgw) as t:
        ids = [t.request("GET", "/whoami.txt?m=%s-%d" % (m, i)) for i in range(20)]
        streams = t.wait(*ids)
    assert [(s.status, s.body) for s in streams] == [(200, b"h2.test\n")] * 20, \
        t.describe()
    spoke_h2([entry(bed, "%s-%d" % (m, i)) for i in range(20)])
    recs = client_records(hgw, t.client, mark, 20)
    assert {r["upstream_proto"] for r in recs} == {"h2"}, recs


def test_a_burst_on_another_worker_waits_for_one_dial(sluice_binary, bed):
    """Two workers. A connection on one of them makes h2.test known to choose h2; then, on a
    connection the OTHER worker serves (which has no session to h2.test yet), 20 streams opened
    at once cost that worker one dial: all 20 ride one new upstream connection, not one each
    (docs/wire.md#http2-toward-origins, "One dial for a burst": what an origin chose is the
    sandbox's to know, whichever worker dialled it). The serving worker is sluice's debug
    line "accepted from CLIENT ... on worker N"."""
    runner = Runner(sluice_binary, bed)
    try:
        gw = Gateway(runner.start(env={"SLUICE_WORKERS": "2", "SLUICE_LOG": "debug"}), bed)

        def worker_of(client):
            pattern = r"accepted from %s for sandbox sbx1 on worker (\d+)" % re.escape(client)
            return wait_until(lambda: re.findall(pattern, gw.sluice.stderr()), 10,
                              "the accept line of " + client)[0]

        warm = marker()
        with open_h2(gw) as t:
            s = t.one("GET", "/whoami.txt?m=" + warm)
            assert (s.status, s.body) == (200, b"h2.test\n"), s.describe()
            first_worker = worker_of(t.client)
        warm_connection = spoke_h2([entry(bed, warm)])

        held, other = [], None
        try:
            for _ in range(20):  # the workers share the accepts (at most a few tries)
                t = open_h2(gw)
                held.append(t)
                if worker_of(t.client) != first_worker:
                    other = t
                    break
            assert other is not None, "20 connections, all served by worker " + first_worker
            m = marker()
            ids = [other.request("GET", "/whoami.txt?m=%s-%d" % (m, i)) for i in range(20)]
            streams = other.wait(*ids)
            assert [(x.status, x.body) for x in streams] == [(200, b"h2.test\n")] * 20, \
                other.describe()
        finally:
            for t in held:
                t.close()
        burst_connection = spoke_h2([entry(bed, "%s-%d" % (m, i)) for i in range(20)])
        assert burst_connection != warm_connection, \
            "the other worker's streams rode the first worker's session"
    finally:
        runner.stop_all()


def one_get(gw, m):
    with open_h2(gw) as t:
        s = t.one("GET", "/whoami.txt?m=" + m)
    assert (s.status, s.body) == (200, b"h2.test\n"), s.describe()
    return t.client


def test_a_later_connection_of_the_same_sandbox_reuses_the_upstream(hgw, bed):
    """A client connection of sbx1 makes a request and closes; a second one, opened after the
    first has finished, is served over the same upstream HTTP/2 connection (same nginx
    $connection): the session is per (sandbox, H, port), not per client connection
    (docs/wire.md#http2-toward-origins, "Shared sessions")."""
    first, second, mark = marker(), marker(), hgw.audit.mark()
    one_get(hgw, first)
    entry(bed, first)
    one_get(hgw, second)
    spoke_h2([entry(bed, first), entry(bed, second)])
    recs = hgw.audit.wait(mark, lambda r: first in r["url"] or second in r["url"], count=2)
    assert [r["upstream_proto"] for r in recs] == ["h2", "h2"], recs


def test_another_sandbox_never_rides_the_first_ones_upstream(hgw, sbx2, bed, files):
    """sbx1's upstream connection to h2.test is busy (a download held in flight by the client's
    window) and then idle in the pool; sbx2's requests to the same H and port, at both times,
    go over an HTTP/2 connection of their own (another nginx $connection), and sbx1's next
    request still rides its own (docs/wire.md#http2-toward-origins: "a session never carries
    another sandbox's request")."""
    m1, m2, m3, m4, held = marker(), marker(), marker(), marker(), marker()
    mark = hgw.audit.mark()
    with open_h2(hgw, conn_window=16 << 20) as t:
        a = t.request("GET", BIG_PATH + "?m=" + held)
        t.hold_streams.add(a)
        s = t.one("GET", "/whoami.txt?m=" + m1)
        assert (s.status, s.body) == (200, b"h2.test\n"), s.describe()
        one_get(sbx2, m2)  # while sbx1's connection carries a stream
        t.cancel(a)
    one_get(sbx2, m3)      # while it is idle
    one_get(hgw, m4)
    mine = spoke_h2([entry(bed, held), entry(bed, m1), entry(bed, m4)])
    theirs = spoke_h2([entry(bed, m2), entry(bed, m3)])
    assert mine != theirs, "sbx2's requests rode sbx1's upstream connection %s" % mine
    recs = hgw.audit.wait(mark, lambda r: any(x in r["url"] for x in (m2, m3)), count=2)
    for rec in recs:
        expect.record(rec, sandbox=OTHER, decision="allow", upstream_proto="h2")


# --- 4. Flow control ----------------------------------------------------------------------------

def test_a_stream_the_client_does_not_read_holds_up_no_other(hgw, bed, files):
    """On one client connection (its connection window 16 MiB, its stream windows 64 KiB),
    stream A downloads 200 MiB and the client never gives A's window back; streams B (small)
    and C (1 MiB, beyond a window) on the same connection still complete, over the same
    upstream connection as A: A's unread data holds neither the client's connection window nor
    the upstream connection's (docs/wire.md#http2-toward-origins, "Flow control end to end").
    The client then resets A, which reaches the origin ("Endings": RST_STREAM toward it, so
    nginx logs A as ended) having sent a small part of the file: a stream holds at most one
    window of response (256 KiB; 2 MiB allowed here), never the whole download."""
    a_m, b_m, c_m = marker(), marker(), marker()
    with open_h2(hgw, conn_window=16 << 20) as t:
        a = t.request("GET", BIG_PATH + "?m=" + a_m)
        t.hold_streams.add(a)
        t.read_until(lambda: len(t.streams[a].data) >= 65535, "A's first window")
        b = t.wait(t.request("GET", "/whoami.txt?m=" + b_m), timeout=5)[0]
        c = t.wait(t.request("GET", MIB_PATH + "?m=" + c_m), timeout=10)[0]
        assert not t.streams[a].done and len(t.streams[a].data) == 65535, \
            t.streams[a].describe()
        t.cancel(a)
        d = t.one("GET", "/whoami.txt?m=" + b_m + "-after")
    assert (b.status, b.body) == (200, b"h2.test\n"), b.describe()
    assert (c.status, c.body == files) == (200, True), c.describe()
    assert (d.status, d.body) == (200, b"h2.test\n"), d.describe()
    ea = entry(bed, a_m)  # logged once the reset reached nginx
    spoke_h2([ea, entry(bed, b_m), entry(bed, c_m)])
    assert int(ea["bytes_sent"]) < 2 << 20, "nginx sent %s bytes of A" % ea["bytes_sent"]


# --- 7. Denials beside pooled streams -----------------------------------------------------------

def test_a_denied_stream_between_pooled_ones_is_never_forwarded(hgw, bed):
    """On an h2 tunnel to h2.test whose streams ride one upstream HTTP/2 connection, a stream for
    another allowed host on the same port (allowed.test) is 403 host_mismatch on its stream and
    goes nowhere: not onto the upstream connection to h2.test (whose nginx would route it by
    :authority), not to the CDN; the streams before and after it ride that connection."""
    m, ok, mark = marker(), marker(), hgw.audit.mark()
    with open_h2(hgw) as t:
        before = t.one("GET", "/whoami.txt?m=%s-1" % ok)
        denied = t.one("GET", "/whoami.txt?m=" + m, authority=hgw.authority("allowed.test"))
        after = t.one("GET", "/whoami.txt?m=%s-2" % ok)
        assert t.terminated is None and t.closed is None, t.describe()
    expect.denial(denied, 403, "host_mismatch")
    assert (before.status, after.status) == (200, 200), t.describe()
    spoke_h2([entry(bed, ok + "-1"), entry(bed, ok + "-2")])
    assert origin_saw(bed, m) == []
    assert cdn_hits(bed, m) == []
    recs = client_records(hgw, t.client, mark, 3)
    deny = [r for r in recs if r["decision"] == "deny"]
    assert len(deny) == 1, recs
    expect.record(deny[0], reason="host_mismatch", status=403, proto="h2", upstream=None,
                  upstream_proto=None)
    assert m in deny[0]["url"], deny[0]
    assert sorted(r["upstream_proto"] for r in recs if r["decision"] == "allow") == \
        ["h2", "h2"], recs

