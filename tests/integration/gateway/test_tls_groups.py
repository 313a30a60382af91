"""The key exchanges sluice agrees to, on both TLS legs: X25519, P-256 and P-384 only
(docs/wire.md#tls-toward-the-sandbox, "Key exchange"). A finite-field group is a choice of the client's that costs the server a large
modular exponentiation per handshake (ffdhe8192: over a hundred milliseconds of CPU), so a
sandbox that offers only those gets a handshake failure; and sluice's own ClientHello to an
origin offers the three curves and no DHE cipher suite.
"""
import shutil
import socket
import ssl
import subprocess
import threading

import pytest

from hello import GROUP_NAMES, read_client_hello
from netutil import clean_env, free_port
from oracles import get

PROBE = "127.0.0.24"  # probe.test in the bed's zone


def s_client(gw, groups, version):
    """`openssl s_client` through a CONNECT tunnel to allowed.test, offering only `groups`
    over TLS `version` ("tls1_2" or "tls1_3"): (exit status, what it printed)."""
    if not shutil.which("openssl"):
        pytest.skip("no openssl command")
    args = ["openssl", "s_client", "-proxy", "%s:%d" % gw.sluice.address,
            "-connect", gw.authority("allowed.test"), "-servername", "allowed.test",
            "-CAfile", gw.sluice.ca_pem, "-verify_return_error", "-groups", groups,
            "-" + version, "-brief"]
    proc = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=30, env=clean_env())
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("version", ["tls1_3", "tls1_2"])
@pytest.mark.parametrize("groups", ["ffdhe8192", "ffdhe2048:ffdhe3072:ffdhe4096", "P-521"])
def test_a_sandbox_offering_no_group_of_the_three_gets_a_handshake_failure(gw, groups,
                                                                           version):
    code, out = s_client(gw, groups, version)
    assert code != 0, out
    assert "CONNECTION ESTABLISHED" not in out, out
    assert "handshake failure" in out, out


# Over TLS 1.2 a client's groups also name the curves it accepts in the certificate, and
# sluice's leaves are ECDSA P-256: a TLS 1.2 client that lists no P-256 cannot use them,
# whatever the key exchange (so the TLS 1.2 cases list P-256 too).
@pytest.mark.parametrize("groups,version,key", [
    ("X25519", "tls1_3", "X25519"), ("P-256", "tls1_3", "prime256v1"),
    ("P-384", "tls1_3", "secp384r1"),
    # offered beside a finite-field group, listed first: sluice asks for the curve instead
    ("ffdhe8192:P-384", "tls1_3", "secp384r1"),
    ("X25519:P-256", "tls1_2", "X25519"), ("P-256", "tls1_2", "prime256v1"),
    ("ffdhe8192:P-256", "tls1_2", "prime256v1"),
])
def test_a_sandbox_offering_one_of_the_three_completes_with_it(gw, groups, version, key):
    code, out = s_client(gw, groups, version)
    assert code == 0, out
    assert "CONNECTION ESTABLISHED" in out, out
    temp_key = [line for line in out.splitlines() if line.startswith("Server Temp Key:")]
    assert temp_key and key in temp_key[0], out


def dhe_suites():
    """The code points of every TLS 1.2 suite this OpenSSL has whose key exchange is
    finite-field Diffie-Hellman."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    return {c["id"] & 0xFFFF for c in ctx.get_ciphers()
            if c.get("kea") in ("kx-dhe", "kx-dhe-psk")}


def test_the_upstream_client_hello_offers_the_three_curves_only(make_gw):
    """A raw listener stands in for the origin of probe.test and reads the ClientHello sluice
    sends it (then hangs up: the sandbox gets 502 upstream_connect)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    port = free_port((PROBE,))
    listener.bind((PROBE, port))
    listener.listen(4)
    hellos = []

    def origin():
        conn, _ = listener.accept()
        with conn:
            hellos.append(read_client_hello(conn))

    reader = threading.Thread(target=origin, daemon=True)
    reader.start()
    try:
        gw = make_gw(rules=[{"name": "probe", "hosts": ["probe.test"], "ports": [port],
                             "ips": [PROBE + "/32"]}])
        ex = gw.tunnel("probe.test", [get("/", host="probe.test:%d" % port)], port=port)
        reader.join(timeout=20)
    finally:
        listener.close()
    assert ex.final is not None and ex.final.status == 502, ex
    assert hellos, "sluice never sent a ClientHello"
    hello = hellos[0]
    offered = [GROUP_NAMES.get(g, hex(g)) for g in hello.supported_groups()]
    assert offered == ["x25519", "secp256r1", "secp384r1"], offered
    shares = [GROUP_NAMES.get(g, hex(g)) for g in hello.key_share_groups()]
    assert shares and set(shares) <= set(offered), shares
    dhe = dhe_suites()
    assert dhe, "this OpenSSL names no DHE suite: the check below would prove nothing"
    assert not dhe & set(hello.cipher_suite_ids()), sorted(dhe & set(hello.cipher_suite_ids()))
