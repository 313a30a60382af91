"""Credential brokering against an origin that reflects the injected header in another form
(docs/wire.md#what-masking-catches-and-what-it-does-not). The origin (reflector.py) encodes
what it received as base64, base64url, percent-encoding or hex, with or without padding, at
every alignment, in the response head and body, in one piece or trickled a few bytes per
chunk; the sandbox must not be able to decode any four consecutive bytes of a secret out of
what it gets. A compressed answer cannot be looked into: on an injecting rule sluice asks for
`Accept-Encoding: identity`, and an origin that compresses anyway gets its answer refused
(502, on record) instead of forwarded. Rules that inject nothing are untouched.
"""
import base64
import binascii
import gzip
import re
import urllib.parse

import pytest

import clients
import expect
from gateway import Gateway, Runner
from oracles import marker
from h2client import H2Tunnel
from reflector import ENCODERS, Reflector

API_KEY = "sk-real-7f3a9c0e5b1d4a2e8c6f"
# Reserved characters (percent-encoders differ on them), a space (form encoding), and bytes
# whose base64 holds "+" and "/" (base64 and base64url differ).
TOKEN = "tok/3+Zx~9!q(w)*e=r'T y_u.i-o???>>>;&%"
SECRETS = {"x-api-key": API_KEY, "x-api-token": TOKEN}
PLACEHOLDER = "sk-sluice-placeholder-01"


def with_secrets(config, workdir):
    config["secrets"] = {
        "apikey": {"env": "SLUICE_TEST_API_KEY", "placeholder": PLACEHOLDER},
        "token": {"env": "SLUICE_TEST_TOKEN", "placeholder": "sk-sluice-placeholder-02"},
    }


@pytest.fixture(scope="module")
def reflector(bed):
    origin = Reflector(bed.pki).start()
    try:
        yield origin
    finally:
        origin.stop()


@pytest.fixture(scope="module")
def fgw(sluice_binary, bed, reflector):
    rules = [
        {"name": "reflect", "hosts": ["allowed.test"], "ports": [reflector.port],
         "ips": ["127.0.0.20/32"],
         "inject": [{"header": "x-api-key", "secret": "apikey"},
                    {"header": "x-api-token", "secret": "token"}]},
        {"name": "reflect-plain", "hosts": ["other.test"], "ports": [reflector.port],
         "ips": ["127.0.0.20/32"]},
    ]
    runner = Runner(sluice_binary, bed)
    try:
        yield Gateway(runner.start(env={"SLUICE_TEST_API_KEY": API_KEY,
                                        "SLUICE_TEST_TOKEN": TOKEN},
                                   edit=with_secrets, rules=rules), bed)
    finally:
        runner.stop_all()


def request(path, host="allowed.test", extra=(), method="GET"):
    """On allowed.test the sandbox sends the placeholder, which sluice replaces; other.test's
    rule injects nothing, so the placeholder there would be misuse: a plain value instead."""
    key = PLACEHOLDER if host == "allowed.test" else "not-a-secret"
    headers = [("Host", host), ("x-api-key", key)] + list(extra)
    lines = ["%s %s HTTP/1.1" % (method, path)] + ["%s: %s" % kv for kv in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def fetch(fgw, reflector, path, name="allowed.test", extra=(), method="GET"):
    return fgw.tunnel(name, [request(path, name, extra, method)], port=reflector.port)


# --- what a sandbox could decode out of an answer ----------------------------------------------

def _b64_decodings(text, alphabet):
    chars = re.sub(rb"[^A-Za-z0-9" + alphabet + rb"*]", b"", text).replace(b"*", b"A")
    if alphabet == rb"\-_":
        chars = chars.translate(bytes.maketrans(b"-_", b"+/"))
    for offset in range(4):
        piece = chars[offset:]
        piece = piece[:len(piece) // 4 * 4]
        yield base64.b64decode(piece)


def _hex_decodings(text):
    digits = re.sub(rb"[^0-9A-Fa-f*]", b"", text).replace(b"*", b"0")
    for offset in range(2):
        piece = digits[offset:]
        yield binascii.unhexlify(piece[:len(piece) // 2 * 2])


def decodings(text):
    """Every reading of `text` a sandbox might try: as it is, percent-decoded (both ways),
    base64 and base64url at each of the four offsets, hex at both."""
    yield text
    yield urllib.parse.unquote_to_bytes(text)
    yield urllib.parse.unquote_to_bytes(text.replace(b"+", b" "))
    yield from _b64_decodings(text, rb"+/")
    yield from _b64_decodings(text, rb"\-_")
    yield from _hex_decodings(text)


def assert_nothing_recoverable(resp, secret, window=4):
    """No `window` consecutive bytes of `secret` in any decoding of the head or the body."""
    s = secret.encode()
    pieces = {s[i:i + window] for i in range(len(s) - window + 1)}
    for where, text in (("head", resp.raw_head), ("body", resp.body)):
        for decoded in decodings(text):
            found = [p for p in pieces if p in decoded]
            assert not found, "%s of the answer decodes to %r, a piece of the secret: %r" % (
                where, found[:3], text[:300])


def assert_only_masked(got, original, secret_part_len):
    """The answer is the origin's, byte for byte, except for a run of '*' (at most the encoded
    secret and the two base64 characters it shares with its neighbours)."""
    assert len(got) == len(original), (got, original)
    changed = [i for i, (a, b) in enumerate(zip(got, original)) if a != b]
    assert all(got[i] == ord("*") for i in changed), (got, original)
    assert len(changed) <= secret_part_len + 2, (got, original)


# --- encoded echoes ----------------------------------------------------------------------------

FORMS = [(enc, pre, post) for enc in ("b64", "b64nopad", "b64url", "b64urlnopad")
         for pre in (0, 1, 2) for post in (0, 1, 2)]
FORMS += [(enc, 3, 4) for enc in ENCODERS if not enc.startswith("b64")]


@pytest.mark.parametrize("header", sorted(SECRETS))
@pytest.mark.parametrize("enc,pre,post", FORMS)
def test_an_encoded_echo_of_an_injected_secret_is_masked(fgw, reflector, header, enc, pre, post):
    """Each form, each base64 alignment (pre % 3) and end (post % 3: padding or not)."""
    secret = SECRETS[header]
    m = marker()
    ex = fetch(fgw, reflector, "/echo?h=%s&enc=%s&pre=%d&post=%d&m=%s" % (header, enc, pre,
                                                                           post, m))
    resp = ex.final
    assert resp.status == 200, resp
    assert_nothing_recoverable(resp, secret)
    reflected = b"p" * pre + secret.encode() + b"s" * post
    encoded = ENCODERS[enc](reflected)
    secret_part = len(ENCODERS[enc](secret.encode()))
    assert_only_masked(resp.body, b"enc=" + encoded + b"\n", secret_part)
    assert_only_masked(resp.header("X-Echo").encode(), encoded, secret_part)
    seen = reflector.requests(m)
    assert [dict(r["headers"])[header] for r in seen] == [secret]


@pytest.mark.parametrize("enc,pre", [("plain", 0), ("b64", 1), ("b64url", 2), ("url-every", 0),
                                     ("url", 3), ("hex", 1)])
def test_an_echo_trickled_a_few_bytes_per_chunk_is_masked(fgw, reflector, enc, pre):
    """Chunks of 1-3 bytes, each its own TLS record: an encoded secret straddles many reads."""
    for header, secret in SECRETS.items():
        ex = fetch(fgw, reflector, "/echo?h=%s&enc=%s&pre=%d&post=2&trickle=1" % (header, enc,
                                                                                   pre))
        assert ex.final.status == 200, ex.final
        assert_nothing_recoverable(ex.final, secret)
        encoded = ENCODERS[enc](b"p" * pre + secret.encode() + b"ss")
        assert_only_masked(ex.final.body, b"enc=" + encoded + b"\n",
                           len(ENCODERS[enc](secret.encode())))


def test_an_interim_answer_that_echoes_the_secret_is_masked(fgw, reflector):
    """103 Early Hints comes before the answer and is forwarded as it comes: masked too."""
    sock, tls, reader = clients.open_tls_tunnel(fgw.sluice.address,
                                                fgw.authority("allowed.test", reflector.port),
                                                fgw.sluice.ca_pem)
    try:
        tls.sendall(request("/early-hints"))
        hints = reader.read_response()
        final = reader.read_response()
    finally:
        sock.close()
    assert (hints.status, final.status, final.body) == (103, 200, b"done\n")
    assert len(hints.headers_named("Link")) == 2
    assert_nothing_recoverable(hints, API_KEY)


@pytest.mark.parametrize("proto", ["http/1.1", "h2"])
def test_a_secret_echoed_in_a_field_name_is_masked(fgw, reflector, proto):
    """An origin may echo the secret in a field's name as well as its value: masked on either
    leg (HTTP/1.1 masks its whole head; over HTTP/2 each name and value)."""
    if proto == "h2":
        with H2Tunnel(fgw.sluice.address, fgw.authority("allowed.test", reflector.port),
                      fgw.sluice.ca_pem).start() as t:
            s = t.one("GET", "/echo-name?h=x-api-key", headers=[("x-api-key", PLACEHOLDER)])
        assert s.status == 200, s.describe()
        names = [n for n, _ in s.headers]
    else:
        ex = fetch(fgw, reflector, "/echo-name?h=x-api-key")
        assert ex.final.status == 200, ex.final
        names = [n.lower() for n, _ in ex.final.headers]
        assert_nothing_recoverable(ex.final, API_KEY)
    assert not any(API_KEY in n for n in names), names
    assert "x-key-" + "*" * len(API_KEY) in names, names


# --- compression -------------------------------------------------------------------------------

def test_a_compressed_answer_on_an_injecting_rule_is_refused(fgw, reflector):
    """sluice asked for identity; the origin compressed anyway. sluice cannot look inside a
    gzip stream, so the body is not forwarded: 502 before any byte of the answer, on record."""
    m = marker()
    mark = fgw.audit.mark()
    ex = fetch(fgw, reflector, "/echo?enc=gzip&m=" + m,
               extra=[("Accept-Encoding", "gzip")])
    expect.denial(ex.final, 502, "upstream_connect")
    assert b"compressed" in ex.final.body, ex.final.body
    expect.closed(ex)
    rec = fgw.audit.one(mark, lambda r: m in (r["url"] or ""))
    expect.record(rec, decision="deny", reason="upstream_connect", status=502, rule="reflect",
                  upstream="127.0.0.20:%d" % reflector.port)
    # The origin was asked for identity, and ignored it.
    [seen] = reflector.requests(m)
    assert dict(seen["headers"])["accept-encoding"] == "identity"
    for text in (ex.final.raw_head, ex.final.body, ex.tail):
        assert API_KEY.encode() not in text and b"\x1f\x8b" not in text


def test_a_transfer_coding_other_than_chunked_is_refused(fgw, reflector):
    """`Transfer-Encoding: gzip, chunked`: the response parser refuses any transfer coding but
    chunked, so it never reaches the masking."""
    m = marker()
    mark = fgw.audit.mark()
    ex = fetch(fgw, reflector, "/echo?enc=te-gzip&m=" + m)
    expect.denial(ex.final, 502, "upstream_connect")
    rec = fgw.audit.one(mark, lambda r: m in (r["url"] or ""))
    expect.record(rec, decision="deny", reason="upstream_connect", status=502)


def test_a_bodiless_answer_with_a_content_coding_is_forwarded(fgw, reflector):
    """A HEAD answer has no body to look into: its Content-Encoding hides nothing."""
    ex = fetch(fgw, reflector, "/echo?enc=gzip", method="HEAD")
    assert ex.final.status == 200, ex.final
    assert ex.final.header("Content-Encoding") == "gzip"


def test_a_sandbox_asking_for_gzip_on_an_injecting_rule_gets_identity(fgw, reflector):
    """The sandbox's Accept-Encoding is replaced, not refused: its client still works, and the
    answer is one sluice can mask."""
    m = marker()
    ex = fetch(fgw, reflector, "/negotiate?m=" + m,
               extra=[("Accept-Encoding", "gzip, deflate, br")])
    resp = ex.final
    assert resp.status == 200, resp
    assert resp.header("Content-Encoding") is None
    assert resp.body == b"key=" + b"*" * len(API_KEY) + b"\n"
    assert resp.header("X-Seen-Accept-Encoding") == "identity"
    [seen] = reflector.requests(m)
    assert [v for k, v in seen["headers"] if k == "accept-encoding"] == ["identity"]


def test_curl_compressed_on_an_injecting_rule_still_works(fgw, reflector):
    r = fgw.curl(fgw.url("allowed.test", "/negotiate", port=reflector.port), "--compressed")
    assert r.http_code == 200, r.stderr
    assert r.body == b"key=" + b"*" * len(API_KEY) + b"\n"


def test_a_rule_that_injects_nothing_keeps_compression(fgw, reflector):
    """other.test's rule injects no secret: its Accept-Encoding and the compressed answer pass
    as they are (nothing to mask, nothing rewritten)."""
    m = marker()
    ex = fetch(fgw, reflector, "/negotiate?m=" + m, name="other.test",
               extra=[("Accept-Encoding", "gzip")])
    assert ex.final.status == 200, ex.final
    assert ex.final.header("Content-Encoding") == "gzip"
    assert gzip.decompress(ex.final.body) == b"key=not-a-secret\n"
    [seen] = reflector.requests(m)
    assert dict(seen["headers"])["accept-encoding"] == "gzip"
