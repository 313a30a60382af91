"""Assertions on what sluice answers (docs/wire.md#denials) and on its audit records
(docs/audit.md)."""
import re

# RFC 9209 error tokens per reason. docs/wire.md#denials gives one per reason; where a set holds
# more, each is a token a careful reader could pick (the README of the tests lists these
# choices).
PROXY_STATUS = {
    "not_allowed_host": {"http_request_denied"},
    "not_allowed_port": {"http_request_denied"},
    "not_allowed_scheme": {"http_request_denied"},
    "not_allowed_method": {"http_request_denied"},
    "not_allowed_path": {"http_request_denied"},
    "upgrade_not_allowed": {"http_request_denied"},
    "bad_host": {"http_request_denied", "http_request_error"},
    "ip_literal": {"destination_ip_prohibited"},
    "ip_denied": {"destination_ip_prohibited"},
    "host_mismatch": {"http_request_denied"},
    "host_duplicate": {"http_request_denied", "http_request_error"},
    "host_missing": {"http_request_denied", "http_request_error"},
    "dns_failed": {"dns_error"},
    # original_dst: require_match (docs/wire.md#transparent-mode): the sandbox dialled an
    # address sluice did not find for H
    "dns_mismatch": {"destination_ip_prohibited", "http_request_denied"},
    "dns_timeout": {"dns_error", "dns_timeout"},  # dns_failed caused by a silent resolver
    "upstream_connect": {"destination_unavailable", "connection_refused"},
    "upstream_cert": {"tls_certificate_error"},
    # no connection in connect_timeout, or no answer in idle_timeout
    "upstream_timeout": {"connection_timeout", "http_response_timeout"},
    "bad_request": {"http_request_error"},
    "header_too_large": {"http_request_error", "http_request_denied"},
    "secret_misuse": {"http_request_denied"},
    # per-sandbox limits: 429 for the request rate, 503 for the connection limit
    "rate_limited": {"http_request_denied"},
    "too_many_connections": {"connection_limit_reached"},
    # a record that cannot be written keeps the sandbox's new requests out
    "audit_unavailable": {"proxy_internal_error"},
}


def proxy_status_error(value):
    """The `error` parameter of a Proxy-Status field value, or None."""
    if value is None:
        return None
    m = re.search(r";\s*error=\"?([A-Za-z0-9_.-]+)", value)
    return m.group(1) if m else None


def denial(answer, status, reason, token_key=None):
    """sluice's own answer (a Response, or an Exchange whose final answer is checked):
    status, Sluice-Reason, and the Proxy-Status error token."""
    resp = getattr(answer, "final", answer)
    if resp is None:
        ex = answer
        raise AssertionError("no HTTP answer: CONNECT %s, TLS error %s, read error %r, then "
                             "%r (%s)" % (ex.connect and ex.connect.status, ex.tls_error,
                                          ex.error, ex.tail[:100], ex.close_how))
    assert (resp.status, resp.sluice_reason) == (status, reason), \
        "got %d %r, headers %r body %r" % (resp.status, resp.sluice_reason, resp.headers,
                                            resp.body[:200])
    phrase = getattr(resp, "reason", None)  # (HTTP/2 has no reason phrase: its body says it)
    if phrase is not None:
        # docs/wire.md#denials: the status line names the reason (the line clients print)
        assert phrase.endswith(" by sluice: " + reason), \
            "status line %d %r does not name %s" % (resp.status, phrase, reason)
    assert resp.proxy_status, "no Proxy-Status header: %r" % resp.headers
    token = proxy_status_error(resp.proxy_status)
    assert token in PROXY_STATUS[token_key or reason], \
        "Proxy-Status %r: error=%r, expected one of %s" % (resp.proxy_status, token,
                                                         sorted(PROXY_STATUS[token_key or reason]))


def closed(ex):
    """After a denial sluice closes the connection and answers nothing more."""
    assert ex.close_how in ("eof", "reset"), "connection still open after the denial"
    assert not ex.tail.startswith(b"HTTP/"), "a further response followed: %r" % ex.tail[:200]


def host_is(rec_host, name, port):
    """docs/audit.md: host "as received"; clients send it with or without the port."""
    return rec_host in (name, "%s:%d" % (name, port))


def upstream_is(rec, address, port):
    assert rec["upstream"] == "%s:%d" % (address, port), rec
    assert any(a == address or a.startswith(address + ":") for a in rec["addrs"] or []), rec


def record(rec, **want):
    """Each keyword must equal the record's field; a set means "one of"."""
    for key, value in want.items():
        if isinstance(value, (set, frozenset)):
            assert rec.get(key) in value, "%s=%r, expected one of %r in %r" % (
                key, rec.get(key), value, rec)
        else:
            assert rec.get(key) == value, "%s=%r, expected %r in %r" % (
                key, rec.get(key), value, rec)


def in_band_refusal(gw, mark, ex, reason, name, port):
    """A tunnel refused in band (docs/wire.md#refusals-in-band): its CONNECT answered 200, a
    handshake with sluice's leaf for `name`, the request inside refused for `reason`, then the
    connection closed. On record: the tunnel's (its CONNECT's 200), then the request's. Returns
    both records."""
    assert ex.connect is not None and ex.connect.status == 200, ex.connect
    assert ex.peer_names == [name], ex.peer_names
    denial(ex, 403, reason)
    closed(ex)
    recs = gw.audit.wait(mark, lambda r: r["client"] == ex.client, 2)
    assert len(recs) == 2, recs
    connect_denial_record(recs[0], reason, name, port, status=200)
    record(recs[1], sandbox="sbx1", mode="connect", decision="deny", reason=reason, status=403,
           sni=name, upstream=None, addrs=[])
    return recs


def connect_denial_record(rec, reason, name, port, status=403):
    """The one record of a CONNECT refused before any tunnel. With no request inside, the
    target must be in `host` or `url` (host as the CONNECT's Host header, or
    url = https://name[:port][/], the port only when it is not 443; docs/audit.md)."""
    record(rec, sandbox="sbx1", mode="connect", decision="deny", reason=reason, status=status,
           sni=None, upstream=None, method={"CONNECT", None}, rule=None)
    origin = "https://%s" % name + ("" if port == 443 else ":%d" % port)
    url_ok = rec["url"] in (origin, origin + "/")
    assert host_is(rec["host"], name, port) or (rec["host"] is None and url_ok), rec
    assert rec["url"] is None or url_ok, rec
