"""docs/configuration.md#sandboxes: several sandboxes in one process, each with its own listener,
CA, policy and (optionally) audit path. L8 (one CA per sandbox) and P7 (identity comes from the
listener the connection arrived on, never from headers the sandbox sends).

One sluice for the module: sandbox `alpha` (the bed's first listener, global audit log) allows
allowed.test over https; sandbox `beta` (a second listener, its own CA, its own audit file)
allows other.test over https and plain http. Both names live on the same CDN address.
"""
import base64
import hashlib
import os
import ssl
import uuid

import pytest

import clients
import expect
from gateway import Gateway, Runner
from http1 import request_bytes
from sandbox_pair import A, B, two_sandboxes

SANDBOX_HEADERS = [("X-Sandbox-Id", B), ("X-Sandbox", B),
                   ("Proxy-Authorization",
                    "Basic " + base64.b64encode(("%s:x" % B).encode()).decode())]


def marker():
    return uuid.uuid4().hex[:12]


@pytest.fixture(scope="module")
def sboxes(sluice_binary, bed):
    runner = Runner(sluice_binary, bed)
    try:
        s = runner.start(edit=two_sandboxes(bed))
        yield {A: Gateway(s.sandbox_view(A), bed), B: Gateway(s.sandbox_view(B), bed), "s": s}
    finally:
        runner.stop_all()


def fingerprint(pem_path):
    with open(pem_path) as f:
        return hashlib.sha256(ssl.PEM_cert_to_DER_cert(f.read())).hexdigest()


def other_of(name):
    return B if name == A else A


@pytest.mark.parametrize("name,host,allowed", [
    (A, "allowed.test", True), (A, "other.test", False),
    (B, "other.test", True), (B, "allowed.test", False)])
def test_each_sandbox_is_judged_by_its_own_policy(sboxes, bed, name, host, allowed):
    """Edge case: two listeners, two policies over the same CDN address: what one sandbox
    may reach the other may not; each record names its sandbox and lands in its log."""
    g = sboxes[name]
    m = marker()
    url = g.url(host, "/whoami.txt?m=" + m)
    mark, other_mark = g.audit.mark(), sboxes[other_of(name)].audit.mark()
    r = g.curl(url)
    if allowed:
        assert (r.rc, r.http_code, r.body) == (0, 200, (host + "\n").encode()), r.stderr
        rec = g.audit.one(mark, lambda rec: rec["url"] == url)
        expect.record(rec, sandbox=name, decision="allow", status=200,
                      rule="a-allowed" if name == A else "b-other")
    else:
        # Refused in band (docs/wire.md#refusals-in-band): the request inside gets the 403.
        assert (r.http_connect, r.http_code, r.sluice_reason) == (200, 403, "not_allowed_host"), \
            (r.http_connect, r.http_code, r.blocks, r.stderr)
        recs = g.audit.wait(mark, lambda rec: host in (rec["host"] or "") + (rec["url"] or ""),
                            2)
        assert len(recs) == 2, recs
        expect.record(recs[0], sandbox=name, method="CONNECT", decision="deny",
                      reason="not_allowed_host", status=200, upstream=None)
        expect.record(recs[1], sandbox=name, method="GET", url=url, decision="deny",
                      reason="not_allowed_host", status=403, upstream=None)
        bed.nginx.barrier()
        assert not [e for e in bed.nginx.access("cdn") if m in e["uri"]]
    stray = [x for x in sboxes[other_of(name)].audit.since(other_mark)
             if m in (x["url"] or "") or x["sandbox"] == name]
    assert not stray, "a record of %s in %s's log: %r" % (name, other_of(name), stray)


def test_sandbox_cas_differ_and_do_not_vouch_for_each_other(sboxes):
    """Edge case (L8): each sandbox has its own CA; a client that trusts only alpha's CA fails
    verification through beta (curl exit 60), and the other way round."""
    a, b = sboxes[A], sboxes[B]
    assert os.path.dirname(a.sluice.ca_pem) != os.path.dirname(b.sluice.ca_pem)
    assert fingerprint(a.sluice.ca_pem) != fingerprint(b.sluice.ca_pem)
    for via, trusted, host in ((b, a, "other.test"), (a, b, "allowed.test")):
        r = clients.curl(via.url(host, "/whoami.txt"), proxy=via.sluice.proxy_url,
                         cacert=trusted.sluice.ca_pem)
        assert r.rc == 60 and r.http_code == 0 and r.body == b"", \
            "through %s with only %s's CA: rc %d, status %d, %s" % (
                via.sluice.name, trusted.sluice.name, r.rc, r.http_code, r.stderr)


def test_sandbox_with_own_audit_path_writes_only_there(sboxes):
    """Edge case: beta has `audit:` of its own: its records go there, and the global log (where
    alpha writes) gets none of them."""
    a, b, s = sboxes[A], sboxes[B], sboxes["s"]
    assert b.audit.path != s.audit.path and a.audit.path == s.audit.path
    m = marker()
    global_mark, beta_mark = s.audit.mark(), b.audit.mark()
    url_b = b.url("other.test", "/whoami.txt?own=" + m)
    url_a = a.url("allowed.test", "/whoami.txt?own=" + m)
    assert b.curl(url_b).http_code == 200
    assert a.curl(url_a).http_code == 200
    rec_b = b.audit.one(beta_mark, lambda r: r["url"] == url_b)
    expect.record(rec_b, sandbox=B, decision="allow", status=200)
    rec_a = s.audit.one(global_mark, lambda r: r["url"] == url_a)  # also a barrier
    expect.record(rec_a, sandbox=A)
    assert not [r for r in s.audit.since(global_mark) if r["sandbox"] == B or
                r["url"] == url_b], "beta's record is in the global log"
    assert not [r for r in b.audit.since(beta_mark) if r["sandbox"] == A or
                r["url"] == url_a], "alpha's record is in beta's log"
    assert oct(os.stat(b.audit.path).st_mode & 0o777) == oct(0o600)


def test_identity_comes_from_the_listener_not_from_headers(sboxes, bed):
    """Edge case (P7): through alpha's listener, a CONNECT and a plain-http request to
    other.test (which only beta allows) carrying X-Sandbox-Id: beta and Proxy-Authorization
    for beta are judged by alpha's policy: 403 not_allowed_host, recorded as alpha; the same
    header inside an allowed tunnel changes nothing either."""
    a, b = sboxes[A], sboxes[B]
    m = marker()
    mark = a.audit.mark()
    ex = a.tunnel("other.test", [request_bytes("GET", "/whoami.txt?p7=" + m, "other.test",
                                               headers=SANDBOX_HEADERS)],
                  connect_headers=SANDBOX_HEADERS)
    # Refused in band (docs/wire.md#refusals-in-band): the request inside gets the 403, and
    # both records are alpha's.
    expect.denial(ex, 403, "not_allowed_host")
    assert ex.connect.status == 200 and ex.peer_names == ["other.test"], ex
    recs = a.audit.wait(mark, lambda r: r["client"] == ex.client, 2)
    assert len(recs) == 2, recs
    for rec in recs:
        expect.record(rec, sandbox=A, decision="deny", reason="not_allowed_host", upstream=None)

    # curl sends the headers both to the proxy (CONNECT) and inside the tunnel; asked for at the
    # CONNECT, the refusal is the CONNECT's, alpha's too.
    args = []
    for k, v in SANDBOX_HEADERS:
        args += ["--proxy-header", "%s: %s" % (k, v), "-H", "%s: %s" % (k, v)]
    r = a.curl(a.url("other.test", "/whoami.txt?p7c=" + m), *args)
    assert (r.http_connect, r.http_code, r.sluice_reason) == (200, 403, "not_allowed_host"), \
        (r.http_connect, r.http_code, r.stderr)
    r = a.curl(a.url("other.test", "/whoami.txt?p7d=" + m), "--proxy-header",
               "Sluice-Refusal: at_connect", *args)
    assert (r.http_connect, r.sluice_reason) == (403, "not_allowed_host"), \
        (r.http_connect, r.http_code, r.stderr)

    url = a.url("other.test", "/whoami.txt?p7f=" + m, scheme="http")
    mark = a.audit.mark()
    fwd = a.forward([request_bytes("GET", url, "other.test:%d" % a.p, headers=SANDBOX_HEADERS)])
    expect.denial(fwd, 403, "not_allowed_host")
    rec = a.audit.one(mark, lambda r: r["client"] == fwd.client)
    expect.record(rec, sandbox=A, mode="forward", decision="deny", reason="not_allowed_host")
    # the control: beta itself does allow that request
    ok = b.forward([request_bytes("GET", url.replace("p7f=", "p7ok="), "other.test:%d" % b.p,
                                  keep_alive=False)])
    assert (ok.final.status, ok.final.body) == (200, b"other.test\n")

    # inside alpha's allowed tunnel the header is just a header: alpha's policy, alpha's record
    mark = a.audit.mark()
    ex = a.tunnel("allowed.test", [request_bytes("GET", "/whoami.txt?p7in=" + m, "allowed.test",
                                                 headers=SANDBOX_HEADERS, keep_alive=False)],
                  connect_headers=SANDBOX_HEADERS)
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")
    rec = a.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, sandbox=A, rule="a-allowed", decision="allow")
    bed.nginx.barrier()
    leaked = [e for e in bed.nginx.access("cdn") if m in e["uri"] and "p7ok=" not in e["uri"]
              and "p7in=" not in e["uri"]]
    assert not leaked, "requests through alpha reached other.test: %r" % leaked
