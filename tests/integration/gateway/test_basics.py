"""Allowed traffic through sluice arrives unchanged, in both directions, and is audited."""
import hashlib
import os
import subprocess
import uuid

import clients
import content as C
import expect
from h2client import H2Tunnel
from http1 import request_bytes
from netutil import clean_env
from sluice_proc import bed_rules


def marker():
    return uuid.uuid4().hex[:12]


def get(path, host="allowed.test", **kw):
    return request_bytes("GET", path, host, **kw)


def sha(data):
    return hashlib.sha256(data).hexdigest()


def test_https_get_returns_upstream_bytes_unchanged(gw, bed):
    m, mark = marker(), gw.audit.mark()
    path = "/small.bin?m=" + m
    ex = gw.tunnel("allowed.test", [get(path, keep_alive=False)])
    assert ex.peer_names == ["allowed.test"]  # minted for H by the sandbox CA (verified)
    resp = ex.final
    assert (resp.status, resp.body) == (200, bed.content.small)
    entry = bed.nginx.wait_access("cdn", lambda e: e["uri"] == path)[0]
    assert (entry["ssl_server_name"], entry["host"]) == ("allowed.test", "allowed.test")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, sandbox="sbx1", mode="connect", decision="allow", rule="cdn",
                  reason=None, sni="allowed.test", host="allowed.test", method="GET",
                  url="https://allowed.test:%d%s" % (gw.t, path), status=200,
                  resp_bytes=len(bed.content.small), resp_sha256=sha(bed.content.small),
                  proto="http/1.1", upstream_proto="http/1.1", upgrade=None)
    expect.upstream_is(rec, "127.0.0.20", gw.t)


def test_curl_https_get_through_connect(gw):
    mark = gw.audit.mark()
    r = gw.curl(gw.url("allowed.test", "/whoami.txt"))
    assert (r.rc, r.http_connect, r.http_code, r.body) == (0, 200, 200, b"allowed.test\n"), \
        r.stderr
    rec = gw.audit.one(mark, lambda r: r["url"] == gw.url("allowed.test", "/whoami.txt"))
    expect.record(rec, decision="allow", rule="cdn", sni="allowed.test", status=200)
    assert expect.host_is(rec["host"], "allowed.test", gw.t)


def test_head_has_no_body_and_connection_stays_usable(gw, bed):
    size = len(bed.content.files[("allowed.test", "/head.txt")])
    mark = gw.audit.mark()
    ex = gw.tunnel("allowed.test", [request_bytes("HEAD", "/head.txt", "allowed.test"),
                                     get("/whoami.txt", keep_alive=False)])
    head, after = ex.responses
    assert (head.status, head.header("Content-Length"), head.body) == (200, str(size), b"")
    assert (after.status, after.body) == (200, b"allowed.test\n")
    recs = gw.audit.wait(mark, lambda r: r["client"] == ex.client, count=2)
    expect.record(recs[0], method="HEAD", status=200, resp_bytes=0, decision="allow")


def test_post_body_reaches_upstream_exactly(gw, bed):
    body = os.urandom(1 << 20) + b"\r\n\r\nGET /not-a-request HTTP/1.1\r\n\r\n"
    m, mark = marker(), gw.audit.mark()
    req = request_bytes("POST", "/upload/" + m, "allowed.test", body=body, keep_alive=False,
                        headers=[("X-Test", m), ("Content-Type", "application/octet-stream")])
    ex = gw.tunnel("allowed.test", [req])
    assert (ex.final.status, ex.final.body) == (200, b"stored\n")
    entry = bed.nginx.wait_access("cdn", lambda e: e["x_test"] == m)[0]
    with open(entry["body_file"], "rb") as f:
        assert f.read() == body
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, method="POST", decision="allow", status=200, req_bytes=len(body),
                  req_sha256=sha(body))


def test_chunked_request_body_reaches_upstream_exactly(gw, bed):
    pieces = [os.urandom(n) for n in (1, 4096, 70000, 3, 16384)]
    body = b"".join(pieces)
    m = marker()
    wire = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    head = ("POST /upload/%s HTTP/1.1\r\nHost: allowed.test\r\nX-Test: %s\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" % (m, m)).encode()
    ex = gw.tunnel("allowed.test", [head + wire])
    assert ex.final.status == 200
    entry = bed.nginx.wait_access("cdn", lambda e: e["x_test"] == m)[0]
    with open(entry["body_file"], "rb") as f:
        assert f.read() == body


def test_chunked_response_passes_through(gw, bed):
    mark = gw.audit.mark()
    ex = gw.tunnel("allowed.test", [get("/chunked.html", keep_alive=False)])
    assert (ex.final.status, ex.final.body) == (200, bed.content.chunked_expected)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    # "body bytes": the decoded body, not the chunked framing on the wire (our reading)
    expect.record(rec, status=200, resp_bytes=len(bed.content.chunked_expected),
                  resp_sha256=sha(bed.content.chunked_expected))


def test_keepalive_100_requests_on_one_connection(gw, bed):
    m, mark = marker(), gw.audit.mark()
    n = 100
    reqs = [get("/whoami.txt?ka=%s&i=%d" % (m, i), keep_alive=(i < n - 1)) for i in range(n)]
    ex = gw.tunnel("allowed.test", reqs)  # one CONNECT, one TLS session
    assert [r.status for r in ex.responses] == [200] * n
    assert all(r.body == b"allowed.test\n" for r in ex.responses)
    bed.nginx.wait_access("cdn", lambda e: "ka=" + m in e["uri"], count=n)
    assert len([e for e in bed.nginx.access("cdn") if "ka=" + m in e["uri"]]) == n
    recs = gw.audit.wait(mark, lambda r: r["client"] == ex.client, count=n)
    assert len(recs) == n
    assert len({r["conn"] for r in recs}) == 1
    assert sorted(int(r["url"].rsplit("=", 1)[1]) for r in recs) == list(range(n))


def test_pip_download_through_sluice(gw, bed, scratch):
    index = gw.url("allowed.test", "/simple/")
    mark = gw.audit.mark()
    r = clients.pip_download(index, C.PKG, scratch, gw.sluice.ca_pem, proxy=gw.sluice.proxy_url)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(scratch, C.WHEEL), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == bed.content.wheel_sha256
    recs = gw.audit.wait(mark, lambda r: r["url"].endswith("/packages/" + C.WHEEL))
    expect.record(recs[0], decision="allow", rule="cdn", status=200,
                  resp_sha256=bed.content.wheel_sha256)


def test_plain_http_forwarding_with_http_rule(gw, bed):
    mark = gw.audit.mark()
    url = gw.url("allowed.test", "/whoami.txt", scheme="http")
    r = gw.curl(url)
    assert (r.http_code, r.body) == (200, b"allowed.test\n"), r.stderr
    rec = gw.audit.one(mark, lambda r: r["url"] == url)
    expect.record(rec, mode="forward", decision="allow", rule="cdn-plain", sni=None,
                  method="GET", status=200)
    expect.upstream_is(rec, "127.0.0.20", gw.p)


def test_plain_http_with_https_only_rule_is_not_allowed_scheme(make_gw, bed):
    rules = [r for r in bed_rules(bed.tls_port, bed.plain_port) if r["name"] != "cdn-plain"]
    g = make_gw(rules=rules)
    m, mark = marker(), g.audit.mark()
    url = g.url("allowed.test", "/whoami.txt?m=" + m, scheme="http")
    ex = g.forward([request_bytes("GET", url, "allowed.test:%d" % g.p)])
    expect.denial(ex, 403, "not_allowed_scheme")
    expect.closed(ex)
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]]
    rec = g.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="forward", decision="deny", reason="not_allowed_scheme",
                  status=403, upstream=None, proto="http/1.1", upstream_proto=None)


def test_second_origin_on_its_own_address(gw, bed):
    mark = gw.audit.mark()
    ex = gw.tunnel("second.test", [get("/whoami.txt", host="second.test", keep_alive=False)])
    assert (ex.final.status, ex.final.body) == (200, b"second.test\n")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, rule="second", decision="allow")
    expect.upstream_is(rec, "127.0.0.21", gw.t)


def test_method_and_path_rules(gw, bed):
    ok = gw.tunnel("api.allowed.test", [get("/v1/public/hello.txt", "api.allowed.test",
                                            keep_alive=False)])
    assert (ok.final.status, ok.final.body) == (200, b"public hello\n")
    cases = [
        (get("/v1/private/secret.txt", "api.allowed.test"), "not_allowed_path"),
        (get("/v1/public/../private/secret.txt", "api.allowed.test"), "not_allowed_path"),
        (get("/v1/public/%2e%2e/private/secret.txt", "api.allowed.test"), "not_allowed_path"),
        (request_bytes("POST", "/v1/public/hello.txt", "api.allowed.test", body=b"x"),
         "not_allowed_method"),
    ]
    for req, reason in cases:
        mark = gw.audit.mark()
        ex = gw.tunnel("api.allowed.test", [req])
        expect.denial(ex, 403, reason)
        expect.closed(ex)
        rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
        expect.record(rec, decision="deny", reason=reason, sni="api.allowed.test",
                      status=403, upstream=None)
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if "private" in e["uri"] or
                (e["host"] == "api.allowed.test" and e["method"] == "POST")]


def test_alpn_selects_h2_and_each_stream_is_checked(gw, bed):
    """sluice offers ALPN h2 and http/1.1 (docs/wire.md#tls-toward-the-sandbox): a client
    offering both gets h2, and then each stream is a request checked on its own
    (docs/wire.md#http2): one whose :authority names another host is 403 host_mismatch and
    never forwarded, one for the tunnel's host on the same connection is answered, and each
    has its record with proto h2."""
    m, mark = marker(), gw.audit.mark()
    with H2Tunnel(gw.sluice.address, gw.authority("allowed.test"), gw.sluice.ca_pem) as t:
        assert t.alpn == "h2", "ALPN %r selected" % t.alpn
        t.start()
        other = t.one("GET", "/whoami.txt?m=" + m, authority=gw.authority("other.test"))
        own = t.one("GET", "/whoami.txt")
    expect.denial(other, 403, "host_mismatch")
    assert (own.status, own.body) == (200, b"allowed.test\n"), own.describe()
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]]
    recs = gw.audit.wait(mark, lambda r: r["client"] == t.client, count=2)
    assert sorted((r["decision"], r["reason"], r["status"], r["proto"]) for r in recs) == \
        [("allow", None, 200, "h2"), ("deny", "host_mismatch", 403, "h2")], recs


# --- the reason where clients print it (docs/wire.md#denials) -------------------------------

def test_curl_sees_the_reason_in_the_status_line(gw, bed):
    """curl keeps the status lines it read (-D): a refused request's, in the tunnel that a refused
    name gets too (docs/wire.md#refusals-in-band), and a CONNECT's refused at the CONNECT (asked
    for with Sluice-Refusal), each ends "by sluice: <reason>"."""
    r = gw.curl(gw.url("other.test", "/whoami.txt"), "--http1.1")
    assert [b.status for b in r.blocks] == [200, 403], (r.blocks, r.stderr)
    assert r.blocks[-1].reason == "Forbidden by sluice: not_allowed_host", r.blocks
    r = gw.curl(gw.url("other.test", "/whoami.txt"), "--proxy-header",
                "Sluice-Refusal: at_connect")
    assert r.blocks and r.blocks[0].status == 403, (r.blocks, r.stderr)
    assert r.blocks[0].reason == "Forbidden by sluice: not_allowed_host", r.blocks[0]
    r = gw.curl(gw.url("api.allowed.test", "/v1/private/secret.txt"), "--http1.1")
    assert r.http_code == 403, r.stderr
    assert r.blocks[-1].reason == "Forbidden by sluice: not_allowed_path", r.blocks
    # Over HTTP/2 (no reason phrase) the body says it, as every denial's body does.
    r = gw.curl(gw.url("api.allowed.test", "/v1/private/secret.txt"), "--http2")
    assert r.http_code == 403 and r.body.startswith(b"sluice: not_allowed_path: "), r.body
    r = gw.curl(gw.url("other.test", "/whoami.txt"), "--http2")
    assert r.http_code == 403 and r.body.startswith(b"sluice: not_allowed_host: "), r.body


def test_pip_prints_the_reason_of_a_refused_file(gw, bed, scratch):
    """pip fetching a file from a refused name (a lockfile's URL) reads the refusal inside the
    tunnel (docs/wire.md#refusals-in-band) and prints its status line: "HTTP error 403 ...
    Forbidden by sluice: not_allowed_host"."""
    r = clients.pip_download(gw.url("allowed.test", "/simple/"),
                             gw.url("other.test", "/packages/" + C.WHEEL), scratch,
                             gw.sluice.ca_pem, proxy=gw.sluice.proxy_url)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Forbidden by sluice: not_allowed_host" in out, out


def test_pip_prints_the_reason_of_a_refused_index_refused_at_the_connect(make_gw, bed, scratch):
    """pip logs a refused index page at debug level only ("from versions: none"), so a sandbox
    whose agents fetch indexes by name may prefer `refusal: at_connect`: then pip prints the
    refused CONNECT's status line (Python's "Tunnel connection failed: 403 ..."), in the warning
    of its retry (docs/wire.md#refusals-in-band)."""
    g = make_gw(edit=lambda config, workdir: config["sandboxes"][0].update(refusal="at_connect"))
    r = clients.pip_download(g.url("other.test", "/simple/"), C.PKG, scratch,
                             g.sluice.ca_pem, proxy=g.sluice.proxy_url, retries=1)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "403 Forbidden by sluice: not_allowed_host" in out, out


URLOPEN = """
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=30)
except urllib.error.HTTPError as e:
    print(e)
"""


def test_python_urllib_prints_the_reason(gw, bed):
    """Python's urllib through sluice (https_proxy, the sandbox CA as SSL_CERT_FILE): a request
    refused inside the tunnel raises HTTPError, whose text is the status line:
    "HTTP Error 403: Forbidden by sluice: not_allowed_path"."""
    url = gw.url("api.allowed.test", "/v1/private/secret.txt")
    r = subprocess.run(["/usr/bin/python3", "-c", URLOPEN, url], capture_output=True, text=True,
                       timeout=60, env=clean_env(https_proxy=gw.sluice.proxy_url,
                                                 SSL_CERT_FILE=gw.sluice.ca_pem))
    assert r.stdout.strip() == "HTTP Error 403: Forbidden by sluice: not_allowed_path", \
        r.stdout + r.stderr
