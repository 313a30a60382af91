"""A tunnel that ended without carrying a request is on record (docs/audit.md#errors): a CONNECT
answered 200 (or a redirected connection's allowed ClientHello) and then no request, because the
sandbox refused sluice's certificate, closed, or timed out. The record is the tunnel's: method
CONNECT, the CONNECT's url, the decision that opened it, status 200, `error` saying why. A client
that refuses sluice's certificate is also named on sluice's standard error at the default level,
with the CA file to trust, once a minute per sandbox, name and alert.

Real clients: curl and Python's ssl trusting only the bed's own test CA (not the sandbox's), as
npm does behind Debian's global npmrc. Oracles: the audit log, sluice's stderr, the metrics."""
import ssl
import subprocess
import time

import pytest

import expect
from admin_client import Admin, with_admin
from gateway import Gateway, Runner
from netutil import clean_env
from oracles import get
from tlsraw import connect_tunnel


@pytest.fixture(scope="module")
def tgw(sluice_binary, bed):
    """The bed's policy with an admin listener (for the metric) and handshake_timeout 2s."""
    def edit(config, workdir, admin_port):
        config["limits"]["handshake_timeout"] = "2s"
    runner = Runner(sluice_binary, bed)
    try:
        g = Gateway(runner.start(edit=with_admin(edit)), bed)
        g.admin = Admin(g.sluice)
        yield g
    finally:
        runner.stop_all()


def tunnel_record(gw, mark, client, error, proto=None):
    rec = gw.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, sandbox="sbx1", mode="connect", method="CONNECT", decision="allow",
                  reason=None, status=200, error=error, proto=proto, upstream=None,
                  url="https://allowed.test:%d" % gw.t)
    return rec


def curl_without_the_sandbox_ca(gw, bed):
    """curl through sluice trusting only the bed's test CA: it refuses sluice's certificate."""
    r = subprocess.run(
        ["curl", "-sS", "--max-time", "20", "-x", gw.sluice.proxy_url, "--cacert",
         bed.pki.test_ca.cert, "-w", "%{local_ip}:%{local_port}", "-o", "/dev/null",
         gw.url("allowed.test", "/whoami.txt")],
        capture_output=True, text=True, timeout=60, env=clean_env())
    assert r.returncode == 60, (r.returncode, r.stderr)  # CURLE_PEER_FAILED_VERIFICATION
    return r.stdout.strip()


def refusal_lines(gw):
    return [l for l in gw.sluice.stderr().splitlines()
            if "refused sluice's certificate for allowed.test" in l]


def requests_counted(gw):
    return sum(sample.value for sample in gw.admin.scrape().samples("sluice_requests_total")
               if sample.labels.get("sandbox") == "sbx1")


def test_a_client_that_does_not_trust_the_ca_is_on_record_and_on_stderr(tgw, bed):
    """curl refuses sluice's certificate (alert unknown_ca): a record with error
    tls_unknown_ca, no proto (no handshake completed); one info line that names the sandbox,
    the name, the alert and the CA file; the second refusal within the minute is on record
    but not on stderr; both count in sluice_connection_errors_total, neither in
    sluice_requests_total (a tunnel is no request)."""
    requests_before = requests_counted(tgw)
    errors_before = tgw.admin.scrape().value("sluice_connection_errors_total", 0,
                                             sandbox="sbx1", error="tls_unknown_ca")
    mark = tgw.audit.mark()
    client = curl_without_the_sandbox_ca(tgw, bed)
    tunnel_record(tgw, mark, client, "tls_unknown_ca")
    lines = refusal_lines(tgw)
    assert len(lines) == 1, lines
    assert "sandbox 'sbx1'" in lines[0] and "unknown CA" in lines[0], lines[0]
    assert tgw.sluice.ca_pem in lines[0] and " info " in lines[0].lower(), lines[0]
    mark = tgw.audit.mark()
    client = curl_without_the_sandbox_ca(tgw, bed)
    tunnel_record(tgw, mark, client, "tls_unknown_ca")
    assert len(refusal_lines(tgw)) == 1  # (rate-limited: a minute per sandbox, name, alert)
    tgw.admin.wait_for(
        lambda m: None if m.value("sluice_connection_errors_total", 0, sandbox="sbx1",
                                  error="tls_unknown_ca") == errors_before + 2
        else m.series("sluice_connection_errors_total"), "both refusals counted")
    assert requests_counted(tgw) == requests_before


def test_python_ssl_that_does_not_trust_the_ca_is_on_record(tgw, bed):
    """Python's ssl with the bed's test CA as its only root: the same record."""
    mark = tgw.audit.mark()
    sock, answer, _ = connect_tunnel(tgw.sluice.address, "allowed.test:%d" % tgw.t)
    assert answer.status == 200
    client = "%s:%d" % sock.getsockname()
    context = ssl.create_default_context(cafile=bed.pki.test_ca.cert)
    with pytest.raises(ssl.SSLCertVerificationError):
        context.wrap_socket(sock, server_hostname="allowed.test")
    sock.close()
    tunnel_record(tgw, mark, client, "tls_unknown_ca")


def test_a_tunnel_closed_before_its_client_hello_is_client_closed(tgw):
    mark = tgw.audit.mark()
    sock, answer, _ = connect_tunnel(tgw.sluice.address, "allowed.test:%d" % tgw.t)
    assert answer.status == 200
    client = "%s:%d" % sock.getsockname()
    sock.close()
    tunnel_record(tgw, mark, client, "client_closed")


def handshaken_tunnel(gw, host):
    """A tunnel to host:T whose TLS handshake (ALPN http/1.1, trusting the sandbox's CA) is
    done, nothing sent in it: (the TLS socket, the client's address)."""
    sock, answer, _ = connect_tunnel(gw.sluice.address, "%s:%d" % (host, gw.t))
    assert answer.status == 200, answer
    client = "%s:%d" % sock.getsockname()
    context = ssl.create_default_context(cafile=gw.sluice.ca_pem)
    context.set_alpn_protocols(["http/1.1"])
    return context.wrap_socket(sock, server_hostname=host), client


def test_a_tunnel_closed_after_its_handshake_is_client_closed_with_its_proto(tgw):
    """TLS completed (ALPN http/1.1), then close_notify and no request."""
    mark = tgw.audit.mark()
    tls, client = handshaken_tunnel(tgw, "allowed.test")
    tls.unwrap().close()
    tunnel_record(tgw, mark, client, "client_closed", proto="http/1.1")


def test_a_tunnel_that_never_handshakes_is_timeout(tgw):
    """CONNECT answered, then nothing within handshake_timeout (2 s here)."""
    mark = tgw.audit.mark()
    sock, answer, _ = connect_tunnel(tgw.sluice.address, "allowed.test:%d" % tgw.t)
    client = "%s:%d" % sock.getsockname()
    try:
        sock.settimeout(10)
        started = time.monotonic()
        assert sock.recv(1) == b""  # sluice closes it
        assert time.monotonic() - started < 8
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    tunnel_record(tgw, mark, client, "timeout")


def test_a_tunnel_that_carried_a_request_has_no_tunnel_record(tgw):
    """The request's record is the tunnel's only one."""
    mark = tgw.audit.mark()
    ex = tgw.tunnel("allowed.test", [get("/whoami.txt", host="allowed.test", keep_alive=False)])
    assert ex.final.status == 200
    tgw.audit.wait(mark, lambda r: r["client"] == ex.client)
    time.sleep(0.5)  # (a second record would be written as the connection closes)
    recs = [r for r in tgw.audit.since(mark) if r["client"] == ex.client]
    assert [r["method"] for r in recs] == ["GET"], recs


def wget(gw, url, cafile):
    """GNU wget (GnuTLS) through sluice, trusting only `cafile`."""
    return subprocess.run(["wget", "-q", "-O", "-", "--tries=1", "--timeout=20",
                           "--ca-certificate=" + cafile, url],
                          capture_output=True, timeout=60,
                          env=clean_env(https_proxy=gw.sluice.proxy_url))


def closed_at_once_lines(gw, host):
    return [l for l in gw.sluice.stderr().splitlines()
            if "closed its tunnel to %s right after the TLS handshake" % host in l]


def test_a_gnutls_client_that_does_not_trust_the_ca_is_named_on_stderr(tgw, bed):
    """wget (GnuTLS) checks sluice's certificate once the handshake is over and, not trusting
    it, closes the tunnel with no alert and no byte: the record says client_closed with proto
    http/1.1 (the handshake was done), and stderr names the client like one that refused the
    certificate, with the CA file (it said nothing: issue 34, item 4). With the sandbox's CA,
    wget fetches, and no such line is written."""
    mark = tgw.audit.mark()
    r = wget(tgw, tgw.url("second.test", "/whoami.txt"), bed.pki.test_ca.cert)
    assert r.returncode == 5, (r.returncode, r.stderr)  # wget: SSL verification failure
    rec = tgw.audit.one(mark, lambda r: r["method"] == "CONNECT")
    expect.record(rec, decision="allow", status=200, error="client_closed", proto="http/1.1",
                  url="https://second.test:%d" % tgw.t)
    lines = closed_at_once_lines(tgw, "second.test")
    assert len(lines) == 1, tgw.sluice.stderr()[-2000:]
    assert "sandbox 'sbx1'" in lines[0] and tgw.sluice.ca_pem in lines[0], lines[0]
    assert " info " in lines[0] and "GnuTLS" in lines[0], lines[0]

    before = len(closed_at_once_lines(tgw, "allowed.test"))
    mark = tgw.audit.mark()
    r = wget(tgw, tgw.url("allowed.test", "/whoami.txt"), tgw.sluice.ca_pem)
    assert (r.returncode, r.stdout) == (0, b"allowed.test\n"), r.stderr
    tgw.audit.one(mark, lambda r: r["method"] == "GET")
    assert len(closed_at_once_lines(tgw, "allowed.test")) == before


def test_a_tunnel_kept_open_a_while_before_its_close_is_not_named(tgw):
    """A client that opened its tunnel ahead of use and closed it unused a second later (a
    browser's preconnect) is no sign of a certificate it refused: on record, not on stderr."""
    mark = tgw.audit.mark()
    tls, client = handshaken_tunnel(tgw, "api.allowed.test")
    time.sleep(1.5)
    tls.close()
    rec = tgw.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, error="client_closed", proto="http/1.1")
    assert closed_at_once_lines(tgw, "api.allowed.test") == []
