"""docs/threat-model.md#tls-parser-disagreement and #protocol-escapes at the ClientHello: no SNI,
bytes that are not TLS, hellos cut into pieces. A tunnel never becomes a blind relay, and a split
hello is read whole before deciding."""
import pytest

import expect
from http1 import request_bytes
from tlsraw import byte_splitter, record_splitter


def get(path, host="allowed.test", **kw):
    return request_bytes("GET", path, host, **kw)


def test_no_sni_is_closed(gw, bed):
    mark = gw.audit.mark()
    ex = gw.tunnel("allowed.test", [get("/whoami.txt?nosni", host="other.test")], sni=None)
    assert ex.tls_error is not None, "TLS session made without SNI"
    assert ex.responses == []
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="connect", decision="deny", reason="sni_missing", sni=None,
                  status=None, upstream=None)
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if "nosni" in e["uri"]]


@pytest.mark.parametrize("raw", [
    b"GET /whoami.txt?nottls HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
    b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n",
    b"\x16\x03\x01\x00\x05hello",  # a handshake record that is no ClientHello
], ids=["plain_http", "ssh_banner", "bogus_handshake_record"])
def test_not_tls_after_connect_is_closed(gw, bed, raw):
    mark = gw.audit.mark()
    ex = gw.tunnel("allowed.test", raw=raw)
    assert ex.connect.status == 200
    assert ex.close_how in ("eof", "reset"), "tunnel still open after non-TLS bytes"
    assert not ex.tail.startswith(b"HTTP/1.1 200"), ex.tail[:100]
    assert b"allowed.test" not in ex.tail and b"SSH-" not in ex.tail  # nothing relayed
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, mode="connect", decision="deny", reason="not_tls", status=None,
                  upstream=None, sni=None)
    bed.nginx.barrier()
    assert not [e for e in bed.nginx.access("cdn") if "nottls" in e["uri"]]


@pytest.mark.parametrize("splitter", [byte_splitter(3), record_splitter(7)],
                         ids=["tcp_reads_3_bytes", "tls_records_7_bytes"])
def test_client_hello_split_is_reassembled(gw, splitter):
    mark = gw.audit.mark()
    ex = gw.tunnel("allowed.test", [get("/whoami.txt", keep_alive=False)],
                   hello_chunks=splitter)
    assert ex.tls_error is None, ex.tls_error
    assert (ex.final.status, ex.final.body) == (200, b"allowed.test\n")
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="allow", sni="allowed.test")


def test_split_hello_with_mismatched_sni_is_still_refused(gw):
    """The SNI of a hello spread over many records is the one that counts."""
    mark = gw.audit.mark()
    ex = gw.tunnel("allowed.test", [get("/", host="other.test")], sni="other.test",
                   hello_chunks=record_splitter(7))
    assert ex.tls_error is not None
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    expect.record(rec, decision="deny", reason="sni_mismatch")
