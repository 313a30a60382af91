"""BYPASSES §7: fixed limits on what sluice buffers. The bed's config sets
limits.max_header_bytes to 16KiB; a 200 MiB body streams through in bounded memory."""
import os
import uuid

import pytest

import content as C
import expect
from http1 import request_bytes
from sluice_proc import is_asan

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
