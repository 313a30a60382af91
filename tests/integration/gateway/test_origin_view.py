"""What the origin is told beyond the policy (BYPASSES S10). A request is its Host and target
as the policy checked them:

- headers through which origins, frameworks and CDNs let a request claim another host, path,
  scheme, port, method or client (X-Forwarded-Host, X-Original-URL, Forwarded, ...) and every
  Proxy-* header are dropped from the head sluice writes (SPEC 5.6; README "Wire behaviour
  where SPEC.md is silent"), whatever case or '_' for '-' they are spelt with.

The origin's view is nginx's: /claims/ logs every header of nginx_conf.CLAIM_HEADERS
(claims.log), underscores read as dashes as CGI does."""
import socket

import pytest

from http1 import request_bytes
from nginx_conf import CLAIM_HEADERS, claim_variable
from oracles import get, marker


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
    """Edge case (S10): an allowed request inside a CONNECT tunnel carries every claim header
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
    """Edge case (S10): the same over the proxy listener's absolute-form http:// forwarding."""
    m = marker()
    ex = gw.forward([request_bytes("GET", gw.url("allowed.test", "/claims/" + m, "http"),
                                   "allowed.test:%d" % gw.p, keep_alive=False,
                                   headers=claim_headers() + [("X-Test", m)])])
    assert (ex.final.status, ex.final.body) == (200, b"claims\n"), ex.final
    entry = claims_logged(bed, m)
    assert sent_claims(entry) == {}, "the origin was told: %r" % sent_claims(entry)
    assert entry["x_test"] == m
