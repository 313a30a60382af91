"""BYPASSES §4 / SPEC §5.6: requests with ambiguous framing are refused with 400 bad_request
and nothing reaches the origin; the head sluice forwards is its own, without hop-by-hop or
Proxy-* fields. Every case runs inside a CONNECT tunnel and as plain-HTTP forwarding."""
import uuid

import pytest

import expect

# (name, head lines after the request line and Host, body). {m} is a per-test marker; the
# body of each smuggles a second request that would reach the origin if framing were misread.
SMUGGLED = b"GET /smuggled-{m} HTTP/1.1\r\nHost: evil.test\r\n\r\n"
CASES = {
    "cl_and_te": (b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
                  b"0\r\n\r\n" + SMUGGLED),
    "two_different_content_lengths": (b"Content-Length: 5\r\nContent-Length: 46\r\n",
                                      b"hello" + SMUGGLED),
    "repeated_identical_content_length": (b"Content-Length: 5\r\nContent-Length: 5\r\n",
                                          b"hello"),
    "obs_fold": (b"X-Fold: a\r\n b\r\nContent-Length: 0\r\n", b""),
    "obs_fold_into_te": (b"X-Fold: a\r\n Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                         b"hello"),
    "nul_in_header_value": (b"X-Nul: a\x00b\r\nContent-Length: 0\r\n", b""),
    "bare_cr_in_header": (b"X-Abc: \rxTransfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                          b"hello"),
    "space_before_colon": (b"Content-Length : 5\r\n", b"hello" + SMUGGLED),
}


def build(target, host, extra, body, m):
    head = b"POST %s HTTP/1.1\r\nHost: %s\r\n" % (target.encode(), host.encode())
    return (head + extra + b"\r\n" + body).replace(b"{m}", m.encode())


def send(gw, transport, extra, body, m):
    path = "/upload/smuggle-" + m
    if transport == "tunnel":
        return gw.tunnel("allowed.test", [build(path, "allowed.test", extra, body, m)])
    url = gw.url("allowed.test", path, scheme="http")
    return gw.forward([build(url, "allowed.test:%d" % gw.p, extra, body, m)])


@pytest.mark.parametrize("transport", ["tunnel", "forward"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_ambiguous_framing_is_bad_request(gw, bed, transport, case):
    m, mark = uuid.uuid4().hex[:12], gw.audit.mark()
    extra, body = CASES[case]
    ex = send(gw, transport, extra, body, m)
    expect.denial(ex, 400, "bad_request")
    expect.closed(ex)
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]], "reached the origin"
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="bad_request", status=400, upstream=None)


@pytest.mark.parametrize("transport", ["tunnel", "forward"])
def test_hop_by_hop_and_proxy_headers_are_not_forwarded(gw, bed, transport):
    m = uuid.uuid4().hex[:12]
    extra = (b"X-Test: %s\r\nProxy-Authorization: Basic c2VjcmV0OnNlY3JldA==\r\n"
             b"Proxy-Connection: keep-alive\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n"
             b"Content-Length: 0\r\n" % m.encode())
    ex = send(gw, transport, extra, b"", m)
    assert ex.final.status == 200, ex.final
    entry = bed.nginx.wait_access("cdn", lambda e: e["x_test"] == m)[0]
    assert (entry["proxy_authorization"], entry["proxy_connection"], entry["x_hop"]) == \
        ("", "", "")
