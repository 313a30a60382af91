"""docs/cli.md#reloads and README "Reload": sluice re-reads its config file on SIGHUP and when the
file changes; a bad file keeps the running config (errors as FILE:LINE:COL on stderr, counted
in sluice_config_reloads_total{result="failed"}); requests in flight finish under the config
they started with, and every new request (the next one on a keep-alive connection or inside a
tunnel included) is judged by the new one; listeners move with the config, and a listener that
cannot be opened refuses the whole reload.

The flip used throughout: allowed.test is allowed by the bed policy (rules `cdn`, `cdn-plain`);
the "denied" config is the same without those two rules, so allowed.test gets 403
not_allowed_host and everything else is as before.
"""
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid

import pytest

import clients
import content as C
import expect
from gateway import Gateway
from http1 import HttpReader, request_bytes
from netutil import free_port, listener, wait_until
from admin_client import Admin, with_admin
from reload_util import (Reloads, audit_verify, edited, error_lines, line_of, rewrite_config,
                         same_file, sighup, without_rules)
from sluice_proc import PROXY_ADDRESS, write_config
from tlsraw import HandshakeFailed, TLSStream, connect_tunnel

HOST = "allowed.test"
SLOW_RATE = "20M"   # curl --limit-rate: the 200 MiB file takes about 10 s


def marker():
    return uuid.uuid4().hex[:12]


def deny_host(s):
    """The running config without the rules that allow allowed.test."""
    return edited(s, lambda c: without_rules(c, "cdn", "cdn-plain"))


def reload_to(s, config):
    """Rewrite the config file, SIGHUP, and wait until a reload was applied."""
    reloads = Reloads(s)
    rewrite_config(s, config)
    sighup(s)
    return reloads.wait_applied()


def get_whoami(g, m):
    """One request to allowed.test through a fresh tunnel: the Exchange."""
    return g.tunnel(HOST, [request_bytes("GET", "/whoami.txt?m=" + m, HOST, keep_alive=False)])


def reloads_total(admin, result):
    """sluice_config_reloads_total{result=...} from /metrics (0 while the series is absent)."""
    return admin.scrape().value("sluice_config_reloads_total", default=0, result=result)


def is_ok(ex):
    return ex.final is not None and ex.final.status == 200 and ex.final.body == b"allowed.test\n"


def is_not_allowed(ex):
    return ex.final is not None and (ex.final.status, ex.final.sluice_reason) == \
        (403, "not_allowed_host")


# --- reload under load ---------------------------------------------------------------------------

class Load(threading.Thread):
    """Requests to allowed.test in a loop until stopped. `keepalive`: many requests per tunnel
    (a new tunnel only after the last one closed); else one tunnel per request. Each result:
    dict(start, end, kind ("connect" or "request"), status, reason, client, marker, ok, error)."""

    def __init__(self, g, tag, keepalive):
        super().__init__(daemon=True)
        self.g, self.tag, self.keepalive = g, tag, keepalive
        self.stop = threading.Event()
        self.results = []
        self.count = 0

    def _add(self, **kw):
        kw.setdefault("error", None)
        kw["end"] = time.monotonic()
        self.results.append(kw)

    def run(self):
        authority = "%s:%d" % (HOST, self.g.t)
        while not self.stop.is_set():
            start = time.monotonic()
            try:
                sock, answer, _ = connect_tunnel(self.g.sluice.address, authority, timeout=30)
            except OSError as e:
                self._add(start=start, kind="connect", status=None, reason=None, client=None,
                          marker=None, ok=False, error=repr(e))
                continue
            client = "%s:%d" % sock.getsockname()
            try:
                if answer.status != 200:
                    self._add(start=start, kind="connect", status=answer.status,
                              reason=answer.sluice_reason, client=client, marker=None, ok=False)
                    continue
                try:
                    tls = TLSStream(sock, HOST, self.g.sluice.ca_pem)
                except HandshakeFailed as e:
                    self._add(start=start, kind="connect", status=None, reason=None,
                              client=client, marker=None, ok=False, error=repr(e))
                    continue
                reader = HttpReader(tls)
                while not self.stop.is_set():
                    self.count += 1
                    m = "%s-%d" % (self.tag, self.count)
                    start = time.monotonic()
                    try:
                        tls.sendall(request_bytes("GET", "/whoami.txt?m=" + m, HOST,
                                                  keep_alive=self.keepalive))
                        resp = reader.read_response()
                    except Exception as e:  # noqa: BLE001 -- every failure is a finding
                        self._add(start=start, kind="request", status=None, reason=None,
                                  client=client, marker=m, ok=False, error=repr(e))
                        break
                    self._add(start=start, kind="request", status=resp.status,
                              reason=resp.sluice_reason, client=client, marker=m,
                              ok=resp.status == 200 and resp.body == b"allowed.test\n")
                    if not self.keepalive or resp.status != 200:
                        break
            finally:
                sock.close()


def _flip(s, config):
    """Reload to `config`; returns the time the reload was seen logged."""
    reloads = Reloads(s)
    rewrite_config(s, config)
    sighup(s)
    reloads.wait_applied()
    return time.monotonic()


def test_reload_under_load_flips_a_host_from_allowed_to_denied(start_sluice, bed):
    """Edge case: two clients hammer allowed.test (one keep-alive tunnel, one new tunnel per
    request) while the config is rewritten to deny it and SIGHUP sent. Every request either
    succeeds or gets 403 not_allowed_host; nothing succeeds after the reload is logged, nor
    after the first 403; each request has its record with the matching decision, allows first;
    the chain is intact; flipping back allows it again."""
    s = start_sluice()
    g = Gateway(s, bed)
    allowed = edited(s, lambda c: None)
    mark = g.audit.mark()
    loads = [Load(g, "ka-" + marker(), True), Load(g, "new-" + marker(), False)]
    for load in loads:
        load.start()
    try:
        wait_until(lambda: all(sum(1 for r in list(l.results) if r["ok"]) >= 10 for l in loads),
                   30, "both clients to have 10 successful requests")
        logged = _flip(s, deny_host(s))
        wait_until(lambda: all(sum(1 for r in list(l.results) if r["start"] > logged) >= 10
                               for l in loads), 30,
                   "both clients to make 10 requests after the reload")
    finally:
        for load in loads:
            load.stop.set()
        for load in loads:
            load.join(60)
    assert s.proc.poll() is None, "sluice exited: %s" % s.stderr()[-3000:]
    results = sorted((r for l in loads for r in l.results), key=lambda r: r["start"])

    failed = [r for r in results if not r["ok"] and
              (r["status"], r["reason"]) != (403, "not_allowed_host")]
    assert not failed, "requests that neither succeeded nor got 403 not_allowed_host: %r" % \
        failed[:10]
    after_log = [r for r in results if r["start"] > logged and r["ok"]]
    assert not after_log, "requests started after the reload was logged succeeded: %r" % \
        after_log[:10]
    first_403 = min(r["end"] for r in results if not r["ok"])
    late = [r for r in results if r["start"] > first_403 and r["ok"]]
    assert not late, "requests started after a 403 for the same host succeeded: %r" % late[:10]
    assert any(r["ok"] for r in results) and any(not r["ok"] for r in results)
    for load in loads:  # each client saw allows, then denials, never back
        outcomes = [r["ok"] for r in load.results]
        assert outcomes == sorted(outcomes, reverse=True), \
            "%s: a success after a denial: %r" % (load.tag, outcomes)

    # The audit log: one record per request, decision as the client saw it; allows, then denies.
    about_host = lambda r: HOST in (r["url"] or "") + (r["host"] or "")  # noqa: E731
    g.audit.wait(mark, about_host, count=len(results))  # the last may still be on their way
    recs = [r for r in g.audit.since(mark) if about_host(r)]
    by_marker = {}
    for rec in recs:
        if "?m=" in (rec["url"] or ""):
            by_marker.setdefault(rec["url"].split("?m=", 1)[1], []).append(rec)
    by_client = {}
    for rec in recs:
        by_client.setdefault(rec["client"], []).append(rec)
    for r in results:
        if r["kind"] == "request":
            got = by_marker.get(r["marker"], [])
            assert len(got) == 1, "request %s: %d records: %r" % (r["marker"], len(got), got)
            rec = got[0]
        else:
            got = [x for x in by_client.get(r["client"], []) if x["decision"] == "deny"]
            assert len(got) == 1, "CONNECT from %s: records %r" % (r["client"], got)
            rec = got[0]
        if r["ok"]:
            expect.record(rec, decision="allow", rule="cdn", status=200)
        else:
            expect.record(rec, decision="deny", reason="not_allowed_host", status=403)
    first_deny = next(i for i, rec in enumerate(recs) if rec["decision"] == "deny")
    started = {r["marker"]: r["start"] for r in results if r["marker"]}
    late_allows = [rec for rec in recs[first_deny:] if rec["decision"] == "allow" and
                   started.get(rec["url"].split("?m=", 1)[-1], 0) > first_403]
    assert not late_allows, "allow records after the first deny record: %r" % late_allows
    code, out = audit_verify(s.binary, g.audit.path)
    assert code == 0, "sluice audit verify: exit %d: %s" % (code, out)

    # and back
    reload_to(s, allowed)
    ex = get_whoami(g, marker())
    assert is_ok(ex), (ex.connect, ex.final)
    code, out = audit_verify(s.binary, g.audit.path)
    assert code == 0, "sluice audit verify after flipping back: exit %d: %s" % (code, out)


# --- bad files ---------------------------------------------------------------------------------

def _syntax_error(text):
    return text + "oops: [unclosed, flow\n", lambda line: line.startswith("oops:")


def _unknown_key(text):
    return text + "no_such_key: true\n", lambda line: line.startswith("no_such_key:")


def _unknown_policy(text):
    out = text.replace("policy: bed", "policy: no-such-policy", 1)
    assert out != text
    return out, lambda line: "policy: no-such-policy" in line


@pytest.mark.parametrize("spoil", [_syntax_error, _unknown_key, _unknown_policy],
                         ids=["syntax-error", "unknown-key", "unknown-policy"])
def test_bad_config_on_sighup_keeps_the_running_one(start_sluice, bed, spoil):
    """Edge cases: the rewritten file has a YAML syntax error, an unknown key, or a sandbox
    naming a policy that does not exist (and would also deny allowed.test): SIGHUP logs
    `reload: FILE:LINE:COL: ...` and the refusal, counts a failed reload, and allowed.test is
    still served under the old policy."""
    s = start_sluice(edit=with_admin())
    g = Gateway(s, bed)
    admin = Admin(s)
    failed_before, ok_before = reloads_total(admin, "failed"), reloads_total(admin, "ok")
    assert get_whoami(g, marker()).final.status == 200

    tmp = s.config_path + ".bad"
    write_config(deny_host(s), tmp)
    with open(tmp) as f:
        text, is_bad_line = spoil(f.read())
    with open(tmp, "w") as f:
        f.write(text)
    bad_line = line_of(tmp, is_bad_line)
    reloads = Reloads(s)
    os.replace(tmp, s.config_path)
    sighup(s)
    stderr = reloads.wait_refused()

    errors = [e for e in error_lines(stderr) if same_file(e[0], s.config_path)]
    assert errors, "no `reload: %s:LINE:COL: message` line on stderr:\n%s" % (
        s.config_path, stderr[-3000:])
    if spoil is _syntax_error:
        assert all(1 <= e[1] <= bad_line + 1 for e in errors), errors
    else:
        assert [e for e in errors if e[1] == bad_line], \
            "no error on line %d (%s): %r" % (bad_line, text.splitlines()[bad_line - 1], errors)
    assert reloads.since() == [], "a bad config was applied"
    assert s.proc.poll() is None
    assert reloads_total(admin, "failed") >= failed_before + 1
    assert reloads_total(admin, "ok") == ok_before
    ex = get_whoami(g, marker())
    assert is_ok(ex), "the old policy is no longer in force: %r %r" % (ex.connect, ex.final)


# --- automatic reload ----------------------------------------------------------------------------

def test_config_file_renamed_over_is_reloaded_without_sighup(start_sluice, bed):
    """Edge case: the config file is replaced the way an editor does it (a temp file renamed
    over it), and no signal is sent: the new policy applies by itself; an in-place rewrite
    back is picked up too."""
    s = start_sluice()
    g = Gateway(s, bed)
    assert is_ok(get_whoami(g, marker()))
    reloads = Reloads(s)
    allowed = edited(s, lambda c: None)
    rewrite_config(s, deny_host(s))
    gen, _, _, _ = reloads.wait_applied()
    assert gen >= 2
    wait_until(lambda: is_not_allowed(get_whoami(g, marker())), 20,
               "allowed.test to be denied after the file changed")

    reloads = Reloads(s)
    write_config(allowed, s.config_path)  # in place: truncate and write
    s.config = allowed
    reloads.wait_applied(refusals_ok=True)  # a reload of the file half written may be refused
    wait_until(lambda: is_ok(get_whoami(g, marker())), 20,
               "allowed.test to be allowed again after an in-place rewrite")
    assert s.proc.poll() is None


# --- what is in flight, and what comes next on an open connection ---------------------------

def test_download_in_flight_finishes_under_the_old_config(start_sluice, bed, scratch):
    """Edge case: a 200 MiB download of allowed.test is under way (about 10 s) when a reload
    denies allowed.test: the download completes byte-exact and is recorded as allowed; a new
    request to allowed.test, made while the download still runs, is denied."""
    s = start_sluice()
    g = Gateway(s, bed)
    mark = g.audit.mark()
    url = g.url(HOST, "/big.bin")
    dl = clients.CurlDownload(url, os.path.join(scratch, "big.out"), "--limit-rate", SLOW_RATE,
                              proxy=s.proxy_url, cacert=s.ca_pem, timeout=120)
    try:
        wait_until(lambda: dl.size() >= 4 << 20 or dl.proc.poll() is not None, 30,
                   "the download through sluice to be under way")
        assert dl.proc.poll() is None, "the download ended early: %s" % dl.wait(5)
        reload_to(s, deny_host(s))
        m = marker()
        ex = get_whoami(g, m)
        in_flight = dl.proc.poll() is None
        rc = dl.wait(90)
    finally:
        dl.stop()
    expect.denial(ex, 403, "not_allowed_host")
    assert in_flight, "the download was no longer in flight when the new request was made"
    assert (rc, dl.http_code) == (0, 200), "curl: rc %d, %s" % (rc, dl.stderr)
    assert (os.path.getsize(dl.out_path), dl.sha256()) == (C.BIG_SIZE, bed.content.big_sha256)
    rec = g.audit.one(mark, lambda r: r["url"] == url)
    expect.record(rec, decision="allow", rule="cdn", status=200, resp_bytes=C.BIG_SIZE)
    denies = g.audit.wait(mark, lambda r: r["client"] == ex.client, 2)  # refused in band
    assert [(d["method"], d["decision"], d["reason"], d["status"]) for d in denies] == [
        ("CONNECT", "deny", "not_allowed_host", 200), ("GET", "deny", "not_allowed_host", 403)]
    code, out = audit_verify(s.binary, g.audit.path)
    assert code == 0, out


def test_next_request_in_an_open_tunnel_is_judged_by_the_new_config(start_sluice, bed):
    """Edge case: one TLS tunnel to allowed.test, request 1 allowed; reload to a config that
    denies allowed.test; request 2 on the same connection gets 403 not_allowed_host over TLS,
    then the connection closes."""
    s = start_sluice()
    g = Gateway(s, bed)
    mark = g.audit.mark()
    sock, tls, reader = clients.open_tls_tunnel(s.address, "%s:%d" % (HOST, g.t), s.ca_pem)
    try:
        m1, m2 = marker(), marker()
        tls.sendall(request_bytes("GET", "/whoami.txt?m=" + m1, HOST))
        first = reader.read_response()
        assert (first.status, first.body) == (200, b"allowed.test\n")
        reload_to(s, deny_host(s))
        tls.sendall(request_bytes("GET", "/whoami.txt?m=" + m2, HOST))
        second = reader.read_response()
        expect.denial(second, 403, "not_allowed_host")
        tail, how = reader.read_to_close(timeout=10)
        assert how in ("eof", "reset") and not tail.startswith(b"HTTP/"), (tail[:100], how)
    finally:
        sock.close()
    recs = g.audit.wait(mark, lambda r: m1 in (r["url"] or "") or m2 in (r["url"] or ""), 2)
    one = [r for r in recs if m1 in r["url"]][0]
    two = [r for r in recs if m2 in r["url"]][0]
    expect.record(one, decision="allow", rule="cdn", status=200)
    expect.record(two, decision="deny", reason="not_allowed_host", status=403, upstream=None)
    assert one["conn"] == two["conn"], "not the same connection: %r %r" % (one, two)


def test_tunnel_opened_before_the_reload_denies_its_first_request_over_tls(start_sluice, bed):
    """Edge case: the CONNECT to allowed.test is answered 200 under the old config; the reload
    that denies allowed.test comes before the ClientHello. The tunnel exists and its SNI equals
    H, so a TLS session can be made: the request inside is the first one the new config judges,
    and gets the "same 403 over TLS" of docs/wire.md#denials (not_allowed_host), not a handshake
    alert (an alert is for "no TLS session can be made": no SNI, not TLS, SNI not allowed in
    transparent mode). This is the window the reload-under-load test hits now and then."""
    s = start_sluice()
    g = Gateway(s, bed)
    mark = g.audit.mark()
    sock, answer, _ = connect_tunnel(s.address, "%s:%d" % (HOST, g.t))
    try:
        assert answer.status == 200, answer
        client = "%s:%d" % sock.getsockname()
        reload_to(s, deny_host(s))
        try:
            tls = TLSStream(sock, HOST, s.ca_pem)
        except HandshakeFailed as e:
            rec = g.audit.one(mark, lambda r: r["client"] == client)
            raise AssertionError("a tunnel opened (CONNECT 200) before the reload got no TLS "
                                 "session after it (%s) instead of a 403 not_allowed_host over "
                                 "TLS; its record: %r" % (e, rec)) from None
        reader = HttpReader(tls)
        m = marker()
        tls.sendall(request_bytes("GET", "/whoami.txt?m=" + m, HOST))
        resp = reader.read_response()
        expect.denial(resp, 403, "not_allowed_host")
        tail, how = reader.read_to_close(timeout=10)
        assert how in ("eof", "reset") and not tail.startswith(b"HTTP/"), (tail[:100], how)
    finally:
        sock.close()
    rec = g.audit.one(mark, lambda r: m in (r["url"] or ""))
    expect.record(rec, decision="deny", reason="not_allowed_host", status=403, upstream=None)


# --- listeners ---------------------------------------------------------------------------------

def test_listen_address_moved_to_another_port(start_sluice, bed):
    """Edge case: sbx1's `listen` moves to another port: once the reload is applied the old
    port refuses connections and the new one serves sbx1 (same CA, same policy)."""
    s = start_sluice()
    old = s.address
    new_port = free_port((PROXY_ADDRESS,))
    config = edited(s, lambda c: c["sandboxes"][0].update(
        listen="%s:%d" % (PROXY_ADDRESS, new_port)))
    reload_to(s, config)
    wait_until(lambda: listener(*old) is None, 10, "the old port to stop listening")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(old, timeout=5).close()
    wait_until(lambda: listener(PROXY_ADDRESS, new_port) is not None, 10,
               "the new port to listen")
    moved = Gateway(s.sandbox_view("sbx1"), bed)
    assert moved.sluice.address == (PROXY_ADDRESS, new_port)
    m = marker()
    mark = moved.audit.mark()
    ex = get_whoami(moved, m)
    assert is_ok(ex), (ex.connect, ex.final)
    rec = moved.audit.one(mark, lambda r: m in (r["url"] or ""))
    expect.record(rec, sandbox="sbx1", decision="allow")


def test_listener_on_an_address_in_use_refuses_the_whole_reload(start_sluice, bed):
    """Edge case: the new config adds a sandbox whose listen address another process holds,
    and also denies allowed.test: the reload is refused whole (allowed.test still served, a
    failed reload counted, the address named); once the address is free, SIGHUP applies it."""
    s = start_sluice(edit=with_admin())
    g = Gateway(s, bed)
    admin = Admin(s)
    failed_before = reloads_total(admin, "failed")
    squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        squatter.bind((PROXY_ADDRESS, 0))
        squatter.listen(1)
        port = squatter.getsockname()[1]
        address = "%s:%d" % (PROXY_ADDRESS, port)

        def change(c):
            without_rules(c, "cdn", "cdn-plain")
            c["sandboxes"].append({"name": "extra", "listen": address,
                                   "ca": os.path.join(s.workdir, "ca-extra"), "policy": "bed",
                                   "mode": "enforce"})
        config = edited(s, change)
        reloads = Reloads(s)
        rewrite_config(s, config)
        sighup(s)
        stderr = reloads.wait_refused()
        refusal = [l for l in stderr.splitlines() if "reload refused" in l]
        assert address in stderr, "the address in use is not named: %r" % refusal
        assert reloads.since() == []
        assert reloads_total(admin, "failed") >= failed_before + 1
        assert s.proc.poll() is None
        ex = get_whoami(g, marker())
        assert is_ok(ex), "part of the refused config is in force: %r %r" % (ex.connect,
                                                                            ex.final)
        later = Reloads(s)
    finally:
        squatter.close()
    # SIGHUP with the address free. (The watcher may apply the changed file first: either way
    # the first reload applied from here on adds `extra`.)
    sighup(s)
    later.wait_applied(refusals_ok=True)
    assert [(count, added) for _, count, added, _ in later.since()][0] == (2, ["extra"]), \
        later.since()
    wait_until(lambda: listener(PROXY_ADDRESS, port) is not None, 10,
               "the added sandbox to listen")
    assert is_not_allowed(get_whoami(g, marker()))


def udp_squatter_with_tcp_free():
    """A UDP socket on a port of 127.0.0.1 whose TCP side is free as it is picked (another
    process, a parallel test run among them, may hold the TCP side of a port the kernel hands
    out for UDP: the reload would then be refused for TCP, not for the address under test)."""
    for _ in range(50):
        squatter = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        squatter.bind(("127.0.0.1", 0))
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            probe.bind(("127.0.0.1", squatter.getsockname()[1]))
            return squatter
        except OSError:
            squatter.close()
        finally:
            probe.close()
    raise AssertionError("no UDP port with its TCP side free")


def test_dns_listen_on_an_address_in_use_refuses_the_whole_reload(start_sluice, bed):
    """Edge case: the new config adds a sandbox whose dns_listen UDP address another process
    holds (its TCP side is free) and a listener that is free: the reload is refused whole, the
    address named, the free listener never opened; sluice keeps serving as before."""
    s = start_sluice(edit=with_admin())
    g = Gateway(s, bed)
    squatter = udp_squatter_with_tcp_free()
    try:
        port = squatter.getsockname()[1]
        listen_port = free_port((PROXY_ADDRESS,))

        def change(c):
            without_rules(c, "cdn", "cdn-plain")
            c["sandboxes"].append({"name": "extra",
                                   "listen": "%s:%d" % (PROXY_ADDRESS, listen_port),
                                   "dns_listen": "127.0.0.1:%d" % port,
                                   "ca": os.path.join(s.workdir, "ca-extra"), "policy": "bed"})
        reloads = Reloads(s)
        rewrite_config(s, edited(s, change))
        sighup(s)
        stderr = reloads.wait_refused()
        assert "127.0.0.1:%d (udp)" % port in stderr, stderr[-2000:]
        assert reloads.since() == []
        assert listener(PROXY_ADDRESS, listen_port) is None
        assert not os.path.exists(os.path.join(s.workdir, "ca-extra")), \
            "a refused reload created the new sandbox's CA"
        assert is_ok(get_whoami(g, marker()))
    finally:
        squatter.close()


def test_an_address_handed_to_a_renamed_sandbox_keeps_listening(start_sluice, bed):
    """Edge case: sbx1 is renamed `renamed` (same listen address, same CA directory). The
    socket is kept (never closed, so no connection is refused meanwhile), sbx1's idle
    keep-alive tunnel is closed (its sandbox is gone), and new requests on the address are
    `renamed`'s."""
    s = start_sluice()
    g = Gateway(s, bed)
    sock, answer, _ = connect_tunnel(s.address, "%s:%d" % (HOST, g.t))
    try:
        assert answer.status == 200, answer
        tls = TLSStream(sock, HOST, s.ca_pem)
        reader = HttpReader(tls)
        tls.sendall(request_bytes("GET", "/whoami.txt?m=" + marker(), HOST))
        assert reader.read_response().status == 200
        config = edited(s, lambda c: c["sandboxes"][0].update(name="renamed"))
        reload_to(s, config)
        tail, how = reader.read_to_close(timeout=10)
        assert how in ("eof", "reset") and tail == b"", (tail[:100], how)
    finally:
        sock.close()
    assert listener(*s.address) is not None
    m = marker()
    mark = g.audit.mark()
    assert is_ok(get_whoami(g, m))
    rec = g.audit.one(mark, lambda r: m in (r["url"] or ""))
    expect.record(rec, sandbox="renamed", decision="allow")


def test_a_ca_rotated_in_place_is_taken_up_by_sighup(start_sluice, bed):
    """Edge case: the operator rotates the sandbox's CA by renaming a new ca.pem and ca.key
    (from `sluice ca init`) over the old ones, then sends SIGHUP. The reload loads the new CA
    and says so; the keep-alive tunnel made under the old one is closed; new leaves are signed
    by the new CA, so a client still trusting only the old certificate fails verification; and
    a second SIGHUP loads nothing again."""
    s = start_sluice()
    g = Gateway(s, bed)
    name, ca_dir = s.config["sandboxes"][0]["name"], os.path.dirname(s.ca_pem)
    old_pem = os.path.join(s.workdir, "old-ca.pem")
    shutil.copyfile(s.ca_pem, old_pem)
    sock, answer, _ = connect_tunnel(s.address, "%s:%d" % (HOST, g.t))
    try:
        assert answer.status == 200, answer
        tls = TLSStream(sock, HOST, old_pem)
        reader = HttpReader(tls)
        tls.sendall(request_bytes("GET", "/whoami.txt?m=" + marker(), HOST))
        assert reader.read_response().status == 200

        made = os.path.join(s.workdir, "new-ca")
        subprocess.run([s.binary, "ca", "init", "--dir", made], check=True,
                       capture_output=True)
        os.replace(os.path.join(made, "ca.key"), os.path.join(ca_dir, "ca.key"))
        os.replace(os.path.join(made, "ca.pem"), os.path.join(ca_dir, "ca.pem"))
        reloads = Reloads(s)
        sighup(s)
        reloads.wait_applied()
        notice = "sandbox '%s': CA files in %s replaced" % (name, ca_dir)
        assert s.stderr().count(notice) == 1, s.stderr()[-3000:]
        tail, how = reader.read_to_close(timeout=10)
        assert how in ("eof", "reset") and tail == b"", (tail[:100], how)
    finally:
        sock.close()

    assert is_ok(get_whoami(g, marker()))  # verified against the new ca.pem
    stale = g.tunnel(HOST, [request_bytes("GET", "/whoami.txt", HOST, keep_alive=False)],
                     cafile=old_pem)
    assert stale.tls_error is not None and "certificate verify failed" in str(stale.tls_error), \
        stale.tls_error

    reloads = Reloads(s)
    sighup(s)
    reloads.wait_applied()
    assert s.stderr().count(notice) == 1, "loaded again though unchanged"
