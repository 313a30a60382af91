"""`admin.listen` and docs/metrics.md: what /metrics says agrees with what happened (the
audit log, the connections held open, the certificates minted, the DNS answers, the reloads),
the endpoint is a strict little HTTP/1.1 server, and it can never be reached through the proxy
(docs/policy.md#sluices-own-endpoints: sluice's own listen addresses are denied whatever `ips`
says).

Each test starts its own sluice with admin.listen on a free port of 127.0.0.1, so every counter
starts at zero and is compared exactly. Counters may follow the event they count by a moment,
so tests scrape until the expected value shows (admin_client.Admin.wait_for), never sleep.
Every scrape is parsed by prometheus_client's parser and checked (admin_client.Scrape).
"""
from collections import Counter
import copy
import os
import signal
import socket

import pytest

import clients
import expect
from admin_client import DNS_RESULTS, METRICS_TYPE, Admin, with_admin
from gateway import Gateway
from http1 import request_bytes
from netutil import read_until_closed, signal_handled, wait_until
from oracles import DnsMark, get, marker
from reload_util import rewrite_config, sighup
from sandbox_pair import A, B, two_sandboxes
from tlsraw import AT_CONNECT

SBX = "sbx1"


@pytest.fixture
def make_admin(make_gw):
    """Factory: (Gateway, Admin) of a fresh sluice with admin.listen; `edit(config, workdir,
    admin_port)` may change the config further; other keywords go to make_config."""
    def make(edit=None, **kw):
        g = make_gw(edit=with_admin(edit), **kw)
        return g, Admin(g.sluice)
    return make


# --- what the audit log says the metrics must be -----------------------------------------------

def audit_totals(records):
    """requests per (sandbox, decision, reason or ""), and per sandbox: [req bytes, resp bytes,
    records]."""
    requests = Counter((r["sandbox"], r["decision"], r["reason"] or "") for r in records)
    per_sandbox = {}
    for r in records:
        t = per_sandbox.setdefault(r["sandbox"], [0, 0, 0])
        t[0] += r["req_bytes"] or 0
        t[1] += r["resp_bytes"] or 0
        t[2] += 1
    return dict(requests), per_sandbox


def agrees_with(records, sandboxes):
    """A check for Admin.wait_for: requests_total, bytes_total and the request-duration
    histogram's _count equal what `records` (every record of `sandboxes`) say."""
    requests, per_sandbox = audit_totals(records)

    def check(scrape):
        got = scrape.requests()
        if got != requests:
            return "requests_total %r, the audit log says %r" % (got, requests)
        for sandbox in sandboxes:
            req, resp, n = per_sandbox.get(sandbox, [0, 0, 0])
            got = (scrape.value("sluice_bytes_total", sandbox=sandbox, direction="request"),
                   scrape.value("sluice_bytes_total", sandbox=sandbox, direction="response"))
            if got != (req, resp):
                return "%s: bytes_total (request, response) %r, audit sums %r" % (
                    sandbox, got, (req, resp))
            count = scrape.histogram("sluice_request_duration_seconds", sandbox=sandbox)["count"]
            if count != n:
                return "%s: request_duration_seconds_count %r, %d audit records" % (
                    sandbox, count, n)
        return None
    return check


def sandbox_value(name, sandbox, want):
    """A check: the series `name`{sandbox} is `want`."""
    def check(scrape):
        got = scrape.value(name, sandbox=sandbox)
        return None if got == want else "%s{%s} %r, expected %r" % (name, sandbox, got, want)
    return check


def gauge(sandbox, want):
    return sandbox_value("sluice_connections_active", sandbox, want)


def certs(sandbox, want):
    return sandbox_value("sluice_certs_minted_total", sandbox, want)


def dns_is(want, connects=None):
    """dns_queries_total per result (absent keys: 0), the lookup histogram's _count equal to
    their sum (one observation per lookup), and, if given, the upstream-connect _count."""
    want = {r: want.get(r, 0) for r in DNS_RESULTS}

    def check(scrape):
        got = scrape.dns()
        if got != want:
            return "dns_queries_total %r, expected %r" % (got, want)
        lookups = scrape.histogram("sluice_dns_lookup_seconds")["count"]
        if lookups != sum(want.values()):
            return "dns_lookup_seconds_count %r, %d lookups counted" % (lookups,
                                                                       sum(want.values()))
        if connects is not None:
            got = scrape.histogram("sluice_upstream_connect_seconds")["count"]
            if got != connects:
                return "upstream_connect_seconds_count %r, expected %d" % (got, connects)
        return None
    return check


def reloads(ok, failed):
    def check(scrape):
        got = (scrape.value("sluice_config_reloads_total", result="ok"),
               scrape.value("sluice_config_reloads_total", result="failed"))
        return None if got == (ok, failed) else \
            "config_reloads_total (ok, failed) %r, expected %r" % (got, (ok, failed))
    return check


def fwd_get(g, name, path, port=None):
    url = g.url(name, path, scheme="http", port=port)
    return g.forward([request_bytes("GET", url, "%s:%d" % (name, port or g.p),
                                    keep_alive=False)])


def assert_ok(ex, body=None):
    assert ex.responses and all(r.status == 200 for r in ex.responses), \
        (ex.connect and ex.connect.status, [(r.status, r.headers) for r in ex.responses],
         ex.tls_error, ex.error)
    if body is not None:
        assert ex.final.body == body


# --- 1. requests, bytes and durations against the audit log -------------------------------------

def test_requests_bytes_and_durations_equal_the_audit_log(make_admin, bed):
    """Edge case: allowed tunnel and forward requests (two on one keep-alive connection, one
    with a body) and denials at every stage (CONNECT, inside the tunnel, forward, after DNS,
    DNS itself): requests_total per (decision, reason) is exactly the audit log's count,
    bytes_total its req_bytes/resp_bytes sums, request_duration _count its record count."""
    g, admin = make_admin()
    admin.wait_for(agrees_with([], [SBX]), "the metrics of a sluice that saw nothing")
    m = marker()
    body = os.urandom(5000)
    seen = []  # (exchange, records it makes)

    ex = g.tunnel("allowed.test", [get("/whoami.txt?a=" + m),
                                   get("/small.bin?b=" + m, keep_alive=False)])
    assert_ok(ex)
    seen.append((ex, 2))
    ex = g.tunnel("allowed.test", [request_bytes("POST", "/upload/" + m, "allowed.test",
                                                 body=body, keep_alive=False)])
    assert_ok(ex, b"stored\n")
    seen.append((ex, 1))
    ex = fwd_get(g, "allowed.test", "/whoami.txt?c=" + m)
    assert_ok(ex, b"allowed.test\n")
    seen.append((ex, 1))

    # (exchange, status, reason, records): a tunnel refused in band has its own record and its
    # request's (docs/audit.md#when-a-record-is-written); one refused at the CONNECT, one.
    denials = [
        (g.tunnel("evil.test", [get("/", "evil.test")]), 403, "not_allowed_host", 2),
        (g.tunnel("evil.test", connect_headers=AT_CONNECT), 403, "not_allowed_host", 1),
        (g.tunnel("api.allowed.test", [get("/v1/private/secret.txt", "api.allowed.test")]),
         403, "not_allowed_path", 1),
        (g.tunnel("api.allowed.test", [request_bytes("POST", "/v1/public/hello.txt",
                                                     "api.allowed.test", body=b"x")]),
         403, "not_allowed_method", 1),
        (fwd_get(g, "evil.test", "/?d=" + m), 403, "not_allowed_host", 1),
        (g.tunnel("loop.wild.test", [get("/", "loop.wild.test")]), 403, "ip_denied", 1),
        (g.tunnel("nx-%s.wild.test" % m, [get("/", "nx-%s.wild.test" % m)]), 502, "dns_failed",
         1),
    ]
    for ex, status, reason, records in denials:
        expect.denial(ex, status, reason)
        seen.append((ex, records))

    mark = 0  # a fresh sluice: the whole log is this test's
    total = sum(n for _, n in seen)
    clients_used = {ex.client for ex, _ in seen}
    g.audit.wait(mark, lambda r: r["client"] in clients_used, count=total)
    records = g.audit.records()
    assert len(records) == total, "records this test did not cause: %r" % records
    requests, per_sandbox = audit_totals(records)
    assert requests[(SBX, "allow", "")] == 4 and per_sandbox[SBX][0] >= len(body), \
        (requests, per_sandbox)
    admin.wait_for(agrees_with(records, [SBX]), "metrics that agree with the audit log")
    assert g.audit.records() == records, "the audit log grew meanwhile"


# --- 2. connections_active ------------------------------------------------------------------------

def test_connections_active_follows_idle_keepalive_tunnels(make_admin):
    """Edge case: K tunnels, each idle after one keep-alive request, are K open connections;
    closing one takes the gauge down by one, closing the rest brings it back to 0."""
    g, admin = make_admin()
    admin.wait_for(gauge(SBX, 0), "no connection before any client")
    k = 3
    open_ = []
    try:
        for i in range(k):
            sock, tls, reader = clients.open_tls_tunnel(
                g.sluice.address, g.authority("allowed.test"), g.sluice.ca_pem)
            open_.append(sock)
            tls.sendall(get("/whoami.txt?idle=%d" % i))
            resp = reader.read_response()
            assert (resp.status, resp.body) == (200, b"allowed.test\n")
        admin.wait_for(gauge(SBX, k), "%d idle tunnels counted" % k)
        open_.pop().close()
        admin.wait_for(gauge(SBX, k - 1), "one tunnel fewer")
    finally:
        for sock in open_:
            sock.close()
    admin.wait_for(gauge(SBX, 0), "every tunnel closed")


# --- 3. certs_minted_total ---------------------------------------------------------------------

def test_certs_minted_counts_distinct_hosts(make_admin):
    """Edge case: a leaf is minted once per host: allowed.test twice and second.test twice
    make 2; a tunnel refused in band mints one for its name (docs/wire.md#refusals-in-band),
    once however often it is refused; a CONNECT refused at the CONNECT mints nothing."""
    g, admin = make_admin()
    admin.wait_for(certs(SBX, 0), "no certificate before any tunnel")
    for host, want in (("allowed.test", 1), ("allowed.test", 1), ("second.test", 2),
                       ("second.test", 2)):
        ex = g.tunnel(host, [get("/whoami.txt", host, keep_alive=False)])
        assert_ok(ex, (host + "\n").encode())
        assert ex.peer_names == [host]  # the handshake used the minted (or cached) leaf
        admin.wait_for(certs(SBX, want), "%d minted after a tunnel to %s" % (want, host))
    for _ in range(2):
        ex = g.tunnel("evil.test", [get("/", "evil.test")])
        expect.denial(ex, 403, "not_allowed_host")
        assert ex.peer_names == ["evil.test"]
        admin.wait_for(certs(SBX, 3), "one leaf for the name refused in band")
    expect.denial(g.tunnel("refused-early.test", connect_headers=AT_CONNECT), 403,
                  "not_allowed_host")
    scrape = admin.wait_for(certs(SBX, 3), "no leaf for a CONNECT refused at the CONNECT")
    assert scrape.value("sluice_certs_minted_total", sandbox=SBX) == 3


# --- 4. dns_queries_total ---------------------------------------------------------------------

def test_dns_queries_count_ok_and_nxdomain(make_admin, bed):
    """Edge case: each first lookup of a name dnsmasq knows is one "ok", a name it does not
    know (under an allowed pattern) one "nxdomain" and a 502 dns_failed; the lookup histogram
    observes each lookup, the connect histogram each upstream connect (none after NXDOMAIN);
    a repeat is "ok" again, "cached", or no lookup at all (a pooled upstream connection)."""
    g, admin = make_admin()
    admin.wait_for(dns_is({}, connects=0), "no lookup before any request")
    assert_ok(g.tunnel("allowed.test", [get("/whoami.txt", keep_alive=False)]))
    admin.wait_for(dns_is({"ok": 1}, connects=1), "one lookup, one connect")
    assert_ok(g.tunnel("second.test", [get("/whoami.txt", "second.test", keep_alive=False)]))
    admin.wait_for(dns_is({"ok": 2}, connects=2), "a second name looked up")

    name = "nx-%s.wild.test" % marker()
    dns = DnsMark(bed)
    ex = g.tunnel(name, [get("/", name, keep_alive=False)])
    expect.denial(ex, 502, "dns_failed")
    assert dns.asked(name), "dnsmasq was not asked %s" % name
    admin.wait_for(dns_is({"ok": 2, "nxdomain": 1}, connects=2), "an NXDOMAIN counted")

    assert_ok(g.tunnel("allowed.test", [get("/whoami.txt", keep_alive=False)]))
    scrape = admin.scrape()
    got = scrape.dns()
    assert got["ok"] + got["cached"] in (2, 3) and \
        {r: got[r] for r in ("nodata", "nxdomain", "timeout", "error")} == \
        {"nodata": 0, "nxdomain": 1, "timeout": 0, "error": 0}, got
    assert scrape.histogram("sluice_dns_lookup_seconds")["count"] == sum(got.values())


def test_dns_queries_count_a_timeout(make_admin, bed):
    """Edge case: a resolver that never answers: the lookup is one "timeout", the request a
    502 dns_failed, and no upstream connect happens."""
    g, admin = make_admin(dns_servers=["%s:%d" % (bed.silent_dns.ADDRESS,
                                                   bed.silent_dns.port)])
    received = bed.silent_dns.received
    ex = g.tunnel("allowed.test", [get("/whoami.txt", keep_alive=False)])
    expect.denial(ex, 502, "dns_failed", token_key="dns_timeout")
    assert bed.silent_dns.received > received
    admin.wait_for(dns_is({"timeout": 1}, connects=0), "a DNS timeout counted")


# --- 5. config_reloads_total ----------------------------------------------------------------------

def with_other_test(bed):
    def change(config):
        config["policies"]["bed"]["rules"].append(
            {"name": "other", "hosts": ["other.test"], "ports": [bed.tls_port],
             "ips": ["127.0.0.20/32"]})
    return change


def test_sighup_reloads_count_ok(make_admin, bed):
    """Edge case: SIGHUP with the file unchanged is one applied reload; a changed file is
    applied (docs/cli.md#reloads: a change of the config file reloads by itself, counted as well)
    and takes effect; SIGHUP after it counts one more. No reload is counted as failed."""
    g, admin = make_admin()
    s = g.sluice
    admin.wait_for(reloads(0, 0), "no reload yet")
    sighup(s)
    admin.wait_for(reloads(1, 0), "SIGHUP counted as an applied reload")
    expect.denial(g.tunnel("other.test", [get("/", "other.test")]), 403, "not_allowed_host")

    config = copy.deepcopy(s.config)
    with_other_test(bed)(config)
    rewrite_config(s, config)
    admin.wait_for(reloads(2, 0), "the changed file reloaded")
    assert_ok(g.tunnel("other.test", [get("/whoami.txt", "other.test", keep_alive=False)]),
              b"other.test\n")
    sighup(s)
    admin.wait_for(reloads(3, 0), "a second SIGHUP counted")


def test_sighup_with_a_broken_config_counts_failed_and_keeps_serving(make_admin, bed):
    """Edge case: a good config is applied (other.test allowed), then the file is replaced by
    one with an unknown key: the change is refused (docs/cli.md#reloads: reloaded by itself, counted
    failed), and SIGHUP with it counts one more failure; the applied config keeps serving, the
    ok count does not move, and every scrape in between parses."""
    g, admin = make_admin()
    s = g.sluice
    good = copy.deepcopy(s.config)
    with_other_test(bed)(good)
    rewrite_config(s, good)
    admin.wait_for(reloads(1, 0), "the good config applied")

    broken = copy.deepcopy(good)
    broken["no_such_key"] = 1
    rewrite_config(s, broken)
    admin.wait_for(reloads(1, 1), "the broken file refused")
    sighup(s)
    admin.wait_for(reloads(1, 2), "SIGHUP with a broken config counted as failed")
    assert_ok(g.tunnel("other.test", [get("/whoami.txt", "other.test", keep_alive=False)]),
              b"other.test\n")
    assert_ok(g.tunnel("allowed.test", [get("/whoami.txt", keep_alive=False)]),
              b"allowed.test\n")
    expect.denial(g.tunnel("evil.test", [get("/", "evil.test")]), 403, "not_allowed_host")
    admin.wait_for(reloads(1, 2), "nothing more counted")


# --- 6. the endpoint as an HTTP server --------------------------------------------------------

def assert_answer(ans, status, body=None):
    assert ans.status == status, "%r %r %r" % (ans.status, ans.headers, ans.raw[:300])
    assert (ans.header("Connection") or "").lower() == "close", ans.headers
    assert ans.header("Content-Length") == str(len(ans.body)), ans.headers
    assert ans.close_how in ("eof", "reset"), "connection left open after the answer"
    if body is not None:
        assert ans.body == body


def test_admin_routes_methods_and_malformed_requests(make_admin):
    """Edge case: /healthz is 200 "ok\\n"; another path 404; another method 405 with Allow;
    HEAD /metrics has the Content-Length of GET and no body; bytes that are not HTTP 400; a
    head over 8 KiB 431 (or a close without an answer). One answer per connection, then close."""
    _, admin = make_admin()
    assert_answer(admin.get("/healthz"), 200, b"ok\n")
    head = admin.request("HEAD", "/healthz")
    assert (head.status, head.body) == (200, b"") and \
        head.header("Content-Length") in (None, "3"), (head.status, head.headers, head.body)
    assert head.close_how in ("eof", "reset")
    for path in ("/", "/nope", "/metrics/x", "/metricsx", "/healthz/"):
        ans = admin.get(path)
        assert_answer(ans, 404)

    for method in ("POST", "PUT", "DELETE", "OPTIONS", "PATCH"):
        ans = admin.request(method, "/metrics", headers=[("Content-Length", "0")])
        assert_answer(ans, 405)
        allow = {m.strip() for m in (ans.header("Allow") or "").split(",")}
        assert allow == {"GET", "HEAD"}, "%s: Allow %r" % (method, ans.header("Allow"))

    ans = admin.request("HEAD", "/metrics")
    assert ans.status == 200 and ans.body == b"", (ans.status, ans.headers, ans.body[:200])
    assert ans.header("Content-Type") == METRICS_TYPE, ans.headers
    assert ans.close_how in ("eof", "reset")
    scrape_len = len(admin.scrape().text.encode())
    # nothing happened in between on this idle sluice: GET's body has the length HEAD said
    assert ans.header("Content-Length") == str(scrape_len), (ans.headers, scrape_len)

    for garbage in (b"this is not http\r\n\r\n", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\r\n\r\n",
                    b"GET /metrics HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"):
        ans = admin.exchange(garbage)
        assert_answer(ans, 400)

    big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 9000 + b"\r\n\r\n"
    ans = admin.exchange(big)
    assert ans.close_how in ("eof", "reset"), "a 9 KiB head left the connection open"
    assert ans.status in (431, None), (ans.status, ans.headers, ans.raw[:200])
    admin.scrape()  # still serving


def test_admin_closes_a_silent_client_and_keeps_serving(make_admin):
    """Edge case: a client that connects and sends nothing, and one that stops mid-head, are
    closed by the server within seconds (not asserted how many) without a 200; scrapes made
    meanwhile are answered."""
    _, admin = make_admin()
    silent = socket.create_connection(admin.address, timeout=10)
    partial = socket.create_connection(admin.address, timeout=10)
    admin.client_ports.update({silent.getsockname()[1], partial.getsockname()[1]})
    try:
        partial.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        admin.scrape()
        assert_answer(admin.get("/healthz"), 200, b"ok\n")
        for sock in (silent, partial):
            data, how, _ = read_until_closed(sock, 60)
            assert how in ("eof", "reset"), "a silent admin client still open after 60 s"
            assert not data.startswith(b"HTTP/1.1 200"), data[:200]
    finally:
        silent.close()
        partial.close()
    admin.scrape()


def test_healthz_is_503_draining_during_shutdown(make_admin, bed):
    """Edge case: SIGTERM with a download in flight (stalled by the client, so the drain
    waits): /healthz answers 503 "draining\\n" until sluice exits; it exits 0 once the
    download's connection closes."""
    g, admin = make_admin(limits={"shutdown_grace": "60s"})
    s = g.sluice
    sock, tls, reader = clients.open_tls_tunnel(g.sluice.address, g.authority("allowed.test"),
                                                g.sluice.ca_pem)
    try:
        tls.sendall(get("/big.bin", keep_alive=False))
        head = reader.read_head()
        assert head.status == 200, head
        got = len(reader.buf)
        while got < 1 << 20:  # then stop reading: sluice's writes back up, nothing finishes
            got += len(tls.recv())
        assert_answer(admin.get("/healthz"), 200, b"ok\n")
        wait_until(lambda: signal_handled(s.proc.pid, signal.SIGTERM), 5, "a SIGTERM handler")
        os.kill(s.proc.pid, signal.SIGTERM)

        def draining():
            ans = admin.get("/healthz")
            return ans if ans.status == 503 else None
        ans = wait_until(draining, 20, "/healthz to say 503 while draining")
        assert_answer(ans, 503, b"draining\n")
        assert s.proc.poll() is None, "sluice exited with the download in flight"
    finally:
        sock.close()
    code = s.proc.wait(timeout=30)
    s.exit_code, s.exit_checked = code, True
    assert code == 0, s.stderr()[-2000:]


# --- 7. the admin endpoint through the proxy ----------------------------------------------------

def admin_rules(bed):
    """Rules that would open the admin address if sluice dialled its own endpoints: a name
    that resolves to 127.0.0.1 and the literal, on the admin port, with ips 127.0.0.0/8; and a
    control, the same name on the canary's plain port, which must work."""
    def edit(config, workdir, port):
        config["policies"]["bed"]["rules"] += [
            {"name": "admin-name", "hosts": ["loop.wild.test"], "schemes": ["https", "http"],
             "ports": [port], "ips": ["127.0.0.0/8"]},
            {"name": "admin-literal", "hosts": ["127.0.0.1"], "schemes": ["https", "http"],
             "ports": [port], "ips": ["127.0.0.0/8"]},
            {"name": "loop-control", "hosts": ["loop.wild.test"], "schemes": ["http"],
             "ports": [bed.plain_port], "ips": ["127.0.0.0/8"]},
        ]
    return edit


def test_admin_endpoint_is_never_reached_through_the_proxy(make_admin, bed):
    """Edge case (docs/policy.md#sluices-own-endpoints, no loops through itself): with rules whose
    `ips` open 127/8 on the admin port, CONNECT and absolute-form requests to it, by name
    (loop.wild.test -> 127.0.0.1) and by literal, are ip_denied; sluice makes no connection to its
    admin port (its connect histogram counts only the control's connect, and no socket but ours
    touches the port); /metrics then shows the denials, equal to the audit log."""
    g, admin = make_admin(edit=admin_rules(bed))
    port = admin.port
    assert admin.foreign_sockets() == []

    control = fwd_get(g, "loop.wild.test", "/whoami.txt")
    assert control.final is not None and control.final.sluice_reason is None, \
        (control.final and (control.final.status, control.final.headers))
    rec = g.audit.one(0, lambda r: r["client"] == control.client)
    expect.record(rec, decision="allow", rule="loop-control", upstream="127.0.0.1:%d" % g.p)
    admin.wait_for(dns_is({"ok": 1}, connects=1), "the control's lookup and connect")

    attempts = [
        g.tunnel("loop.wild.test", [get("/metrics", "loop.wild.test:%d" % port)], port=port),
        fwd_get(g, "loop.wild.test", "/metrics", port=port),
        fwd_get(g, "127.0.0.1", "/healthz", port=port),
        g.tunnel("127.0.0.1", [get("/metrics", "127.0.0.1:%d" % port)], port=port),
    ]
    problems = []
    for i, ex in enumerate(attempts):
        try:
            expect.denial(ex, 403, "ip_denied")
        except AssertionError as e:
            problems.append("attempt %d: %s" % (i, e))
    for ex in attempts:
        for rec in g.audit.wait(0, lambda r, c=ex.client: r["client"] == c):
            if rec["upstream"] is not None:
                problems.append("a record with an upstream: %r" % rec)
    assert admin.foreign_sockets() == [], "a connection reached the admin port: %r" % \
        admin.foreign_sockets()
    scrape = admin.wait_for(agrees_with(g.audit.records(), [SBX]), "metrics of the denials")
    connects = scrape.histogram("sluice_upstream_connect_seconds")["count"]
    assert connects == 1, "sluice made %d upstream connects; only the control's is allowed" \
        % connects
    assert not problems, "\n".join(problems)
    assert scrape.value("sluice_requests_total", sandbox=SBX, decision="deny",
                        reason="ip_denied") == len(attempts)


# --- 8. two sandboxes --------------------------------------------------------------------------

def test_two_sandboxes_each_series_carries_its_sandbox(make_admin, bed):
    """Edge case: two sandboxes over the same CDN address, each with traffic the other's
    policy refuses: every per-sandbox series exists for both, and each one's requests, bytes,
    durations and certificates are its own audit log's and its own tunnels'."""
    pair = two_sandboxes(bed)
    ga, admin = make_admin(edit=lambda config, workdir, _admin_port: pair(config, workdir))
    gb = Gateway(ga.sluice.sandbox_view(B), bed)
    body = os.urandom(3000)

    assert_ok(ga.tunnel("allowed.test", [get("/whoami.txt", keep_alive=False)]))
    assert_ok(ga.tunnel("allowed.test", [request_bytes("POST", "/upload/" + marker(),
                                                       "allowed.test", body=body,
                                                       keep_alive=False)]), b"stored\n")
    expect.denial(ga.tunnel("other.test", [get("/", "other.test")]), 403, "not_allowed_host")
    assert_ok(gb.tunnel("other.test", [get("/whoami.txt", "other.test", keep_alive=False)]),
              b"other.test\n")
    assert_ok(fwd_get(gb, "other.test", "/whoami.txt"), b"other.test\n")
    expect.denial(gb.tunnel("allowed.test", [get("/", "allowed.test")]), 403,
                  "not_allowed_host")
    expect.denial(fwd_get(gb, "allowed.test", "/"), 403, "not_allowed_host")

    # Each tunnel refused in band: its record and its request's.
    recs_a = ga.audit.wait(0, count=4)
    recs_b = gb.audit.wait(0, count=5)
    assert {r["sandbox"] for r in recs_a} == {A} and {r["sandbox"] for r in recs_b} == {B}
    records = ga.audit.records() + gb.audit.records()
    assert len(records) == 9, records
    scrape = admin.wait_for(agrees_with(records, [A, B]), "per-sandbox metrics")
    for name in ("sluice_connections_active", "sluice_certs_minted_total"):
        assert {dict(k)["sandbox"] for k in scrape.series(name)} == {A, B}, name
    assert {(dict(k)["sandbox"], dict(k)["direction"]) for k in
            scrape.series("sluice_bytes_total")} == \
        {(A, "request"), (A, "response"), (B, "request"), (B, "response")}
    assert [x["sandbox"] for x in
            scrape.histogram_series("sluice_request_duration_seconds")] in ([A, B], [B, A])
    assert scrape.value("sluice_bytes_total", sandbox=A, direction="request") == len(body)
    assert scrape.value("sluice_bytes_total", sandbox=B, direction="request") == 0
    # Each its own leaves: the names it reached, and the one it was refused in band.
    admin.wait_for(certs(A, 2), "alpha minted allowed.test and other.test")
    admin.wait_for(certs(B, 2), "beta minted other.test and allowed.test")
    admin.wait_for(gauge(A, 0), "alpha's connections closed")
    admin.wait_for(gauge(B, 0), "beta's connections closed")
