"""docs/threat-model.md#tls-parser-disagreement and R2/R6 at the ClientHello of a CONNECT tunnel,
with hand-made hellos (the server_name bytes, the size and the framing are ours): L2/L3 malformed or
non-canonical SNI, L4 large hellos, L5 ECH, L6 old versions, R2 hellos over 64 KiB, R6 no
certificate for a refused name and one leaf per name. L8: the sandbox CA itself.

docs/wire.md#tls-toward-the-sandbox, #tunnels-that-get-no-tls-session. A refused hello gets an alert
(or a close) and never a ServerHello, so no certificate is ever sent for it."""
import os
import socket
import stat
import subprocess

import pytest

import clients
import expect
from hello import Hello, first_answer, rest_until_closed, send_records, server_name_data
from oracles import DnsMark, marker
from sluice_proc import is_asan
from tlsraw import connect_tunnel

EXT_SUPPORTED_VERSIONS = 43
EXT_ECH = 0xfe0d
EXT_ESNI = 0xffce


def tunnel_then_hello(gw, records, authority=None, pause=0.0):
    """CONNECT allowed.test:T (200), send `records`; returns (first answer, client, rest)."""
    sock, answer, _ = connect_tunnel(gw.sluice.address, authority or gw.authority("allowed.test"))
    assert answer.status == 200, answer
    client = "%s:%d" % sock.getsockname()
    try:
        send_records(sock, records, pause)
    except OSError:
        pass  # refused before the whole hello was sent: what follows says how
    kind, detail = first_answer(sock)
    # after a ServerHello the session would go on: the caller only wanted to see it start
    rest, how = rest_until_closed(sock) if kind in ("alert", "other") else (b"", kind)
    sock.close()
    return (kind, detail), client, how


# --- L2/L3: server_name -----------------------------------------------------------------------

# server_name entries that are not exactly one host_name equal to H (after the normalisation
# of docs/policy.md#names): "an SNI other than H" (docs/wire.md#tunnels-that-get-no-tls-session)
# -> unrecognized_name alert,
# reason sni_mismatch, whatever the name's shape.
BAD_SNI = {
    "nul_inside": [b"allowed.test\x00.evil.test"],
    "nul_at_end": [b"allowed.test\x00"],
    "over_255_bytes": [b".".join([b"a" * 60] * 4) + b".allowed.test"],
    "label_over_63": [b"a" * 64 + b".allowed.test"],
    "space": [b"allowed test"],
    "underscore": [b"allowed_test"],
    "ip_literal_of_cdn": [b"127.0.0.20"],
    "empty_name": [b""],
    "non_ascii_cyrillic_a": ["\u0430llowed.test".encode()],
    "fullwidth": ["\uff41\uff4c\uff4c\uff4f\uff57\uff45\uff44.test".encode()],
    "xn_garbage": [b"xn--.allowed.test"],
    "other_tenant": [b"evil.test"],
    "allowed_plus_suffix": [b"allowed.test.evil.test"],
    "double_trailing_dot": [b"allowed.test.."],
    "two_names": [b"allowed.test", b"evil.test"],
    "two_names_same": [b"allowed.test", b"allowed.test"],
}
REFUSALS = {"unrecognized_name", "decode_error", "illegal_parameter", "handshake_failure"}


@pytest.mark.parametrize("case", sorted(BAD_SNI))
def test_malformed_or_foreign_sni_is_refused(gw, bed, case):
    """Edge case (L2/L3): CONNECT allowed.test, then a ClientHello whose server_name is not
    exactly allowed.test: a TLS alert and close, no ServerHello (so no certificate), a deny
    record with no status, and nothing resolved."""
    dns, mark = DnsMark(bed), gw.audit.mark()
    hello = Hello().set_server_names(BAD_SNI[case])
    (kind, alert), client, how = tunnel_then_hello(gw, hello.records())
    assert (kind, alert) == ("alert", "unrecognized_name"), (kind, alert)
    assert how in ("eof", "reset"), how
    rec = gw.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, mode="connect", decision="deny", reason="sni_mismatch", status=None,
                  upstream=None)
    assert dns.asked_containing("evil") == [] and dns.asked("allowed.test") == []


def test_second_server_name_extension_is_refused(gw):
    """Edge case (L3): two server_name extensions (allowed.test, evil.test)."""
    mark = gw.audit.mark()
    hello = Hello().set_server_names([b"allowed.test"])
    hello.add_extension(0, server_name_data([b"evil.test"]))
    (kind, alert), client, how = tunnel_then_hello(gw, hello.records())
    assert (kind, alert) == ("alert", "decode_error"), (kind, alert)  # a malformed hello
    rec = gw.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, decision="deny", reason="not_tls", status=None, upstream=None)


def test_server_name_of_another_type_is_refused(gw):
    """Edge case (L3): a server_name entry with name_type 1 (not host_name)."""
    mark = gw.audit.mark()
    hello = Hello().set_server_names(None)
    hello.add_extension(0, server_name_data([b"allowed.test"], name_type=1), first=True)
    (kind, alert), client, how = tunnel_then_hello(gw, hello.records())
    assert (kind, alert) == ("alert", "unrecognized_name"), (kind, alert)
    rec = gw.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, decision="deny", reason="sni_mismatch", status=None, upstream=None)


def test_raw_hello_for_the_target_gets_a_server_hello(gw):
    """The premise of this file: the rebuilt hello itself is valid (SNI allowed.test, and
    ALLOWED.TEST. in canonical form, P1): sluice answers with a ServerHello."""
    for name in (b"allowed.test", b"ALLOWED.TEST."):
        (kind, _), _, _ = tunnel_then_hello(gw, Hello().set_server_names([name]).records())
        assert kind == "server_hello", (name, kind)


# --- L4 / R2: size and framing of the hello -----------------------------------------------------

@pytest.mark.parametrize("padding,size,pause", [(20000, 16384, 0.0), (60000, 16384, 0.0),
                                                (20000, 1000, 0.001)],
                         ids=["20k_in_16k_records", "60k_in_16k_records", "20k_in_1k_records"])
def test_large_hello_under_64k_is_reassembled(gw, padding, size, pause):
    """Edge case (L4): a hello padded past 16 KiB (one record cannot hold it) but under
    64 KiB, in several records: read whole and answered with a ServerHello, not "no SNI"."""
    hello = Hello().pad(padding)
    assert len(hello.message()) < 65536
    (kind, alert), _, _ = tunnel_then_hello(gw, hello.records(size), pause=pause)
    assert kind == "server_hello", (kind, alert)


@pytest.mark.parametrize("padding", [20000, 60000])
def test_large_hello_is_valid_tls_for_openssl(bed, padding):
    """The premise of the size tests: nginx (OpenSSL) itself answers the padded hello with a
    ServerHello."""
    sock = socket.create_connection(("127.0.0.20", bed.tls_port), timeout=10)
    send_records(sock, Hello().pad(padding).records(16384))
    kind, detail = first_answer(sock)
    sock.close()
    assert kind == "server_hello", (kind, detail)


def test_large_hello_with_foreign_sni_after_the_padding_is_refused(gw):
    """Edge case (L4): the server_name comes after 20 KiB of padding, i.e. in the second
    record: it still decides (evil.test: refused)."""
    hello = Hello().set_server_names(None).pad(20000)
    hello.add_extension(0, server_name_data([b"evil.test"]))
    (kind, alert), _, _ = tunnel_then_hello(gw, hello.records(16384))
    assert kind in ("alert", "eof", "reset"), (kind, alert)


def test_hello_over_64k_is_closed_with_an_alert(make_gw, bed):
    """Edge case (R2): a ClientHello of about 75 KiB (max padding plus 5000 unknown cipher
    suites) in 16 KiB records: handshake_failure alert, record header_too_large
    (docs/wire.md#tunnels-that-get-no-tls-session), and
    sluice's memory stays bounded."""
    g = make_gw()
    mark = g.audit.mark()
    base = Hello().pad(0)
    hello = base.pad(65535 - 4 - sum(4 + len(d) for t, d in base.extensions if t != 21))
    hello.add_cipher_suites(5000)
    assert len(hello.message()) > 70000
    (kind, alert), client, how = tunnel_then_hello(g, hello.records(16384))
    assert (kind, alert) in (("alert", "handshake_failure"), ("eof", None), ("reset", None)), \
        (kind, alert)
    assert how in ("eof", "reset")
    rec = g.audit.one(mark, lambda r: r["client"] == client)
    expect.record(rec, mode="connect", decision="deny", reason="header_too_large", status=None,
                  upstream=None)
    limit_mib = 512 if is_asan(g.sluice.binary) else 100
    assert g.sluice.vm_hwm_kib() < limit_mib * 1024


# --- L5 / L6 ------------------------------------------------------------------------------------

@pytest.mark.parametrize("ext", [EXT_ECH, EXT_ESNI], ids=["ech", "esni"])
def test_ech_outer_sni_decides(gw, ext):
    """Edge case (L5): a hello carrying an ECH (or legacy ESNI) extension: sluice terminates
    TLS, so it ignores the extension and decides on the outer SNI: allowed.test gets a
    ServerHello, evil.test an alert."""
    ok = Hello().add_extension(ext, os.urandom(200)).records()
    (kind, _), _, _ = tunnel_then_hello(gw, ok)
    assert kind == "server_hello", kind
    bad = Hello().set_server_names([b"evil.test"]).add_extension(ext, os.urandom(200)).records()
    (kind, alert), _, _ = tunnel_then_hello(gw, bad)
    assert kind in ("alert", "eof", "reset") and (alert is None or alert in REFUSALS), kind


def test_tls10_only_hello_is_refused(gw):
    """Edge case (L6): a hello offering at most TLS 1.0 (legacy_version 3.1, no
    supported_versions): "TLS 1.2 or 1.3" (docs/wire.md#tls-toward-the-sandbox): an alert, no
    ServerHello."""
    hello = Hello()
    hello.head = b"\x03\x01" + hello.head[2:]
    hello.extensions = [(t, d) for t, d in hello.extensions if t != EXT_SUPPORTED_VERSIONS]
    (kind, alert), _, _ = tunnel_then_hello(gw, hello.records())
    assert kind in ("alert", "eof", "reset"), (kind, alert)
    if kind == "alert":
        assert alert in ("protocol_version", "handshake_failure"), alert


# --- R6: certificates only after the decision, one per name ------------------------------------

def test_no_handshake_record_for_a_refused_sni(gw):
    """Edge case (R6): for an SNI sluice refuses, the answer holds no handshake record at all
    (only an alert), so no certificate for that name ever leaves sluice."""
    sock, answer, _ = connect_tunnel(gw.sluice.address, gw.authority("allowed.test"))
    assert answer.status == 200
    send_records(sock, Hello("evil.test").records())
    data, how = rest_until_closed(sock)
    sock.close()
    pos, types = 0, []
    while pos + 5 <= len(data):
        types.append(data[pos])
        pos += 5 + int.from_bytes(data[pos + 3:pos + 5], "big")
    assert 22 not in types, "handshake records for a refused SNI: %r" % types
    assert how in ("eof", "reset")


def test_one_leaf_per_name_reused_across_connections(gw):
    """Edge case (R6): 50 distinct names under *.wild.test, two tunnels each (no request): each
    name gets a leaf for exactly that name, the second connection gets the very same
    certificate (minted once, from the per-sandbox cache), and no two names share one."""
    r = marker()
    names = ["mint-%s-%02d.wild.test" % (r, i) for i in range(50)]
    leaves = {}
    for round_ in range(2):
        for name in names:
            sock, tls, _ = clients.open_tls_tunnel(gw.sluice.address, gw.authority(name),
                                                   gw.sluice.ca_pem)
            der = tls.obj.getpeercert(binary_form=True)
            assert tls.peer_dns_names() == [name]
            sock.close()
            if round_ == 0:
                leaves[name] = der
            else:
                assert der == leaves[name], "a second leaf was minted for %s" % name
    assert len(set(leaves.values())) == len(names)


# --- L8: the sandbox CA -------------------------------------------------------------------------

def test_sandbox_ca_is_a_pathlen0_ca_with_a_private_key(gw):
    """Edge case (L8): the CA sluice created for sbx1 is CA:TRUE with pathlen:0, its key is
    mode 0600, and a minted leaf is not a CA."""
    ca_dir = os.path.dirname(gw.sluice.ca_pem)
    mode = stat.S_IMODE(os.stat(os.path.join(ca_dir, "ca.key")).st_mode)
    assert mode == 0o600, oct(mode)
    text = subprocess.run(["openssl", "x509", "-in", gw.sluice.ca_pem, "-noout", "-text"],
                          capture_output=True, text=True, check=True).stdout
    assert "CA:TRUE" in text and "pathlen:0" in text, text
    sock, tls, _ = clients.open_tls_tunnel(gw.sluice.address, gw.authority("allowed.test"),
                                           gw.sluice.ca_pem)
    der = tls.obj.getpeercert(binary_form=True)
    sock.close()
    leaf = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-text"], input=der,
                          capture_output=True, check=True).stdout.decode()
    assert "CA:TRUE" not in leaf, leaf
