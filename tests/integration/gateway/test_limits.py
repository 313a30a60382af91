"""docs/threat-model.md#resource-exhaustion (R2, R4): fixed limits on what sluice buffers. The bed's
config sets limits.max_header_bytes to 16KiB; a 200 MiB body streams through in bounded memory."""
import os
import threading
import uuid

import pytest

import clients
import content as C
import expect
from http1 import HttpReader, request_bytes
from sluice_proc import is_asan
from tlsraw import PlainStream, open_proxy

RSS_LIMIT_MIB = 100
RSS_LIMIT_ASAN_MIB = 512  # ASan's quarantine (256 MiB) and shadow memory come on top


def big_head(total):
    """Header fields adding up to about `total` bytes, each line short (nginx would refuse
    a single line over 8 KiB, and this is about sluice's limit, not nginx's)."""
    n = total // 1000
    return [("X-Pad-%03d" % i, "p" * 985) for i in range(n)]


@pytest.mark.parametrize("transport", ["tunnel", "forward"])
def test_header_block_over_limit_is_431(gw, bed, transport):
    m, mark = uuid.uuid4().hex[:12], gw.audit.mark()
    path = "/whoami.txt?big=" + m
    if transport == "tunnel":
        ex = gw.tunnel("allowed.test", [request_bytes("GET", path, "allowed.test",
                                                      headers=big_head(20000))])
    else:
        url = gw.url("allowed.test", path, scheme="http")
        ex = gw.forward([request_bytes("GET", url, "allowed.test:%d" % gw.p,
                                       headers=big_head(20000))])
    expect.denial(ex, 431, "header_too_large")
    expect.closed(ex)
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]]
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="header_too_large", status=431, upstream=None)


def test_header_block_under_limit_passes(gw):
    ex = gw.tunnel("allowed.test", [request_bytes("GET", "/whoami.txt", "allowed.test",
                                                  headers=big_head(12000), keep_alive=False)])
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")


def test_200_mib_download_in_bounded_memory(make_gw, bed):
    g = make_gw()  # a fresh process, so VmHWM is this download's
    mark = g.audit.mark()
    url = g.url("allowed.test", "/big.bin")
    r = g.curl(url, timeout=600)
    assert r.rc == 0, r.stderr
    assert (r.http_code, r.body_len, r.body_sha256) == (200, C.BIG_SIZE, bed.content.big_sha256)
    limit = RSS_LIMIT_ASAN_MIB if is_asan(g.sluice.binary) else RSS_LIMIT_MIB
    hwm_mib = g.sluice.vm_hwm_kib() / 1024
    assert hwm_mib < limit, "sluice peaked at %.0f MiB RSS for a 200 MiB body" % hwm_mib
    rec = g.audit.one(mark, lambda r: r["url"] == url)
    expect.record(rec, decision="allow", status=200, resp_bytes=C.BIG_SIZE,
                  resp_sha256=bed.content.big_sha256)


def test_200_mib_upload_in_bounded_memory(make_gw, bed):
    """The same file sent up as a POST body; the origin stores exactly those bytes."""
    g = make_gw()
    m = uuid.uuid4().hex[:12]
    r = g.curl(g.url("allowed.test", "/upload/" + m), "-T", bed.content.big_path, "-X", "POST",
               "-H", "X-Test: " + m, "-H", "Content-Type: application/octet-stream",
               timeout=600)  # -T streams the file; --data-binary would load it into curl
    assert (r.rc, r.http_code, r.body) == (0, 200, b"stored\n"), r.stderr
    entry = bed.nginx.wait_access("cdn", lambda e: e["x_test"] == m)[0]
    try:
        assert C.sha256_file(entry["body_file"]) == bed.content.big_sha256
    finally:
        os.unlink(entry["body_file"])  # 200 MiB of disk
    limit = RSS_LIMIT_ASAN_MIB if is_asan(g.sluice.binary) else RSS_LIMIT_MIB
    hwm_mib = g.sluice.vm_hwm_kib() / 1024
    assert hwm_mib < limit, "sluice peaked at %.0f MiB RSS for a 200 MiB upload" % hwm_mib


# --- R2: oversized request line, header count, single header, CONNECT authority ----------------

def _pump(sock, data):
    """Send `data` from a thread (it stops when sluice closes); the caller reads meanwhile."""
    def run():
        try:
            sock.sendall(data)
        except OSError:
            pass  # sluice closed after answering: expected
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _encrypt(tls, data, piece=16384):
    """The TLS records of `data` (sent later by a thread: the TLS object stays in this one)."""
    out = []
    for i in range(0, len(data), piece):
        tls.obj.write(data[i:i + piece])
        out.append(tls._out.read())
    return b"".join(out)


def oversized_in_tunnel(g, payload):
    sock, tls, reader = clients.open_tls_tunnel(g.sluice.address, g.authority("allowed.test"),
                                                g.sluice.ca_pem)
    sock.settimeout(30)
    client = "%s:%d" % sock.getsockname()
    sender = _pump(sock, _encrypt(tls, payload))
    try:
        resp = reader.read_response()
        tail, how = reader.read_to_close(timeout=15)
    finally:
        sock.close()
        sender.join(timeout=30)
    return resp, tail, how, client


def oversized_forward(g, payload):
    sock = open_proxy(g.sluice.address)
    sock.settimeout(30)
    client = "%s:%d" % sock.getsockname()
    reader = HttpReader(PlainStream(sock))
    sender = _pump(sock, payload)
    try:
        resp = reader.read_response("CONNECT" if payload.startswith(b"CONNECT") else "GET")
        tail, how = reader.read_to_close(timeout=15)
    finally:
        sock.close()
        sender.join(timeout=30)
    return resp, tail, how, client


def r2_payloads(m, target_prefix, host):
    """name -> request bytes: a 1 MB URL, 100 000 header lines, one 10 MB header."""
    return {
        "url_1mb": b"GET %s/whoami.txt?m=%s&pad=%s HTTP/1.1\r\nHost: %s\r\n\r\n"
                   % (target_prefix, m, b"a" * 1_000_000, host),
        "headers_100k": b"GET %s/whoami.txt?m=%s HTTP/1.1\r\nHost: %s\r\n" % (
            target_prefix, m, host)
                        + b"".join(b"X%d: y\r\n" % i for i in range(100_000)) + b"\r\n",
        "one_header_10mb": b"GET %s/whoami.txt?m=%s HTTP/1.1\r\nHost: %s\r\nX-Big: " % (
            target_prefix, m, host) + b"b" * 10_000_000 + b"\r\n\r\n",
    }


@pytest.mark.parametrize("transport", ["tunnel", "forward"])
def test_oversized_heads_are_431_in_bounded_memory(make_gw, bed, transport):
    """Edge cases (R2): a 1 MB URL, 100 000 header lines, and one 10 MB header, each sent as
    fast as sluice reads: 431 header_too_large (max_header_bytes 16KiB), connection closed,
    nothing at the origin, one deny record each, and sluice's peak RSS stays under 100 MiB."""
    g = make_gw()  # a fresh process, so VmHWM is these requests'
    m = uuid.uuid4().hex[:12].encode()
    if transport == "tunnel":
        payloads = r2_payloads(m, b"", b"allowed.test")
    else:
        payloads = r2_payloads(m, b"http://allowed.test:%d" % g.p, b"allowed.test:%d" % g.p)
    for name, payload in payloads.items():
        mark = g.audit.mark()
        send = oversized_in_tunnel if transport == "tunnel" else oversized_forward
        resp, tail, how, client = send(g, payload)
        expect.denial(resp, 431, "header_too_large")
        assert how in ("eof", "reset"), "%s: still open after the 431" % name
        assert not tail.startswith(b"HTTP/"), (name, tail[:100])
        rec = g.audit.one(mark, lambda r: r["client"] == client)
        expect.record(rec, decision="deny", reason="header_too_large", status=431,
                      upstream=None)
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m.decode() in e["uri"]]
    limit = RSS_LIMIT_ASAN_MIB if is_asan(g.sluice.binary) else RSS_LIMIT_MIB
    hwm_mib = g.sluice.vm_hwm_kib() / 1024
    assert hwm_mib < limit, "sluice peaked at %.0f MiB RSS" % hwm_mib


def test_connect_with_64k_authority_is_refused(gw, bed):
    """Edge case (R2): CONNECT with a 64 KiB authority (over max_header_bytes): 431
    header_too_large (or 400 bad_request), closed, and the name never reaches DNS."""
    label = b"a" * 63
    name = b".".join([label] * 1040) + b".wild.test"
    mark = gw.audit.mark()
    resp, tail, how, client = oversized_forward(
        gw, b"CONNECT %s:%d HTTP/1.1\r\nHost: x\r\n\r\n" % (name, gw.t))
    got = (resp.status, resp.sluice_reason)
    assert got in {(431, "header_too_large"), (400, "bad_request")}, got
    expect.denial(resp, *got)
    assert how in ("eof", "reset")
    rec = gw.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, decision="deny", reason=got[1], status=got[0], upstream=None)
    bed.dns.barrier()
    assert not [n for n in bed.dns.queried_names() if n.startswith("a" * 63)]
