"""Self-tests of the bed, without sluice: the peers serve, log and fail exactly as the gateway
tests assume. If one of these fails, a gateway test's verdict means nothing."""
import hashlib
import ipaddress
import os
import socket
import threading

import h2.config
import h2.connection
import h2.events
import pytest

import clients
import content as C
from dnswire import query
from http1 import HttpReader, request_bytes
from netutil import wait_until
from pki import BedPKI
from tlsraw import TLSStream, byte_splitter, record_splitter

CDN_NAMES = BedPKI.CDN_NAMES


def direct(bed, name, path, *args, address="127.0.0.20", cacert=None, scheme="https"):
    port = bed.tls_port if scheme == "https" else bed.plain_port
    return clients.curl("%s://%s:%d%s" % (scheme, name, port, path),
                        "--resolve", "%s:%d:%s" % (name, port, address), *args,
                        cacert=cacert or bed.pki.test_ca.cert)


@pytest.mark.parametrize("name", CDN_NAMES)
def test_cdn_serves_every_name_by_sni(bed, name):
    r = direct(bed, name, "/whoami.txt", "-H", "X-Test: selftest")
    assert (r.rc, r.http_code, r.body) == (0, 200, (name + "\n").encode()), r.stderr
    entry = bed.nginx.wait_access("cdn", lambda e: e["x_test"] == "selftest" and
                                  e["ssl_server_name"] == name)[-1]
    assert entry["host"] == name and entry["http_host"] == "%s:%d" % (name, bed.tls_port)


def test_cdn_routes_by_host_not_sni(bed):
    """The shared-CDN premise: SNI allowed.test with Host other.test reaches other.test."""
    r = direct(bed, "allowed.test", "/whoami.txt", "-H", "Host: other.test")
    assert (r.http_code, r.body) == (200, b"other.test\n")
    bed.nginx.wait_access("cdn", lambda e: e["ssl_server_name"] == "allowed.test" and
                          e["host"] == "other.test")


def test_plain_port_routes_by_host(bed):
    r = clients.curl("http://127.0.0.20:%d/whoami.txt" % bed.plain_port, "-H", "Host: evil.test")
    assert (r.http_code, r.body) == (200, b"evil.test\n")


def test_second_address_serves_second_test(bed):
    r = direct(bed, "second.test", "/whoami.txt", address="127.0.0.21")
    assert (r.http_code, r.body) == (200, b"second.test\n")
    bed.nginx.wait_access("second", lambda e: e["host"] == "second.test")


def test_chunked_page_is_sent_chunked(bed):
    r = direct(bed, "allowed.test", "/chunked.html")
    assert r.http_code == 200
    assert r.final.header("Transfer-Encoding") == "chunked"
    assert r.final.header("Content-Length") is None
    assert r.body == bed.content.chunked_expected


def test_head_has_length_and_no_body(bed):
    """HEAD, then GET on the same connection: the GET parses only if HEAD sent no body."""
    size = len(bed.content.files[("allowed.test", "/head.txt")])
    sock = socket.create_connection(("127.0.0.20", bed.tls_port), timeout=10)
    tls = TLSStream(sock, "allowed.test", bed.pki.test_ca.cert)
    reader = HttpReader(tls)
    tls.sendall(request_bytes("HEAD", "/head.txt", "allowed.test"))
    head = reader.read_response("HEAD")
    tls.sendall(request_bytes("GET", "/whoami.txt", "allowed.test", keep_alive=False))
    after = reader.read_response()
    tls.close()
    assert (head.status, head.header("Content-Length")) == (200, str(size))
    assert (after.status, after.body) == (200, b"allowed.test\n")


@pytest.mark.parametrize("chunked", [False, True], ids=["content_length", "chunked"])
def test_upload_body_is_kept_verbatim(bed, chunked):
    body = os.urandom(300 * 1024) + b"\r\n0\r\n\r\nGET /not-a-request HTTP/1.1\r\n"
    marker = "upload-%s" % chunked
    args = ["--data-binary", "@-", "-H", "X-Test: " + marker,
            "-H", "Content-Type: application/octet-stream"]
    if chunked:
        args += ["-H", "Transfer-Encoding: chunked"]
    r = clients.curl("https://allowed.test:%d/upload/x" % bed.tls_port, "--resolve",
                     "allowed.test:%d:127.0.0.20" % bed.tls_port, *args,
                     cacert=bed.pki.test_ca.cert, stdin=body)
    assert (r.http_code, r.body) == (200, b"stored\n"), r.stderr
    entry = bed.nginx.wait_access("cdn", lambda e: e["x_test"] == marker)[-1]
    with open(entry["body_file"], "rb") as f:
        assert f.read() == body
    assert entry["transfer_encoding"] == ("chunked" if chunked else "")


def test_big_file_digest(bed):
    r = direct(bed, "allowed.test", "/big.bin")
    assert r.http_code == 200
    assert (r.body_len, r.body_sha256) == (C.BIG_SIZE, bed.content.big_sha256)


@pytest.mark.parametrize("name", ["expired.wild.test", "wrongname.wild.test"])
def test_broken_certificates_fail_verification(bed, name):
    r = direct(bed, name, "/whoami.txt")
    assert r.rc == 60, (r.rc, r.stderr)  # curl: peer certificate cannot be authenticated


def test_attacker_cert_is_untrusted_by_test_ca(bed):
    mark = bed.nginx.canary_mark("attacker")
    r = direct(bed, "allowed.test", "/whoami.txt", address="127.0.0.66")
    assert r.rc == 60, r.stderr
    trusted = direct(bed, "allowed.test", "/whoami.txt", address="127.0.0.66",
                     cacert=bed.pki.attacker_ca.cert)
    assert (trusted.http_code, trusted.body) == (200, b"ATTACKER\n")
    bed.nginx.barrier()
    hits = bed.nginx.canary_hits_since("attacker", mark)
    assert len([h for h in hits if isinstance(h, dict)]) == 1  # the trusted request
    assert any(isinstance(h, str) for h in hits)  # the refused handshake left a trace


@pytest.mark.parametrize("scheme", ["https", "http"])
def test_internal_canary_logs_direct_hits(bed, scheme):
    mark = bed.nginx.canary_mark("internal")
    r = direct(bed, "loop.wild.test", "/whoami.txt", address="127.0.0.1", scheme=scheme)
    assert (r.http_code, r.body) == (200, b"INTERNAL\n"), r.stderr
    bed.nginx.barrier()
    assert bed.nginx.canary_hits_since("internal", mark)


def test_canary_sees_a_bare_connection(bed):
    """A connect-and-close with no request is visible too (info-level error log)."""
    mark = bed.nginx.canary_mark("internal")
    socket.create_connection(("127.0.0.1", bed.tls_port), timeout=5).close()
    bed.nginx.barrier()
    wait_until(lambda: bed.nginx.canary_hits_since("internal", mark), 10, "canary trace")


def test_dnsmasq_answers_the_zone(bed):
    for name, addresses in bed.dns.ZONE.items():
        got = []
        for qtype in (1, 28):  # A, AAAA
            answer = bed.dns.query(name, qtype=qtype)
            assert answer.rcode == "NOERROR", (name, qtype, answer)
            got += answer.addresses
        want = [str(ipaddress.ip_address(a)) for a in addresses]
        assert sorted(got) == sorted(want), name
    assert bed.dns.query("nothing-here.test").rcode == "NXDOMAIN"
    assert bed.dns.query("exfil.attacker.test").rcode == "NXDOMAIN"  # exact names only
    assert bed.dns.query("allowed.test", qtype=28).addresses == []
    assert "nothing-here.test" in bed.dns.was_asked("nothing-here")


def test_silent_resolver_never_answers(bed):
    before = bed.silent_dns.received
    with pytest.raises(socket.timeout):
        query(bed.silent_dns.ADDRESS, bed.silent_dns.port, "allowed.test", timeout=0.3)
    assert bed.silent_dns.received == before + 1


@pytest.mark.parametrize("splitter", [byte_splitter(3), record_splitter(7)],
                         ids=["tcp_3_bytes", "tls_records_7_bytes"])
def test_split_client_hello_is_valid_tls(bed, splitter):
    """The raw client's cut-up ClientHellos are accepted by OpenSSL (nginx) directly."""
    sock = socket.create_connection(("127.0.0.20", bed.tls_port), timeout=10)
    tls = TLSStream(sock, "allowed.test", bed.pki.test_ca.cert, hello_chunks=splitter)
    assert tls.peer_dns_names() == ["allowed.test"]
    tls.sendall(request_bytes("GET", "/whoami.txt", "allowed.test", keep_alive=False))
    resp = HttpReader(tls).read_response()
    tls.close()
    assert (resp.status, resp.body) == (200, b"allowed.test\n")


def test_pip_download_direct(bed, scratch):
    """The simple index and the wheel work for pip (by IP: pip has no --resolve)."""
    index = "https://127.0.0.20:%d/simple/" % bed.tls_port
    r = clients.pip_download(index, C.PKG, scratch, bed.pki.test_ca.cert)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(scratch, C.WHEEL), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == bed.content.wheel_sha256


def test_curl_connect_to_sends_ip_literal_connect():
    """Premise of test_connect_to_attacker_address: with a proxy, curl's --connect-to puts
    the IP in the CONNECT line while SNI and Host stay allowed.test."""
    server = socket.socket()
    server.bind(("127.0.0.2", 0))
    server.listen()
    seen = []

    def answer():
        conn, _ = server.accept()
        seen.append(conn.recv(4096))
        conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        conn.close()
    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    clients.curl("https://allowed.test:8443/", "--connect-to", "allowed.test:8443:127.0.0.66:8443",
                 proxy="http://127.0.0.2:%d" % server.getsockname()[1], timeout=10)
    thread.join(10)
    server.close()
    assert seen and seen[0].startswith(b"CONNECT 127.0.0.66:8443 HTTP/1.1\r\n")


def test_h2_origin_speaks_http2_and_http11(bed):
    """h2.test (127.0.0.25) selects ALPN h2 when offered, and HTTP/1.1 otherwise: its log tells
    the two apart ($server_protocol) and names each connection; its /trailer/ location sends a
    trailer after the body; the bed's other origins still speak HTTP/1.1 only (curl --http2
    falls back), as every test but the HTTP/2-upstream ones assume."""
    for flag, proto in (("--http2", "HTTP/2.0"), ("--http1.1", "HTTP/1.1")):
        tag = "selftest-h2-" + flag
        r = direct(bed, "h2.test", "/whoami.txt", flag, "-H", "X-Test: " + tag,
                   address="127.0.0.25")
        assert (r.rc, r.http_code, r.body) == (0, 200, b"h2.test\n"), r.stderr
        entry = bed.nginx.wait_access("h2", lambda e: e["x_test"] == tag)[-1]
        assert (entry["protocol"], entry["host"]) == (proto, "h2.test"), entry
        assert entry["connection"].isdigit(), entry
    # curl does not show trailers: python3-h2, straight to nginx
    sock = socket.create_connection(("127.0.0.25", bed.tls_port), timeout=10)
    tls = TLSStream(sock, "h2.test", bed.pki.test_ca.cert, alpn=("h2",))
    assert tls.alpn() == "h2"
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                                header_encoding="utf-8"))
    conn.initiate_connection()
    for stream_id, path, length, want in (
            (1, "/trailer/data.txt", "23", b"a body before trailers\n"),
            (3, "/trailer/page.html", None, b"<p>replaced-by-nginx before trailers</p>\n")):
        conn.send_headers(stream_id, [(":method", "GET"), (":scheme", "https"),
                                      (":authority", "h2.test"), (":path", path)],
                          end_stream=True)
        tls.sendall(conn.data_to_send())
        events = []
        while not any(isinstance(e, h2.events.StreamEnded) for e in events):
            data = tls.recv()
            assert data, "nginx closed: %r" % events
            events += conn.receive_data(data)
            tls.sendall(conn.data_to_send())
        head = [dict(e.headers) for e in events if isinstance(e, h2.events.ResponseReceived)]
        body = b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived))
        trailers = [e.headers for e in events if isinstance(e, h2.events.TrailersReceived)]
        assert (head[0].get("content-length"), body, trailers) == \
            (length, want, [[("x-trailer", "trailer-value")]]), events
    sock.close()
    r = direct(bed, "h2.test", "/nocontent", "--http2", address="127.0.0.25")
    assert (r.http_code, r.body) == (204, b""), r.stderr
    r = direct(bed, "allowed.test", "/whoami.txt", "--http2", "-H", "X-Test: selftest-h1-only")
    assert (r.rc, r.http_code) == (0, 200), r.stderr
    entry = bed.nginx.wait_access("cdn", lambda e: e["x_test"] == "selftest-h1-only")[-1]
    assert entry["protocol"] == "HTTP/1.1", entry
