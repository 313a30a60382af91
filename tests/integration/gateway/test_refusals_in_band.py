"""Refusals in band (docs/wire.md#refusals-in-band), as real clients show them. A host the
sandbox's policy refuses, asked through sluice's CONNECT on port 443, is no longer a 403 to the
CONNECT (which curl reads as "CONNECT tunnel failed, response 403", Chromium as
ERR_TUNNEL_CONNECTION_FAILED, gRPC as UNAVAILABLE): the CONNECT gets 200, sluice completes TLS
with a leaf of the sandbox's CA for that name, and each request inside is answered
`403 Forbidden by sluice: not_allowed_host` with a one-line text/plain body that names the host,
the sandbox and the rule that would be needed (an HTTP/2 stream the same 403; a gRPC call a
trailers-only PERMISSION_DENIED). The old answer is still there for a client that asks for it
(`Sluice-Refusal: at_connect` on the CONNECT) and for a sandbox with `refusal: at_connect`.

One test per client, each with a name of its own that no rule allows (deny-KIND-MARK.attacker
.test, port 443): curl, Python's urllib and requests, Java 17's java.net.http, grpcio, git and
headless Chromium, each asserted on what the client itself prints, and on the audit log
(docs/audit.md#when-a-record-is-written): the tunnel's record (CONNECT, deny, not_allowed_host,
status 200) and each request's (deny, not_allowed_host, 403; a gRPC call's 200, the status of
its trailers-only answer), and dnsmasq never asked for the name. The Python clients run in a
process of their own under /usr/bin/python3 (Debian's modules)."""
import os
import shutil
import subprocess

import pytest

import expect
from clients import chromium
from netutil import clean_env
from oracles import DnsMark, marker
from sluice_proc import SANDBOX

REASON = "not_allowed_host"
PHRASE = "Forbidden by sluice: " + REASON
PYTHON = "/usr/bin/python3"


def denied_name(kind):
    return "deny-%s-%s.attacker.test" % (kind, marker())


def body_line(host, sandbox=SANDBOX):
    """The one line of sluice's body (docs/wire.md#refusals-in-band)."""
    return "sluice: %s: %s is not in the policy of sandbox %s; a rule would need hosts: [%s]" % (
        REASON, host, sandbox, host)


def about(host):
    """Records of `host`: by the Host field or :authority, the url, or the SNI."""
    return lambda r: host in (r["host"] or "") or host in (r["url"] or "") or r["sni"] == host


def refusal_records(gw, bed, mark, dns, host, proto, requests=1, exact=True, status=403):
    """The tunnel's record and `requests` requests' (at least, unless `exact`; each answered
    `status`) for `host` since `mark`; and nothing resolved for it (dnsmasq was never asked
    since `dns`)."""
    recs = gw.audit.wait(mark, about(host), count=1 + requests)
    tunnels = [r for r in recs if r["method"] == "CONNECT"]
    inside = [r for r in recs if r["method"] != "CONNECT"]
    assert len(tunnels) >= 1, recs
    for rec in tunnels:
        expect.record(rec, sandbox=SANDBOX, mode="connect", decision="deny", reason=REASON,
                      status=200, rule=None, upstream=None, url="https://" + host)
    if exact:  # one connection: the tunnel's record, then its requests'
        assert (len(tunnels), len(inside)) == (1, requests), recs
        assert {r["conn"] for r in inside} == {tunnels[0]["conn"]}, recs
    else:
        assert len(inside) >= requests, recs
    for rec in inside:
        expect.record(rec, sandbox=SANDBOX, mode="connect", decision="deny", reason=REASON,
                      status=status, rule=None, upstream=None, sni=host, proto=proto)
        assert rec["addrs"] in (None, []), rec
    assert dns.asked(host) == [], "sluice resolved a name it refuses"
    return tunnels, inside


def run(cmd, timeout=120, **kw):
    kw.setdefault("env", clean_env())
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def python(script, *args, timeout=60):
    """`script` under Debian's Python (its requests and grpcio), args in sys.argv[1:]."""
    return run([PYTHON, "-c", script] + [str(a) for a in args], timeout=timeout)


# --- curl -----------------------------------------------------------------------------------

def test_curl_shows_the_403_and_the_line(gw, bed):
    """curl 7.88 now prints sluice's line and exits 0 (`-sS`): what the user reads is

        sluice: not_allowed_host: deny-curl-M.attacker.test is not in the policy of sandbox
        sbx1; a rule would need hosts: [deny-curl-M.attacker.test]

    with `HTTP/2 403` and `sluice-reason: not_allowed_host` in its headers (curl offers h2);
    over HTTP/1.1 the status line is `HTTP/1.1 403 Forbidden by sluice: not_allowed_host`.
    With `-f`: exit 22, "The requested URL returned error: 403". The same request with
    `--proxy-header 'Sluice-Refusal: at_connect'` gets the old answer: exit 56, "CONNECT tunnel
    failed, response 403", and one record (the CONNECT's 403)."""
    host = denied_name("curl")
    url = "https://%s/some/path" % host
    mark, dns = gw.audit.mark(), DnsMark(bed)
    r = gw.curl(url)
    assert (r.rc, r.http_connect, r.http_code) == (0, 200, 403), r.stderr
    assert r.body.decode() == body_line(host) + "\n", r.body
    expect.denial(r.final, 403, REASON)
    assert (r.final.header("Content-Type") or "").startswith("text/plain"), r.final.headers
    refusal_records(gw, bed, mark, dns, host, "h2")

    mark = gw.audit.mark()
    r = gw.curl(url, "--http1.1")
    assert (r.rc, r.http_code) == (0, 403), r.stderr
    assert (r.final.status, r.final.reason) == (403, PHRASE), r.final
    assert r.body.decode() == body_line(host) + "\n", r.body
    refusal_records(gw, bed, mark, dns, host, "http/1.1")

    mark = gw.audit.mark()
    r = gw.curl(url, "-f")
    assert r.rc == 22, (r.rc, r.stderr)
    assert "The requested URL returned error: 403" in r.stderr, r.stderr
    refusal_records(gw, bed, mark, dns, host, "h2")

    mark = gw.audit.mark()
    r = gw.curl(url, "--proxy-header", "Sluice-Refusal: at_connect")
    assert r.rc == 56, (r.rc, r.stderr)
    assert "CONNECT tunnel failed, response 403" in r.stderr, r.stderr
    rec = gw.audit.one(mark, about(host))
    expect.connect_denial_record(rec, REASON, host, 443)
    assert dns.asked(host) == []


def test_a_sandbox_with_refusal_at_connect_keeps_the_connect_403(make_gw, bed):
    """`refusal: at_connect` on the sandbox: curl reads what it read before, "CONNECT tunnel
    failed, response 403" (exit 56), and the one record is the CONNECT's 403."""
    def edit(config, workdir):
        config["sandboxes"][0]["refusal"] = "at_connect"
    gw = make_gw(edit=edit)
    host = denied_name("atconnect")
    mark, dns = gw.audit.mark(), DnsMark(bed)
    r = gw.curl("https://%s/" % host)
    assert (r.rc, r.http_connect) == (56, 403), (r.rc, r.stderr)
    assert "CONNECT tunnel failed, response 403" in r.stderr, r.stderr
    expect.connect_denial_record(gw.audit.one(mark, about(host)), REASON, host, 443)
    assert dns.asked(host) == []


# --- Python: urllib and requests -------------------------------------------------------------

URLLIB = r"""
import ssl, sys, urllib.error, urllib.request
proxy, ca, url = sys.argv[1:]
opener = urllib.request.build_opener(
    urllib.request.ProxyHandler({"https": proxy}),
    urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=ca)))
try:
    opener.open(url, timeout=20)
    print("no error")
except urllib.error.HTTPError as e:
    print("str: %s" % e)
    print("reason: %s" % e.reason)
    print("content-type: %s" % e.headers["Content-Type"])
    print("body: %s" % e.read().decode(), end="")
"""

REQUESTS = r"""
import sys, requests
proxy, ca, url = sys.argv[1:]
r = requests.get(url, proxies={"https": proxy}, verify=ca, timeout=20)
print("status: %d" % r.status_code)
print("reason: %s" % r.reason)
print("text: %s" % r.text, end="")
try:
    r.raise_for_status()
except requests.HTTPError as e:
    print("raise_for_status: %s" % e)
"""


def test_python_urllib_raises_httperror_with_the_reason(gw, bed):
    """urllib.request (ProxyHandler, an SSL context trusting the sandbox CA) raises
    `HTTPError`, whose str is "HTTP Error 403: Forbidden by sluice: not_allowed_host" and whose
    body is sluice's line. (Before, with the 403 on the CONNECT: `URLError: <urlopen error
    Tunnel connection failed: 403 Forbidden by sluice: not_allowed_host>`, the reason but not
    the line, and no status to branch on.)"""
    host = denied_name("urllib")
    mark, dns = gw.audit.mark(), DnsMark(bed)
    r = python(URLLIB, gw.sluice.proxy_url, gw.sluice.ca_pem, "https://%s/data.json" % host)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines == ["str: HTTP Error 403: " + PHRASE, "reason: " + PHRASE,
                     "content-type: text/plain; charset=utf-8",
                     "body: " + body_line(host)], r.stdout
    refusal_records(gw, bed, mark, dns, host, "http/1.1")


def test_python_requests_gets_a_403_response_with_the_reason(gw, bed):
    """requests (proxies=, verify=the sandbox CA) returns a Response: status_code 403, reason
    "Forbidden by sluice: not_allowed_host", text sluice's line; raise_for_status() says "403
    Client Error: Forbidden by sluice: not_allowed_host for url: https://deny-.../". (Before:
    `requests.exceptions.ProxyError: ... (Caused by ProxyError('Cannot connect to proxy.',
    OSError('Tunnel connection failed: 403 Forbidden by sluice: not_allowed_host')))`.)"""
    host = denied_name("requests")
    url = "https://%s/api/v1" % host
    mark, dns = gw.audit.mark(), DnsMark(bed)
    r = python(REQUESTS, gw.sluice.proxy_url, gw.sluice.ca_pem, url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "status: 403", "reason: " + PHRASE, "text: " + body_line(host),
        "raise_for_status: 403 Client Error: %s for url: %s" % (PHRASE, url)], r.stdout
    refusal_records(gw, bed, mark, dns, host, "http/1.1")


# --- Java -----------------------------------------------------------------------------------

# JDK 17's java.net.http.HttpClient through sluice (the https.proxyHost/Port properties, read by
# ProxySelector.getDefault()), trusting the sandbox's PKCS#12 store, as test_websocket.py runs it.
HTTP_JAVA = """
import java.net.ProxySelector;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

public class Get {
    public static void main(String[] args) throws Exception {
        HttpClient client = HttpClient.newBuilder().proxy(ProxySelector.getDefault())
                .connectTimeout(Duration.ofSeconds(20)).build();
        HttpRequest request = HttpRequest.newBuilder(URI.create(args[0]))
                .timeout(Duration.ofSeconds(30)).build();
        HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
        System.out.println("status " + response.statusCode() + " " + response.version());
        System.out.println("sluice-reason " + response.headers().firstValue("sluice-reason")
                .orElse("-"));
        System.out.print(response.body());
    }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="no java (scripts/install-deps --test "
                    "installs openjdk-17-jre-headless)")
def test_java_httpclient_gets_a_403_with_the_line(gw, bed, scratch):
    """java.net.http.HttpClient (HTTP/2 by default, h2 agreed in the tunnel) gets a response:
    statusCode() 403 (version HTTP_2), the sluice-reason header, the body sluice's line.
    (Before: send() threw `java.io.IOException: Tunnel failed, got: 403`.)"""
    source = os.path.join(scratch, "Get.java")
    with open(source, "w") as f:
        f.write(HTTP_JAVA)
    store = os.path.join(os.path.dirname(gw.sluice.ca_pem), "ca.p12")
    assert os.path.exists(store), store
    host = denied_name("java")
    proxy_host, proxy_port = gw.sluice.address
    mark, dns = gw.audit.mark(), DnsMark(bed)
    r = run(["java", "-Dhttps.proxyHost=%s" % proxy_host, "-Dhttps.proxyPort=%d" % proxy_port,
             "-Djavax.net.ssl.trustStore=" + store,
             "-Djavax.net.ssl.trustStorePassword=changeit",
             "-Djavax.net.ssl.trustStoreType=PKCS12", source, "https://%s/v2/items" % host],
            cwd=scratch)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["status 403 HTTP_2", "sluice-reason " + REASON,
                                     body_line(host)], r.stdout
    refusal_records(gw, bed, mark, dns, host, "h2")


# --- gRPC -----------------------------------------------------------------------------------

GRPC = r"""
import sys, time, grpc
proxy, ca, target = sys.argv[1:]
with open(ca, "rb") as f:
    credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
channel = grpc.secure_channel(target, credentials, options=[("grpc.http_proxy", proxy)])
started = time.monotonic()
try:
    channel.unary_unary("/pkg.Svc/Method")(b"hello", timeout=30)
    print("no error")
except grpc.RpcError as e:
    print("code: %s" % e.code())
    print("details: %s" % e.details())
print("seconds: %.2f" % (time.monotonic() - started))
channel.close()
"""


def test_grpc_call_fails_fast_with_permission_denied(gw, bed):
    """grpcio (grpc.http_proxy, the sandbox CA as its only root) gets, at once, an RpcError
    with code StatusCode.PERMISSION_DENIED and details naming not_allowed_host (the
    trailers-only answer of docs/wire.md#grpc): details is sluice's line. (Before, grpc-core
    read the CONNECT's 403 as a connection failure: StatusCode.UNAVAILABLE, "failed to connect
    to all addresses; last error: UNKNOWN: ipv4:127.0.0.2:PORT: HTTP proxy returned response
    code 403", a code clients retry.)"""
    host = denied_name("grpc")
    mark, dns = gw.audit.mark(), DnsMark(bed)
    r = python(GRPC, gw.sluice.proxy_url, gw.sluice.ca_pem, "%s:443" % host)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "code: StatusCode.PERMISSION_DENIED", r.stdout
    assert lines[1] == "details: " + body_line(host), r.stdout
    assert float(lines[2].split()[1]) < 5, r.stdout
    # The call's record: the 200 of the trailers-only answer (docs/audit.md, `status`).
    _, inside = refusal_records(gw, bed, mark, dns, host, "h2", status=200)
    expect.record(inside[0], method="POST", url="https://%s/pkg.Svc/Method" % host)


# --- git ------------------------------------------------------------------------------------

def test_git_clone_shows_the_line_as_remote(gw, bed, scratch):
    """git 2.39 (libcurl, smart HTTP) fails the clone; its first request, GET
    /repo.git/info/refs?service=git-upload-pack, is refused, and git prints the text/plain
    body as a "remote:" line before its own error:

        remote: sluice: not_allowed_host: deny-git-M.attacker.test is not in the policy of
        sandbox sbx1; a rule would need hosts: [deny-git-M.attacker.test]
        fatal: unable to access 'https://deny-git-M.attacker.test/repo.git/': The requested
        URL returned error: 403

    (before: "fatal: unable to access ...: CONNECT tunnel failed, response 403")."""
    host = denied_name("git")
    home = os.path.join(scratch, "home")
    os.mkdir(home)
    mark, dns = gw.audit.mark(), DnsMark(bed)
    r = run(["git", "-c", "http.proxy=" + gw.sluice.proxy_url, "clone",
             "https://%s/repo.git" % host, os.path.join(scratch, "repo")],
            env=clean_env(HOME=home, GIT_SSL_CAINFO=gw.sluice.ca_pem, GIT_TERMINAL_PROMPT="0",
                          GIT_CONFIG_NOSYSTEM="1", LC_ALL="C"), timeout=60)
    assert r.returncode == 128, (r.returncode, r.stderr)
    assert "remote: " + body_line(host) in r.stderr.splitlines(), r.stderr
    assert "The requested URL returned error: 403" in r.stderr, r.stderr
    assert "CONNECT tunnel failed" not in r.stderr, r.stderr
    _, inside = refusal_records(gw, bed, mark, dns, host, {"h2", "http/1.1"})
    assert inside[0]["url"] == \
        "https://%s/repo.git/info/refs?service=git-upload-pack" % host, inside


# --- Chromium -------------------------------------------------------------------------------

def nss_home(scratch, ca_pem):
    """A HOME whose NSS database ($HOME/.pki/nssdb, which Chromium reads) trusts the sandbox
    CA for TLS servers."""
    if shutil.which("certutil") is None:
        pytest.skip("no certutil (libnss3-tools)")
    home = os.path.join(scratch, "home")
    db = "sql:" + os.path.join(home, ".pki", "nssdb")
    os.makedirs(os.path.join(home, ".pki", "nssdb"))
    for args in (["-N", "--empty-password"], ["-A", "-t", "C,,", "-n", "sluice", "-i", ca_pem]):
        r = run(["certutil", "-d", db] + args, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
    return home


def test_chromium_shows_the_line_as_the_page(gw, bed, scratch):
    """Headless Chromium through sluice (--proxy-server), trusting the sandbox CA from its NSS
    database: the page is sluice's text/plain body, which --dump-dom gives as

        <html><head>...</head><body><pre ...>sluice: not_allowed_host: deny-chromium-M
        .attacker.test is not in the policy of sandbox sbx1; a rule would need hosts:
        [deny-chromium-M.attacker.test]</pre></body></html>

    (before: no page, "Page load failed: net::ERR_TUNNEL_CONNECTION_FAILED" on stderr). It
    also asks for /favicon.ico, refused the same way. Chromium's own background
    requests (other hosts, refused too) are left out of the records by host."""
    binary = chromium()
    home = nss_home(scratch, gw.sluice.ca_pem)
    host = denied_name("chromium")
    mark, dns = gw.audit.mark(), DnsMark(bed)
    r = run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking",
             "--proxy-server=" + gw.sluice.proxy_url,
             "--user-data-dir=" + os.path.join(scratch, "chromium-profile"),
             "--dump-dom", "https://%s/index.html" % host],
            env=clean_env(HOME=home))
    assert r.returncode == 0, r.stderr[-2000:]
    assert body_line(host) in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert "ERR_" not in r.stdout, r.stdout[-2000:]
    _, inside = refusal_records(gw, bed, mark, dns, host, "h2", exact=False)
    assert any(rec["url"] == "https://%s/index.html" % host for rec in inside), inside
