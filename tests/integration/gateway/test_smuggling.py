"""docs/threat-model.md#request-smuggling, docs/wire.md#framing: requests with ambiguous framing are
refused with 400 bad_request and nothing reaches the origin; the head sluice forwards is its own,
without hop-by-hop or Proxy-* fields. Every case runs inside a CONNECT tunnel and as plain-HTTP
forwarding."""
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
    # H1: the other order
    "te_then_cl": (b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
                   b"0\r\n\r\n" + SMUGGLED),
    # H2: Transfer-Encoding obfuscation (only exactly `chunked` is accepted)
    "te_xchunked": (b"Transfer-Encoding: xchunked\r\n", b"5\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "te_chunked_identity": (b"Transfer-Encoding: chunked, identity\r\n",
                            b"5\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "te_identity_chunked": (b"Transfer-Encoding: identity, chunked\r\n",
                            b"5\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "te_two_lines_chunked_gzip": (b"Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
                                  b"5\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "te_two_lines_chunked_twice": (b"Transfer-Encoding: chunked\r\n"
                                   b"Transfer-Encoding: chunked\r\n",
                                   b"5\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "te_space_before_colon": (b"Transfer-Encoding : chunked\r\nContent-Length: 5\r\n",
                              b"hello" + SMUGGLED),
    "te_obs_fold": (b"Transfer-Encoding:\r\n chunked\r\nContent-Length: 5\r\n",
                    b"hello" + SMUGGLED),
    "te_gzip_only": (b"Transfer-Encoding: gzip\r\n", b"5\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "te_quoted": (b'Transfer-Encoding: "chunked"\r\n', b"5\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "te_vertical_tab": (b"Transfer-Encoding: \x0bchunked\r\nContent-Length: 5\r\n",
                        b"hello" + SMUGGLED),
    # H3: Content-Length that is not 1*DIGIT, or overflows
    "cl_plus": (b"Content-Length: +5\r\n", b"hello" + SMUGGLED),
    "cl_list": (b"Content-Length: 5, 6\r\n", b"hello" + SMUGGLED),
    "cl_hex": (b"Content-Length: 0x10\r\n", b"hello" + SMUGGLED),
    "cl_two_numbers": (b"Content-Length: 5 5\r\n", b"hello" + SMUGGLED),
    "cl_negative": (b"Content-Length: -1\r\n", b"hello" + SMUGGLED),
    "cl_empty": (b"Content-Length: \r\n", b"hello" + SMUGGLED),
    "cl_overflow_2_64_plus_5": (b"Content-Length: 18446744073709551621\r\n", b"hello" + SMUGGLED),
    "cl_over_2_63": (b"Content-Length: 9223372036854775813\r\n", b"hello" + SMUGGLED),
    # H4: header-name whitespace, CTLs, obs-fold of Host, broken line ends
    "tab_before_colon": (b"Content-Length\t: 5\r\n", b"hello" + SMUGGLED),
    "obs_fold_of_host": (b" evil.test\r\nContent-Length: 0\r\n", b""),
    "ctl_in_header_value": (b"X-Ctl: a\x01b\r\nContent-Length: 0\r\n", b""),
    "del_in_header_name": (b"X-\x7fA: b\r\nContent-Length: 0\r\n", b""),
    "space_in_header_name": (b"X A: b\r\nContent-Length: 0\r\n", b""),
    "cr_then_header": (b"X-A: b\r\n\rTransfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                       b"hello" + SMUGGLED),
    "bare_lf_between_headers": (b"X-A: b\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                                b"hello" + SMUGGLED),
    # H5: chunked-body framing (the body is sent with Transfer-Encoding: chunked)
    "chunk_size_0x": (b"Transfer-Encoding: chunked\r\n", b"0x5\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "chunk_size_leading_space": (b"Transfer-Encoding: chunked\r\n",
                                 b" 5\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "chunk_size_plus": (b"Transfer-Encoding: chunked\r\n", b"+5\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "chunk_size_overflow": (b"Transfer-Encoding: chunked\r\n",
                            b"10000000000000005\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "chunk_size_garbage": (b"Transfer-Encoding: chunked\r\n",
                           b"5x\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "chunk_ext_bare_lf": (b"Transfer-Encoding: chunked\r\n",
                          b"2;\nxx\r\n45\r\n0\r\n\r\n" + SMUGGLED),
    "chunk_size_bare_lf": (b"Transfer-Encoding: chunked\r\n", b"5\nhello\r\n0\r\n\r\n" + SMUGGLED),
    "chunk_missing_crlf_after_data": (b"Transfer-Encoding: chunked\r\n",
                                      b"5\r\nhelloXX0\r\n\r\n" + SMUGGLED),
    "chunk_data_longer_than_size": (b"Transfer-Encoding: chunked\r\n",
                                    b"3\r\nhello\r\n0\r\n\r\n" + SMUGGLED),
}

# Whole requests, for shapes the head template above cannot make: {target}, {host}, {m}.
RAW_CASES = {
    # H2: chunked on HTTP/1.0 (RFC 9112 §6.1: faulty framing)
    "te_chunked_on_http10": b"POST {target} HTTP/1.0\r\nHost: {host}\r\n"
                            b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" + SMUGGLED,
    # H4: bare LF as the only line end
    "bare_lf_line_ends": b"POST {target} HTTP/1.1\nHost: {host}\nContent-Length: 5\n\nhello" +
                         SMUGGLED,
    # H4: bare CR as line end
    "bare_cr_line_ends": b"POST {target} HTTP/1.1\rHost: {host}\rContent-Length: 5\r\r\nhello" +
                         SMUGGLED,
    # H4: whitespace before the first header (RFC 9112 §2.2: reject or ignore the line)
    "space_before_first_header": b"POST {target} HTTP/1.1\r\n Host: evil.test\r\nHost: {host}\r\n"
                                 b"Content-Length: 0\r\n\r\n",
    # H4: a NUL in the request line
    "nul_in_request_line": b"POST {target}\x00x HTTP/1.1\r\nHost: {host}\r\n"
                           b"Content-Length: 0\r\n\r\n",
    # an unknown HTTP version
    "http_version_1_2": b"POST {target} HTTP/1.2\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n",
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


def nothing_completed(bed, m, case):
    """The origin got no request of this case; or, for a malformed chunked *body* (found only
    after sluice streamed the valid head upstream), never a complete one: nginx saw the
    connection cut mid-body (its status 400, the upload sink untouched). The smuggled request
    never arrives either way."""
    bed.nginx.barrier()
    seen = [e for e in bed.nginx.access("cdn") if m in e["uri"]]
    assert not [e for e in seen if "/smuggled-" in e["uri"]], "the smuggled request arrived"
    if case.startswith("chunk_"):
        assert all(e["status"] == "400" and e["body_file"] == "" for e in seen), seen
        assert not [e for e in bed.nginx.access("sink") if m in e["uri"]], "a body was stored"
    else:
        assert not seen, "reached the origin: %r" % seen


@pytest.mark.parametrize("transport", ["tunnel", "forward"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_ambiguous_framing_is_bad_request(gw, bed, transport, case):
    m, mark = uuid.uuid4().hex[:12], gw.audit.mark()
    extra, body = CASES[case]
    ex = send(gw, transport, extra, body, m)
    expect.denial(ex, 400, "bad_request")
    expect.closed(ex)
    nothing_completed(bed, m, case)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="bad_request", status=400)
    if not case.startswith("chunk_"):  # a body error comes after the upstream was dialled
        expect.record(rec, upstream=None)


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


def send_raw(gw, transport, template, m):
    path = "/upload/smuggle-" + m
    if transport == "tunnel":
        target, host = path, "allowed.test"
    else:
        target, host = gw.url("allowed.test", path, scheme="http"), "allowed.test:%d" % gw.p
    raw = template.replace(b"{target}", target.encode()).replace(b"{host}", host.encode()) \
        .replace(b"{m}", m.encode())
    if transport == "tunnel":
        return gw.tunnel("allowed.test", [raw])
    return gw.forward([raw])


@pytest.mark.parametrize("transport", ["tunnel", "forward"])
@pytest.mark.parametrize("case", sorted(RAW_CASES))
def test_malformed_request_is_bad_request(gw, bed, transport, case):
    """H2/H4 shapes that need a whole request of their own: 400 bad_request, closed,
    nothing reaches the origin."""
    m, mark = uuid.uuid4().hex[:12], gw.audit.mark()
    ex = send_raw(gw, transport, RAW_CASES[case], m)
    expect.denial(ex, 400, "bad_request")
    expect.closed(ex)
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]], "reached the origin"
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="bad_request", status=400, upstream=None)


# Legal spellings (RFC 9110/9112): codings are case-insensitive, OWS around a field value is
# SP or HTAB. docs/wire.md#framing wants exactly `chunked`, so sluice may refuse them (400
# bad_request); if it accepts one it must read it as what it is: the body is "hello", and
# the bytes after it are a second request, judged on its own, never smuggled.
LEGAL = {
    "te_upper_case": b"Transfer-Encoding: CHUNKED\r\n",
    "te_tab_ows": b"Transfer-Encoding:\tchunked\r\n",
    "te_trailing_ows": b"Transfer-Encoding: chunked \t\r\n",
    "cl_ows": b"Content-Length: \t5 \r\n",
}


@pytest.mark.parametrize("transport", ["tunnel", "forward"])
@pytest.mark.parametrize("case", sorted(LEGAL))
def test_legal_but_unusual_framing_is_refused_or_read_exactly(gw, bed, transport, case):
    m = uuid.uuid4().hex[:12]
    extra = LEGAL[case] + b"X-Test: " + m.encode() + b"\r\n"
    body = b"hello" if b"Content-Length" in LEGAL[case] else b"5\r\nhello\r\n0\r\n\r\n"
    ex = send(gw, transport, extra, body + SMUGGLED, m)
    if ex.final.status == 400:
        expect.denial(ex, 400, "bad_request")
        expect.closed(ex)
    else:
        assert ex.final.status == 200, ex.final
        assert ex.tail == b"" or b"HTTP/1.1 403 " in ex.tail, ex.tail[:200]
        entry = bed.nginx.wait_access("cdn", lambda e: e["x_test"] == m)[0]
        with open(entry["body_file"], "rb") as f:
            assert f.read() == b"hello"
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if "/smuggled-" + m in e["uri"]], \
        "the bytes after the body reached the origin as a request"


@pytest.mark.parametrize("transport", ["tunnel", "forward"])
def test_trailers_naming_routing_and_framing_fields(gw, bed, transport):
    """H5: a chunked body whose trailer section carries Host, Content-Length and
    Transfer-Encoding. Refused (400 bad_request), or forwarded with the body exactly "hello";
    either way nothing after it reaches the origin as a request."""
    m = uuid.uuid4().hex[:12]
    extra = b"Transfer-Encoding: chunked\r\nX-Test: " + m.encode() + b"\r\n"
    body = (b"5\r\nhello\r\n0\r\nHost: evil.test\r\nContent-Length: 50\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + SMUGGLED)
    ex = send(gw, transport, extra, body, m)
    if ex.final.status == 400:
        expect.denial(ex, 400, "bad_request")
        expect.closed(ex)
        nothing_completed(bed, m, "chunk_trailer")  # found in the body, after the head
    else:
        assert ex.final.status == 200, ex.final
        entry = bed.nginx.wait_access("cdn", lambda e: e["x_test"] == m)[0]
        assert entry["host"] == "allowed.test", entry
        with open(entry["body_file"], "rb") as f:
            assert f.read() == b"hello"
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if "/smuggled-" + m in e["uri"]]


@pytest.mark.parametrize("transport", ["tunnel", "forward"])
def test_refused_head_is_audited_as_received(gw, transport):
    """docs/audit.md for a head refused as ambiguous (Content-Length with Transfer-Encoding): the
    record still describes what was received: mode ("connect" in a tunnel, "forward" for an
    absolute-form request on the proxy listener), method POST, host as the Host field said
    ("as received (null if absent)": it was present), and the url's path."""
    m, mark = uuid.uuid4().hex[:12], gw.audit.mark()
    extra, body = CASES["cl_and_te"]
    ex = send(gw, transport, extra, body, m)
    expect.denial(ex, 400, "bad_request")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="bad_request", status=400, upstream=None)
    host = "allowed.test" if transport == "tunnel" else "allowed.test:%d" % gw.p
    expect.record(rec, mode="connect" if transport == "tunnel" else "forward", method="POST",
                  host=host)
    assert (rec["url"] or "").endswith("/upload/smuggle-" + m), rec
