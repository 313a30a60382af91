"""Transparent mode, the allowed paths (docs/wire.md#transparent-mode,
#the-sandboxs-resolver, docs/audit.md): a sandbox namespace wired by
examples/sandbox-netns.sh, whose clients run with no proxy settings at all, reaches the allowed
origin through sluice: curl over https and http, and `pip download` from a simple index.

The sandbox learns allowed.test from sluice's resolver (the gateway address), connects there on
443 or 80, nftables redirects it to sluice's `transparent` listener, and sluice, which reads
H from the SNI or the Host, resolves H itself and dials the CDN origin. Each request leaves one
audit record: mode "transparent", orig_dst the gateway address and the port dialled.
Needs root (namespaces, nftables); skips with the reason otherwise.
"""
import hashlib
import os

import pytest

from audit import verify_chain
import content
from transparent_bed import SANDBOX, check_record, transparent_env


@pytest.fixture(scope="module")
def env(bed, sluice_binary):
    with transparent_env(bed, sluice_binary) as e:
        yield e


def test_https_by_name_goes_through_sluice_to_the_allowed_origin(env):
    m = env.mark()
    url = "https://allowed.test/whoami.txt?m=%s" % m.marker
    r = env.curl(url)
    assert (r.rc, r.http_code, r.body) == (0, 200, b"allowed.test\n"), (r.rc, r.stderr)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % env.gw, "allow", None, "allowed.test", "allowed.test",
                 200, rule="cdn", url=url, method="GET",
                 upstream="%s:443" % env.addrs.cdn)
    assert rec["addrs"] in ([], [env.addrs.cdn]), rec  # [] when a pooled connection served it
    hits = env.cdn_hits(m.marker)
    assert [(h["ssl_server_name"], h["host"], h["status"]) for h in hits] == \
        [("allowed.test", "allowed.test", "200")], hits
    m.canaries.assert_untouched()
    env.assert_nothing_dialled_outside(m)


def test_http_by_name_goes_through_sluice_to_the_allowed_origin(env):
    m = env.mark()
    url = "http://allowed.test/whoami.txt?m=%s" % m.marker
    r = env.curl(url)
    assert (r.rc, r.http_code, r.body) == (0, 200, b"allowed.test\n"), (r.rc, r.stderr)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:80" % env.gw, "allow", None, None, "allowed.test", 200,
                 rule="cdn", url=url, method="GET", upstream="%s:80" % env.addrs.cdn)
    hits = env.cdn_hits(m.marker)
    assert [(h["ssl_server_name"], h["host"], h["server_port"]) for h in hits] == \
        [("", "allowed.test", "80")], hits
    m.canaries.assert_untouched()


def test_the_certificate_is_minted_by_the_sandbox_ca_for_h(env):
    """The sandbox sees sluice's certificate for allowed.test, not the origin's."""
    ex = env.exchange(env.gw, 443, [b"GET /whoami.txt HTTP/1.1\r\nHost: allowed.test\r\n"
                                    b"Connection: close\r\n\r\n"], sni="allowed.test")
    assert ex.tls_error is None, ex.tls_error
    assert ex.peer_names == ["allowed.test"]
    assert ex.alpn in (None, "http/1.1")
    assert ex.final.status == 200 and ex.final.body == b"allowed.test\n"


def test_pip_download_from_the_simple_index(env, scratch):
    m = env.mark()
    dest = os.path.join(scratch, "dl")
    r = env.pip(dest)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(dest, content.WHEEL), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == env.bed.content.wheel_sha256
    records = env.audit.wait(m.audit, count=2)
    assert len(records) == 2, records
    for rec in records:
        check_record(env, rec, "%s:443" % env.gw, "allow", None, "allowed.test",
                     "allowed.test", 200, rule="cdn", upstream="%s:443" % env.addrs.cdn)
    assert [r["url"] for r in records] == [
        "https://allowed.test/simple/%s/" % content.PKG,
        "https://allowed.test/packages/%s" % content.WHEEL]
    assert records[1]["resp_sha256"] == env.bed.content.wheel_sha256
    env.nginx.barrier()
    uris = [e["uri"] for e in env.nginx.access("cdn")]
    assert "/simple/%s/" % content.PKG in uris and "/packages/%s" % content.WHEEL in uris
    m.canaries.assert_untouched()


def test_keep_alive_requests_are_each_recorded(env):
    """Two requests on one transparent TLS connection: two records, same client, each
    decided on its own."""
    m = env.mark()
    reqs = [b"GET /whoami.txt?m=%s-1 HTTP/1.1\r\nHost: allowed.test\r\n\r\n" % m.marker.encode(),
            b"GET /whoami.txt?m=%s-2 HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n"
            % m.marker.encode()]
    ex = env.exchange(env.gw, 443, reqs, sni="allowed.test")
    assert [r.status for r in ex.responses] == [200, 200], (ex.responses, ex.error)
    records = env.audit.wait(m.audit, count=2)
    assert len(records) == 2 and {r["client"] for r in records} == {ex.client}, records
    for rec, n in zip(records, (1, 2)):
        check_record(env, rec, "%s:443" % env.gw, "allow", None, "allowed.test",
                     "allowed.test", 200, url="https://allowed.test/whoami.txt?m=%s-%d"
                     % (m.marker, n))
    assert len(env.cdn_hits(m.marker)) == 2


def test_the_audit_log_is_intact_and_all_transparent(env):
    lines = env.audit.lines()
    assert lines, "no records"
    assert verify_chain(lines) == 0
    for rec in env.audit.records():
        assert rec["mode"] == "transparent" and rec["sandbox"] == SANDBOX, rec
        assert rec["orig_dst"] is not None, rec


def test_h2_on_a_redirected_connection_is_decided_per_stream(env):
    """HTTP/2 in transparent mode (docs/wire.md#http2): curl --http2 inside the sandbox, no
    proxy; the redirected connection's TLS agrees h2 (ALPN), H is the SNI, and each stream is a
    request of its own: the allowed one is on record with proto "h2", and a stream whose
    :authority names another host than the SNI (curl puts a Host header there) is 403
    host_mismatch on its stream and never reaches any origin."""
    m = env.mark()
    url = "https://allowed.test/whoami.txt?m=%s" % m.marker
    r = env.curl(url, "--http2")
    assert (r.rc, r.http_code, r.body) == (0, 200, b"allowed.test\n"), (r.rc, r.stderr)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % env.gw, "allow", None, "allowed.test", "allowed.test",
                 200, rule="cdn", url=url, method="GET", proto="h2")
    denied = env.mark()
    url = "https://allowed.test/whoami.txt?m=%s" % denied.marker
    r = env.curl(url, "--http2", "-H", "Host: attacker.test")
    assert (r.rc, r.http_code) == (0, 403), (r.rc, r.stderr)
    assert r.sluice_reason == "host_mismatch", r.blocks
    rec = env.audit.one(denied.audit)
    check_record(env, rec, "%s:443" % env.gw, "deny", "host_mismatch", "allowed.test", ...,
                 403, proto="h2", upstream=None)
    assert env.cdn_hits(denied.marker) == []
    denied.canaries.assert_untouched()
