"""What the origin is told beyond the policy. A request is its Host and target as the policy
checked them:

- headers through which origins, frameworks and CDNs let a request claim another host, path,
  scheme, port, method or client (X-Forwarded-Host, X-Original-URL, Forwarded, ...) and every
  Proxy-* header are dropped from the head sluice writes
  (docs/wire.md#headers-the-origin-never-gets-from-the-sandbox), whatever case or '_' for '-' they are spelt with;
- a path that reads otherwise after one more percent-decoding (/v1/public/%252e%252e/admin)
  matches no path prefix: 403 not_allowed_path, never forwarded (docs/policy.md#paths), and `sluice explain` says the same.

The origin's view is nginx's: /claims/ logs every header of nginx_conf.CLAIM_HEADERS
(claims.log), underscores read as dashes as CGI does."""
import json
import socket
import subprocess

import pytest

import expect
from http1 import request_bytes
from netutil import clean_env
from nginx_conf import CLAIM_HEADERS, claim_variable
from oracles import cdn_hits, get, marker


# nginx reads X-Forwarded-For through a header of its own ($http_x_forwarded_for joins every
# such field), which an underscore spelling does not reach: the oracle cannot see that one
# spelled with '_' (the unit tests of the table cover it).
NGINX_OWN = {"X-Forwarded-For"}


def observable(spell):
    return [n for n in CLAIM_HEADERS if spell is as_named or n not in NGINX_OWN]


def as_named(name):
    return name


def claim_headers(spell=as_named):
    return [(spell(name), "claim-%d" % i) for i, name in enumerate(CLAIM_HEADERS)
            if name in observable(spell)]


def underscored(name):
    """X-Forwarded-Host -> x_forwarded_HOST: '_' for '-' and a case nginx does not care about."""
    parts = name.split("-")
    if len(parts) == 1:
        return name.upper()
    return "_".join(parts[:-1]).lower() + "_" + parts[-1].upper()


def claims_logged(bed, m):
    entries = bed.nginx.wait_access("claims", lambda e: m in e["uri"])
    assert len(entries) == 1, entries
    return entries[0]


def sent_claims(entry):
    return {claim_variable(n): entry[claim_variable(n)] for n in CLAIM_HEADERS
            if entry[claim_variable(n)] != ""}


@pytest.mark.parametrize("spell", [as_named, underscored], ids=["as_named", "underscored"])
def test_oracle_nginx_logs_every_claim_header(bed, spell):
    """Premise: sent straight to nginx (no sluice), every claim header is in claims.log, also
    spelt with '_' for '-'; so an empty field below means sluice dropped it."""
    m = marker()
    with socket.create_connection(("127.0.0.20", bed.plain_port), timeout=10) as s:
        s.sendall(request_bytes("GET", "/claims/" + m, "allowed.test", keep_alive=False,
                                headers=claim_headers(spell) + [("X-Test", m)]))
        while s.recv(65536):
            pass
    entry = claims_logged(bed, m)
    missing = [n for n in observable(spell) if claim_variable(n) not in sent_claims(entry)]
    assert missing == [], entry
    assert entry["x_test"] == m


@pytest.mark.parametrize("spell", [as_named, underscored], ids=["as_named", "underscored"])
def test_claim_headers_never_reach_the_origin_through_a_tunnel(gw, bed, spell):
    """Edge case: an allowed request inside a CONNECT tunnel carries every claim header
    (and Proxy-Foo, Proxy): it is forwarded, and the origin gets none of them; an ordinary
    header beside them (X-Test) arrives."""
    m = marker()
    ex = gw.tunnel("allowed.test", [get("/claims/" + m, keep_alive=False,
                                        headers=claim_headers(spell) + [("X-Test", m)])])
    assert (ex.final.status, ex.final.body) == (200, b"claims\n"), ex.final
    entry = claims_logged(bed, m)
    assert sent_claims(entry) == {}, "the origin was told: %r" % sent_claims(entry)
    assert (entry["host"], entry["x_test"]) == ("allowed.test", m)


def test_claim_headers_never_reach_the_origin_when_forwarding_plain_http(gw, bed):
    """Edge case: the same over the proxy listener's absolute-form http:// forwarding."""
    m = marker()
    ex = gw.forward([request_bytes("GET", gw.url("allowed.test", "/claims/" + m, "http"),
                                   "allowed.test:%d" % gw.p, keep_alive=False,
                                   headers=claim_headers() + [("X-Test", m)])])
    assert (ex.final.status, ex.final.body) == (200, b"claims\n"), ex.final
    entry = claims_logged(bed, m)
    assert sent_claims(entry) == {}, "the origin was told: %r" % sent_claims(entry)
    assert entry["x_test"] == m


# --- Paths that origins decode more than once ------------------------------------------------

DOUBLE_ENCODED = [
    "/v1/public/%252e%252e/private/secret.txt",
    "/v1/public/%252E%252e/private/secret.txt",
    "/v1/public/..%252fprivate/secret.txt",
    "/v1/public/%25%32%65%25%32%65/private/secret.txt",
    "/v1/public/%25252e%25252e/private/secret.txt",
]


def explain(gw, path):
    r = subprocess.run([gw.sluice.binary, "explain", "-c", gw.sluice.config_path, "--sandbox",
                        "sbx1", "--url", gw.url("api.allowed.test", path)],
                       capture_output=True, text=True, timeout=30, env=clean_env())
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None), r.stderr


@pytest.mark.parametrize("path", DOUBLE_ENCODED)
def test_double_encoded_path_is_not_allowed_path(gw, bed, path):
    """Edge case: rule `api` allows GET under /v1/public/ only. A path that an origin
    decoding twice reads as /v1/public/../private/...: 403 not_allowed_path, on record, the
    connection closed, nothing reaches nginx; `sluice explain` says the same."""
    m, mark = marker(), gw.audit.mark()
    ex = gw.tunnel("api.allowed.test", [get(path + "?m=" + m, "api.allowed.test")])
    expect.denial(ex, 403, "not_allowed_path")
    expect.closed(ex)
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="not_allowed_path", sni="api.allowed.test",
                  status=403, upstream=None)
    assert cdn_hits(bed, m) == []
    code, verdict, err = explain(gw, path)
    assert verdict is not None, err
    assert (code, verdict["decision"], verdict["reason"]) == (1, "deny", "not_allowed_path"), \
        verdict


@pytest.mark.parametrize("path,status,body", [
    ("/v1/public/hello.txt", 200, b"public hello\n"),
    # "%25" followed by no escape reads the same however often it is decoded: allowed.
    ("/v1/public/100%25off", 404, None),
])
def test_single_encoded_path_under_the_prefix_is_forwarded(gw, bed, path, status, body):
    """The plain allowed path and an encoded '%' that is no second escape are still forwarded
    (and explain allows them)."""
    m = marker()
    ex = gw.tunnel("api.allowed.test", [get(path + "?m=" + m, "api.allowed.test",
                                            keep_alive=False)])
    assert ex.final.status == status, ex.final
    if body is not None:
        assert ex.final.body == body
    assert [e["uri"] for e in cdn_hits(bed, m)] == [path + "?m=" + m]
    code, verdict, err = explain(gw, path)
    assert verdict is not None, err
    assert (code, verdict["decision"]) == (0, "allow"), verdict
