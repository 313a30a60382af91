"""docs/threat-model.md#shared-cdns: the shared CDN. allowed.test and other.test live on one address
and nginx routes on Host (test_cdn_routes_by_host_not_sni proves it), so the CONNECT target, the SNI
and every request's Host must agree, on every request of a connection."""
import uuid

import expect
from http1 import request_bytes


def get(path, host="allowed.test", **kw):
    return request_bytes("GET", path, host, **kw)


def marker():
    return uuid.uuid4().hex[:12]


def nothing_logged(bed, m):
    bed.nginx.barrier()
    return not [e for e in bed.nginx.access("cdn") if m in e["uri"]]


def test_shared_cdn_host_mismatch(gw, bed):
    m, mark = marker(), gw.audit.mark()
    ex = gw.tunnel("allowed.test", [get("/whoami.txt?m=" + m, host="other.test")])
    assert ex.connect.status == 200 and ex.tls_error is None
    expect.denial(ex, 403, "host_mismatch")  # over TLS, inside the tunnel
    expect.closed(ex)
    assert nothing_logged(bed, m)
    assert not [e for e in bed.nginx.access("cdn") if e["host"] == "other.test" and m in e["uri"]]
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="connect", decision="deny", reason="host_mismatch", status=403,
                  sni="allowed.test", host="other.test", method="GET", upstream=None)


def test_shared_cdn_host_mismatch_with_curl(gw, bed):
    m = marker()
    r = gw.curl(gw.url("allowed.test", "/whoami.txt?m=" + m), "-H", "Host: other.test")
    assert (r.http_connect, r.http_code, r.sluice_reason) == (200, 403, "host_mismatch")
    assert nothing_logged(bed, m)


def test_sni_of_other_tenant_after_connect(gw, bed):
    """CONNECT allowed.test, then a ClientHello for other.test: refused with a TLS alert,
    before any certificate for other.test exists."""
    m, mark = marker(), gw.audit.mark()
    ex = gw.tunnel("allowed.test", [get("/whoami.txt?m=" + m, host="other.test")],
                   sni="other.test")
    assert ex.tls_error is not None, "TLS session made for a mismatched SNI"
    assert ex.tls_error.kind == "alert", ex.tls_error
    assert ex.responses == []
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="connect", decision="deny", reason="sni_mismatch",
                  sni="other.test", upstream=None, status=None)
    assert nothing_logged(bed, m)


def test_keepalive_second_request_to_other_tenant(gw, bed):
    m1, m2, mark = marker(), marker(), gw.audit.mark()
    ex = gw.tunnel("allowed.test", [get("/whoami.txt?m=" + m1),
                                    get("/whoami.txt?m=" + m2, host="other.test")])
    first, second = ex.responses
    assert (first.status, first.body) == (200, b"allowed.test\n")
    expect.denial(second, 403, "host_mismatch")
    expect.closed(ex)
    bed.nginx.wait_access("cdn", lambda e: m1 in e["uri"])
    assert nothing_logged(bed, m2)
    recs = gw.audit.wait(mark, lambda r: r["client"] == ex.client, count=2)
    assert [(r["decision"], r["reason"], r["status"]) for r in recs] == \
        [("allow", None, 200), ("deny", "host_mismatch", 403)]


def test_pipelined_second_request_to_other_tenant(gw, bed):
    m1, m2 = marker(), marker()
    ex = gw.tunnel("allowed.test", [get("/whoami.txt?m=" + m1),
                                    get("/whoami.txt?m=" + m2, host="other.test"),
                                    get("/whoami.txt?m=" + m2 + "-3")], pipeline=True)
    assert ex.responses[0].status == 200
    expect.denial(ex.responses[1], 403, "host_mismatch")
    assert len(ex.responses) == 2
    expect.closed(ex)  # the third request is never read
    assert nothing_logged(bed, m2)


def test_absolute_form_inside_tunnel_with_other_authority(gw, bed):
    m = marker()
    target = "https://other.test:%d/whoami.txt?m=%s" % (gw.t, m)
    ex = gw.tunnel("allowed.test", [get(target, host="allowed.test")])
    expect.denial(ex, 403, "host_mismatch")
    assert nothing_logged(bed, m)


def test_host_with_another_port(gw, bed):
    m = marker()
    ex = gw.tunnel("allowed.test", [get("/whoami.txt?m=" + m, host="allowed.test:1")])
    expect.denial(ex, 403, "host_mismatch")
    assert nothing_logged(bed, m)


def test_host_with_the_connection_port_is_allowed(gw):
    ex = gw.tunnel("allowed.test", [get("/whoami.txt", host="allowed.test:%d" % gw.t,
                                        keep_alive=False)])
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")


def test_duplicate_host_header(gw, bed):
    m, mark = marker(), gw.audit.mark()
    req = request_bytes("GET", "/whoami.txt?m=" + m, "allowed.test",
                        headers=[("Host", "other.test")])
    ex = gw.tunnel("allowed.test", [req])
    expect.denial(ex, 403, "host_duplicate")
    expect.closed(ex)
    assert nothing_logged(bed, m)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="host_duplicate", upstream=None)


def test_missing_host_header(gw, bed):
    m = marker()
    ex = gw.tunnel("allowed.test", [request_bytes("GET", "/whoami.txt?m=" + m, None)])
    expect.denial(ex, 403, "host_missing")
    assert nothing_logged(bed, m)


def test_connect_to_other_tenant(gw, bed):
    mark = gw.audit.mark()
    ex = gw.tunnel("other.test", [get("/whoami.txt", host="other.test")])
    # Refused in band: the request inside gets the 403; nothing goes to the shared address.
    expect.in_band_refusal(gw, mark, ex, "not_allowed_host", "other.test", gw.t)


def test_connect_to_allowed_host_on_other_port(gw):
    mark = gw.audit.mark()
    ex = gw.tunnel("allowed.test", port=22)
    assert ex.denied_at_connect
    expect.denial(ex, 403, "not_allowed_port")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.connect_denial_record(rec, "not_allowed_port", "allowed.test", 22)
