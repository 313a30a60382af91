"""Per-sandbox limits (docs/wire.md#limits-and-timeouts, issue 7): `max_connections` of one sandbox
(503 too_many_connections), its request rate (`requests_per_second` with `request_burst`: 429
rate_limited), and the process-wide `limits.max_connections` (closed unanswered, but on
record). A sandbox that floods must not starve the others: `beta` has no limits and is served
throughout.

Nothing here asserts on time: the rate test bounds how many requests may pass by the tokens
that could have been refilled in the time the test really took."""
import os
import socket
import threading
import time
import uuid

import pytest

import clients
import dnswire
import expect
from admin_client import Admin, with_admin
from gateway import Gateway
from http1 import request_bytes
from netutil import free_port, listener, read_until_closed, wait_until
from oracles import get
from sluice_proc import PROXY_ADDRESS
from tlsraw import AT_CONNECT

A, B = "alpha", "beta"


def two_sandboxes(bed, alpha_limits=None, per_sandbox=None):
    t, p = bed.tls_port, bed.plain_port

    def edit(config, workdir):
        alpha = config["sandboxes"][0]
        alpha.update(name=A, ca=os.path.join(workdir, "ca-" + A), policy="both")
        if alpha_limits:
            alpha["limits"] = alpha_limits
        config["sandboxes"].append(
            {"name": B, "listen": "%s:%d" % (PROXY_ADDRESS, free_port((PROXY_ADDRESS,))),
             "ca": os.path.join(workdir, "ca-" + B), "policy": "both"})
        if per_sandbox:
            config["limits"]["per_sandbox"] = per_sandbox
        config["policies"] = {"both": {"rules": [
            {"name": "tls", "hosts": ["allowed.test"], "ports": [t], "ips": ["127.0.0.20/32"]},
            {"name": "plain", "hosts": ["allowed.test"], "schemes": ["http"], "ports": [p],
             "ips": ["127.0.0.20/32"]}]}}
    return edit


def plain_get(address, bed, tag):
    """One absolute-form GET on its own connection; (status, Sluice-Reason)."""
    url = "http://allowed.test:%d/whoami.txt?t=%s" % (bed.plain_port, tag)
    ex = clients.forward(address, [request_bytes("GET", url, "allowed.test:%d" % bed.plain_port,
                                                 keep_alive=False)])
    final = ex.final
    return (final.status, final.sluice_reason) if final is not None else (None, None)


def dns_port(avoid):
    """A port free for both UDP and TCP on 127.0.0.1 (dns_listen binds both)."""
    for _ in range(50):
        port = free_port(("127.0.0.1",), kind=socket.SOCK_DGRAM, avoid=avoid)
        if _tcp_bindable(port):
            return port
    raise RuntimeError("no port free for both UDP and TCP")


def _tcp_bindable(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def open_idle(address):
    return socket.create_connection(address, timeout=5)


def test_sandbox_connection_limit_answers_503_and_spares_the_others(start_sluice, bed):
    s = start_sluice(edit=two_sandboxes(bed, alpha_limits={"max_connections": 2}),
                     limits={"handshake_timeout": "20s"})
    alpha, beta = Gateway(s.sandbox_view(A), bed), Gateway(s.sandbox_view(B), bed)
    mark = alpha.audit.mark()
    held = [open_idle(alpha.sluice.address) for _ in range(2)]
    try:
        wait_until(lambda: listener(*alpha.sluice.address)["rx_queue"] == 0, 10,
                   "sluice to accept the two connections")
        extra = open_idle(alpha.sluice.address)
        data, how, _ = read_until_closed(extra, 10)
        extra.close()
        assert data.startswith(b"HTTP/1.1 503 "), data[:200]
        assert b"\r\nSluice-Reason: too_many_connections\r\n" in data, data[:400]
        assert b"connection_limit_reached" in data, data[:400]
        rec = alpha.audit.one(mark, lambda r: r["reason"] == "too_many_connections")
        expect.record(rec, sandbox=A, decision="deny", status=503)
        # The other sandbox is not limited by alpha's connections.
        r = beta.curl(beta.url("allowed.test", "/whoami.txt?beta=" + uuid.uuid4().hex[:8]))
        assert (r.rc, r.http_code) == (0, 200), r.stderr
    finally:
        for sock in held:
            sock.close()
    # Below the limit again: served.
    wait_until(lambda: plain_get(alpha.sluice.address, bed, "again")[0] == 200, 10,
               "alpha to be served once its connections are gone")


def test_sandbox_connection_limit_admits_exactly_max_of_a_burst(start_sluice, bed):
    """Edge case: 24 connections at once to a sandbox allowing 8, accepted by both workers:
    exactly 8 are served and 16 refused, each refusal on record. Each connection counts itself
    by the same atomic add that tells it where it stands, so two workers accepting at the same
    instant can neither both refuse nor both admit the connection at the limit."""
    limit, burst = 8, 24
    s = start_sluice(edit=two_sandboxes(bed, alpha_limits={"max_connections": limit}),
                     limits={"handshake_timeout": "20s"})
    alpha = Gateway(s.sandbox_view(A), bed)
    mark = alpha.audit.mark()
    socks = [open_idle(alpha.sluice.address) for _ in range(burst)]
    try:
        refusals = alpha.audit.wait(mark, lambda r: r["reason"] == "too_many_connections",
                                    count=burst - limit)
        for rec in refusals:
            expect.record(rec, sandbox=A, decision="deny", status=503)
        url = "http://allowed.test:%d/whoami.txt" % bed.plain_port
        served, refused = 0, 0
        for sock in socks:
            try:
                sock.sendall(request_bytes("GET", url, "allowed.test:%d" % bed.plain_port,
                                           keep_alive=False))
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused and closed already: what it was answered is read below
            data, _, _ = read_until_closed(sock, 10)
            if data.startswith(b"HTTP/1.1 200 "):
                served += 1
            else:
                assert data == b"" or b"\r\nSluice-Reason: too_many_connections\r\n" in data, \
                    data[:400]
                refused += 1
        assert (served, refused) == (limit, burst - limit)
        assert len([r for r in alpha.audit.since(mark)
                    if r["reason"] == "too_many_connections"]) == burst - limit
    finally:
        for sock in socks:
            sock.close()


def test_request_rate_gives_429_and_the_other_sandbox_is_served(start_sluice, bed):
    rate, burst = 2, 3
    s = start_sluice(edit=two_sandboxes(bed, per_sandbox={"requests_per_second": rate,
                                                          "request_burst": burst}),
                     limits={"handshake_timeout": "20s"})
    alpha = Gateway(s.sandbox_view(A), bed)
    mark = alpha.audit.mark()
    statuses = []
    started = time.monotonic()
    for i in range(12):
        statuses.append(plain_get(alpha.sluice.address, bed, "flood%d" % i))
    elapsed = time.monotonic() - started
    ok = [x for x in statuses if x[0] == 200]
    limited = [x for x in statuses if x[0] == 429]
    assert len(ok) + len(limited) == len(statuses), statuses
    assert limited and all(reason == "rate_limited" for _, reason in limited), statuses
    # At most the burst plus what refilled meanwhile (and one for rounding).
    assert len(ok) <= burst + int(elapsed * rate) + 1, (statuses, elapsed)
    assert len(ok) >= burst, statuses
    recs = alpha.audit.wait(mark, lambda r: r["reason"] == "rate_limited", count=len(limited))
    for rec in recs:
        expect.record(rec, sandbox=A, decision="deny", status=429, rule=None)


def test_a_flooding_sandbox_does_not_starve_another(start_sluice, bed):
    """alpha is limited to 5 requests per second and floods from two threads; beta, limited
    by nothing, gets every one of its requests answered 200 meanwhile."""
    s = start_sluice(edit=two_sandboxes(bed, alpha_limits={"requests_per_second": 5}),
                     limits={"handshake_timeout": "20s"})
    alpha, beta = Gateway(s.sandbox_view(A), bed), Gateway(s.sandbox_view(B), bed)
    stop = threading.Event()
    flood = {"429": 0, "other": []}

    def flooder(n):
        i = 0
        while not stop.is_set():
            status, _ = plain_get(alpha.sluice.address, bed, "f%d-%d" % (n, i))
            i += 1
            if status == 429:
                flood["429"] += 1
            elif status != 200:
                flood["other"].append(status)

    threads = [threading.Thread(target=flooder, args=(n,), daemon=True) for n in range(2)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: flood["429"] >= 5, 30, "alpha to be rate limited")
        for i in range(20):
            status, reason = plain_get(beta.sluice.address, bed, "b%d" % i)
            assert (status, reason) == (200, None), (i, status, reason)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not flood["other"], flood["other"]


def test_process_connection_limit_is_recorded(start_sluice, bed):
    """limits.max_connections: the connection beyond it is closed unanswered (test_timeouts
    checks that) and is on record as too_many_connections."""
    s = start_sluice(limits={"max_connections": 2, "handshake_timeout": "20s"})
    g = Gateway(s, bed)
    mark = g.audit.mark()
    held = [open_idle(s.address) for _ in range(2)]
    try:
        wait_until(lambda: listener(*s.address)["rx_queue"] == 0, 10,
                   "sluice to accept the two connections")
        extra = open_idle(s.address)
        data, _, _ = read_until_closed(extra, 10)
        extra.close()
        assert data == b"", data[:200]
        rec = g.audit.one(mark, lambda r: r["reason"] == "too_many_connections")
        expect.record(rec, decision="deny", status=None)
    finally:
        for sock in held:
            sock.close()


def assert_refusals_are_rate_limited(start_sluice, bed, send, refusal):
    """alpha at 1 request per second, a burst of 2; `send(alpha)` makes one request refused
    with `refusal` (status, reason) and returns its final answer. Eight in a row: each is that
    refusal or 429 rate_limited, at least one is 429, and no more refusals than the burst and
    the refill in the time really taken allow."""
    s = start_sluice(edit=two_sandboxes(bed, alpha_limits={"requests_per_second": 1,
                                                           "request_burst": 2}),
                     limits={"handshake_timeout": "20s"})
    alpha = Gateway(s.sandbox_view(A), bed)
    answers = []
    started = time.monotonic()
    for _ in range(8):
        final = send(alpha)
        answers.append((final.status, final.sluice_reason))
    elapsed = time.monotonic() - started
    assert set(answers) <= {refusal, (429, "rate_limited")}, answers
    assert (429, "rate_limited") in answers, answers
    assert answers.count(refusal) <= 2 + int(elapsed) + 1, (answers, elapsed)


@pytest.mark.parametrize("where", ["in_band", "at_connect"])
def test_refused_connects_take_tokens_too(start_sluice, bed, where):
    """A CONNECT refused by policy is a request that ends with a record: a flood of them is
    rate limited (429 rate_limited instead of 403), so it cannot fill the audit log at the
    speed of the network. Refused in band, the CONNECT and the request inside each take one
    (docs/wire.md#refusals-in-band); at the CONNECT, the CONNECT."""
    if where == "in_band":
        send = lambda alpha: alpha.tunnel("denied.test", [get("/", "denied.test")]).final
    else:
        send = lambda alpha: alpha.tunnel("denied.test", connect_headers=AT_CONNECT).final
    assert_refusals_are_rate_limited(start_sluice, bed, send, (403, "not_allowed_host"))


def test_sandbox_resolver_refuses_beyond_its_query_rate(start_sluice, bed):
    """D8: the sandbox's resolver answers at most dns_queries_per_second (a second's
    worth at once); beyond that REFUSED, without asking the policy. The other sandbox's resolver
    is not limited by alpha's flood."""
    rate = 3
    ports = {}

    def edit(config, workdir):
        two_sandboxes(bed, alpha_limits={"dns_queries_per_second": rate})(config, workdir)
        taken = {int(s["listen"].rsplit(":", 1)[1]) for s in config["sandboxes"]}
        for sandbox in config["sandboxes"]:
            ports[sandbox["name"]] = dns_port(avoid=taken | set(ports.values()))
            sandbox["dns_listen"] = "127.0.0.1:%d" % ports[sandbox["name"]]

    admin = Admin(start_sluice(edit=with_admin(lambda c, w, _admin_port: edit(c, w))))
    started = time.monotonic()
    answers = [dnswire.query("127.0.0.1", ports[A], "allowed.test").rcode for _ in range(15)]
    elapsed = time.monotonic() - started
    assert set(answers) <= {"NOERROR", "REFUSED"}, answers
    assert "REFUSED" in answers, answers
    assert rate <= answers.count("NOERROR") <= rate + int(elapsed * rate) + 1, (answers, elapsed)
    others = [dnswire.query("127.0.0.1", ports[B], "allowed.test") for _ in range(15)]
    assert all(a.rcode == "NOERROR" and a.addresses == ["127.0.0.1"] for a in others), others
    scrape = admin.scrape()
    metric = "sluice_sandbox_resolver_answers_total"
    assert scrape.value(metric, 0, sandbox=A, answer="refused") == answers.count("REFUSED")
    assert scrape.value(metric, 0, sandbox=A, answer="allowed") == answers.count("NOERROR")
    assert scrape.value(metric, 0, sandbox=B, answer="allowed") == 15


def test_malformed_requests_take_tokens_too(start_sluice, bed):
    """A request refused for its form (an origin-form target on the explicit proxy: 400
    bad_request) still costs a token: beyond the rate it is a 429 like any other."""
    def send(alpha):
        return clients.forward(alpha.sluice.address,
                               [request_bytes("GET", "/no-absolute-url", "allowed.test",
                                              keep_alive=False)]).final
    assert_refusals_are_rate_limited(start_sluice, bed, send, (400, "bad_request"))
