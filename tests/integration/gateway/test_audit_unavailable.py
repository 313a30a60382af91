"""No request goes unrecorded: when a record cannot be written, sluice keeps it, retries, and
meanwhile answers the sandbox's new requests 503 `audit_unavailable` (each such answer is a
record too, kept like the others); /healthz and /metrics say so; once a write succeeds again
every kept record goes out in order, the chain intact, and the sandbox is served again without
a restart.

Two devices that refuse writes: /dev/full (every write fails with ENOSPC, for ever) and a small
tmpfs this module mounts and fills (root only; skipped with the reason where mounting is not
permitted), then empties to show the recovery.
"""
import errno
import os
import socket
import subprocess
import tempfile

import pytest

import audit
import clients
import expect
from admin_client import Admin, with_admin
from clients import open_tls_tunnel
from http1 import HttpReader, request_bytes
from netutil import clean_env, free_port, wait_until
from oracles import cdn_hits, marker
from sandbox_pair import A, B, two_sandboxes
from sluice_proc import PROXY_ADDRESS
from tlsraw import AT_CONNECT, HandshakeFailed, PlainStream, TLSStream

PATH_LABEL = "path"
# The records kept in memory per audit file before sluice stops taking new connections of the
# sandboxes that write there (docs/audit.md#when-the-audit-file-cannot-be-written).
PENDING_LIMIT = 4 << 20


def audit_on(path):
    def edit(config, workdir, admin_port):
        config["audit"]["path"] = path
    return edit


def forward_get(g, path, keep_alive=False):
    return g.forward([request_bytes("GET", g.url("allowed.test", path, "http"),
                                    "allowed.test:%d" % g.p, keep_alive=keep_alive)])


def audit_gauges(scrape, path):
    return {name: scrape.value(name, **{PATH_LABEL: path})
            for name in ("sluice_audit_unavailable", "sluice_audit_pending_records",
                         "sluice_audit_pending_bytes", "sluice_audit_write_failures_total",
                         "sluice_audit_refused_connections_total")}


def one_line_denial(resp, reason):
    """sluice's own answer: status, Sluice-Reason, Proxy-Status, a one-line text body, close."""
    expect.denial(resp, 503, reason)
    assert resp.reason.startswith("Service Unavailable"), resp.reason
    assert resp.body.startswith(b"sluice: " + reason.encode()), resp.body
    assert resp.body.endswith(b"\n") and resp.body.count(b"\n") == 1, resp.body
    assert (resp.header("Connection") or "").lower() == "close", resp.headers


def test_audit_on_a_full_device_refuses_new_requests_503(make_gw, bed):
    """`audit.path: /dev/full`: the first record fails to reach the OS; from then on every new
    request (inside an open tunnel, a CONNECT, an absolute-form request, a redirected HTTP
    request) is 503 audit_unavailable, a redirected TLS connection gets an internal_error alert
    before any handshake, nothing reaches the origin, /healthz is 503 naming the file and the
    error, and the metrics count the failed writes and the records kept."""
    def edit(config, workdir, admin_port):
        config["audit"]["path"] = "/dev/full"
        # Connections made straight to the transparent listener stand in for redirected ones
        # (no original destination: port 443 is assumed, which the audit check precedes).
        port = free_port((PROXY_ADDRESS,), avoid={int(config["sandboxes"][0]["listen"]
                                                      .rsplit(":", 1)[1])})
        config["sandboxes"][0]["transparent"] = "%s:%d" % (PROXY_ADDRESS, port)
    g = make_gw(edit=with_admin(edit))
    admin = Admin(g.sluice)
    transparent = g.sluice.config["sandboxes"][0]["transparent"].rsplit(":", 1)
    transparent = (transparent[0], int(transparent[1]))
    # A tunnel opened while nothing has failed yet: its request comes after the failure.
    sock, tls, reader = open_tls_tunnel(g.sluice.address, g.authority("allowed.test"),
                                        g.sluice.ca_pem)
    try:
        # The first record (a CONNECT refused at the CONNECT) cannot be written. It reaches the
        # OS before the 403 is sent, so once the client has the 403 sluice knows.
        first = g.tunnel("other.test", connect_headers=AT_CONNECT)
        expect.denial(first, 403, "not_allowed_host")

        m = marker()
        tls.sendall(request_bytes("GET", "/whoami.txt?in-tunnel-" + m, "allowed.test"))
        one_line_denial(reader.read_response("GET"), "audit_unavailable")
    finally:
        sock.close()
    connect = g.tunnel("allowed.test", [request_bytes("GET", "/whoami.txt?connect-" + m,
                                                      "allowed.test")])
    assert connect.denied_at_connect, "CONNECT answered %r" % (connect.connect.status,)
    one_line_denial(connect.connect, "audit_unavailable")
    forwarded = forward_get(g, "/whoami.txt?forward-" + m)
    one_line_denial(forwarded.final, "audit_unavailable")
    expect.closed(forwarded)
    with socket.create_connection(transparent, timeout=10) as s:
        s.sendall(request_bytes("GET", "/whoami.txt?redirected-" + m, "allowed.test",
                                keep_alive=False))
        one_line_denial(HttpReader(PlainStream(s)).read_response("GET"), "audit_unavailable")
    with socket.create_connection(transparent, timeout=10) as s:
        with pytest.raises(HandshakeFailed) as refused:
            TLSStream(s, "allowed.test")
    assert refused.value.kind == "alert" and "INTERNAL_ERROR" in refused.value.detail, \
        refused.value
    assert cdn_hits(bed, m) == [], "a request reached the origin while its record could not " \
                                   "be written"

    health = admin.get("/healthz")
    assert health.status == 503, (health.status, health.body)
    assert b"/dev/full" in health.body and b"No space left on device" in health.body, \
        health.body
    # Six records kept: the refused CONNECT, the four 503s and the refused TLS connection.
    scrape = admin.scrape()
    gauges = audit_gauges(scrape, "/dev/full")
    assert gauges["sluice_audit_unavailable"] == 1, gauges
    assert gauges["sluice_audit_pending_records"] == 6, gauges
    assert gauges["sluice_audit_pending_bytes"] > 6 * 300, gauges
    assert gauges["sluice_audit_write_failures_total"] >= 1, gauges
    assert gauges["sluice_audit_refused_connections_total"] == 0, gauges
    requests = scrape.requests()
    assert requests.get(("sbx1", "deny", "audit_unavailable")) == 5, requests
    # One line when it started failing, not one per record.
    errors = [line for line in g.sluice.stderr().splitlines() if "/dev/full" in line]
    assert len(errors) == 1 and "error" in errors[0], errors


def test_kept_records_past_the_cap_close_new_connections_unread(make_gw):
    """Past PENDING_LIMIT bytes of kept records, a new connection of the sandbox is closed
    before a byte of it is read: no request is ever answered without a kept record, and the
    memory the records hold stays bounded."""
    g = make_gw(edit=with_admin(audit_on("/dev/full")))
    admin = Admin(g.sluice)
    long_path = "/" + "a" * 8000  # the record keeps 4 KiB of the url: fewer records to send
    sent = 0
    while True:
        ex = forward_get(g, long_path)
        if ex.final is None:
            break  # closed unread: the cap is reached
        if sent > 0:
            one_line_denial(ex.final, "audit_unavailable")
        sent += 1
        assert sent < 3 * PENDING_LIMIT // 4096, "no connection was refused after %d" % sent
    gauges = audit_gauges(admin.scrape(), "/dev/full")
    assert gauges["sluice_audit_pending_bytes"] > PENDING_LIMIT, gauges
    assert gauges["sluice_audit_pending_records"] == sent, gauges
    # Refused before reading: the kernel resets a connection closed with our request unread,
    # or we see the close first; either way no answer came.
    assert gauges["sluice_audit_refused_connections_total"] >= 1, gauges
    with socket.create_connection(g.sluice.address, timeout=10) as s:
        try:
            data = s.recv(100)
        except ConnectionResetError:
            data = b""
    assert data == b"", data
    admin.wait_for(lambda scrape: None if audit_gauges(scrape, "/dev/full")[
        "sluice_audit_refused_connections_total"] >= 2 else "not counted", "refusal counted")


def test_a_sandbox_audit_file_that_fails_stops_only_its_own_sandbox(make_gw, bed):
    """A sandbox's own `audit:` on /dev/full: that sandbox is refused 503 audit_unavailable, the
    other one (on the global log) is served and on record as usual."""
    def edit(config, workdir, admin_port):
        two_sandboxes(bed)(config, workdir)
        config["sandboxes"][1]["audit"] = "/dev/full"
    g = make_gw(edit=with_admin(edit))
    admin = Admin(g.sluice)
    beta = g.sluice.sandbox_view(B)

    def beta_get(path):
        return clients.forward(beta.address, [request_bytes(
            "GET", g.url("other.test", path, "http"), "other.test:%d" % g.p, keep_alive=False)])

    m = marker()
    first = beta_get("/whoami.txt?first-" + m)  # forwarded: its record is the one that fails
    assert first.final is not None and first.final.status == 200, first.final
    one_line_denial(beta_get("/whoami.txt?second-" + m).final, "audit_unavailable")
    mark = g.audit.mark()
    alpha = g.tunnel("allowed.test", [request_bytes("GET", "/whoami.txt?alpha-" + m,
                                                    "allowed.test", keep_alive=False)])
    assert alpha.final.status == 200, alpha.final
    expect.record(g.audit.one(mark, lambda r: m in (r["url"] or "")), sandbox=A,
                  decision="allow", status=200)
    hits = [e["uri"] for e in cdn_hits(bed, m)]
    assert sorted(hits) == sorted(["/whoami.txt?first-" + m, "/whoami.txt?alpha-" + m]), hits
    health = admin.get("/healthz")
    assert health.status == 503 and health.body.count(b"\n") == 1, health.body
    assert health.body.startswith(b"audit log /dev/full: cannot write: "), health.body
    scrape = admin.scrape()
    assert audit_gauges(scrape, "/dev/full")["sluice_audit_unavailable"] == 1
    assert audit_gauges(scrape, g.audit.path)["sluice_audit_unavailable"] == 0


# --- recovery, on a filesystem that fills and empties ------------------------------------------

@pytest.fixture
def small_tmpfs():
    """A 256 KiB tmpfs of this test's own, unmounted (by its path) after the test's sluice has
    stopped: ask for this fixture before make_gw, so that it is torn down after it."""
    directory = tempfile.mkdtemp(prefix="sluice-audit-fs-")
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs",
                               directory], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip("cannot mount a tmpfs: %s" % done.stderr.strip())
        try:
            yield directory
        finally:
            subprocess.run(["umount", directory], check=True)
    finally:
        os.rmdir(directory)


def fill(directory):
    """Write a filler file until the filesystem refuses (ENOSPC); return its path."""
    path = os.path.join(directory, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                os.write(fd, b"\0" * 4096)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                break
        while True:  # the last partial page too
            try:
                if os.write(fd, b"\0") == 0:
                    break
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                break
    finally:
        os.close(fd)
    return path


def healthz(admin):
    return admin.get("/healthz").status


def test_audit_recovers_when_the_disk_has_room_again(small_tmpfs, make_gw, bed):
    """Fill the audit file's filesystem: records that cannot be written are kept, new requests
    get 503; free the space: the kept records go out (without any new request: sluice retries
    by itself), requests are served again, and `sluice audit verify` passes over the whole file
    with every request on record exactly once."""
    mnt = small_tmpfs
    path = os.path.join(mnt, "audit.jsonl")
    g = make_gw(edit=with_admin(audit_on(path)))
    admin = Admin(g.sluice)
    sent = []  # (marker, status)

    def request(tag):
        m = "%s-%s" % (tag, marker())
        ex = forward_get(g, "/whoami.txt?" + m)
        assert ex.final is not None, "no answer to %s: %r" % (m, ex.close_how)
        sent.append((m, ex.final.status))
        return ex.final

    for _ in range(3):
        assert request("before").status == 200
    filler = fill(mnt)
    # The file's last page may still take a record or two; after that, writes fail.
    for _ in range(200):
        if request("filling").status == 503:
            break
    else:
        raise AssertionError("no 503 after filling the disk: %r" % sent[-5:])
    assert healthz(admin) == 503
    refused = [request("full") for _ in range(5)]
    for resp in refused:
        one_line_denial(resp, "audit_unavailable")
    gauges = audit_gauges(admin.scrape(), path)
    assert gauges["sluice_audit_unavailable"] == 1, gauges
    assert gauges["sluice_audit_pending_records"] >= 6, gauges

    os.unlink(filler)
    # No request is needed: sluice retries on its own.
    wait_until(lambda: healthz(admin) == 200, 10, "/healthz to recover")
    for _ in range(3):
        assert request("after").status == 200
    gauges = audit_gauges(admin.scrape(), path)
    assert gauges["sluice_audit_unavailable"] == 0, gauges
    assert gauges["sluice_audit_pending_records"] == 0, gauges
    assert g.sluice.stop() == 0, g.sluice.stderr()[-3000:]

    verify = subprocess.run([g.sluice.binary, "audit", "verify", path], capture_output=True,
                            text=True, timeout=60, env=clean_env())
    assert verify.returncode == 0, verify.stdout + verify.stderr
    lines = g.audit.lines()
    assert audit.verify_chain(lines) == 0
    records = g.audit.records()
    for rec in records:
        audit.check_shape(rec)
    assert len(records) == len(sent), (len(records), len(sent))
    for m, status in sent:
        hits = [r for r in records if m in (r["url"] or "")]
        assert len(hits) == 1, (m, hits)
        assert hits[0]["status"] == status, (m, status, hits[0])
        if status == 503:
            expect.record(hits[0], decision="deny", reason="audit_unavailable")
    # The records are in the order the requests were answered.
    order = [next(i for i, r in enumerate(records) if m in r["url"]) for m, _ in sent]
    assert order == sorted(order), order
    recovered = [line for line in g.sluice.stderr().splitlines() if path in line]
    assert len(recovered) == 2, recovered  # one when it failed, one when it recovered
