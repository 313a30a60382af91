"""Credential brokering (docs/wire.md#credential-brokering) with a real upstream that logs the
header it receives:

  - the rule for allowed.test injects `x-api-key`: nginx sees the real secret where the
    sandbox sent the placeholder, and the sandbox never gets the secret back;
  - the placeholder sent to another allowed host (in a header, in the query string) is
    `secret_misuse`: 403, on record, and that upstream logs nothing;
  - the real secret appears nowhere: not in the audit log, not in sluice's stdout or stderr;
  - a secret sluice cannot read is a config error naming it (exit 2), never an empty header.

With secrets configured, the first 64 KiB of every request body is read before anything is
dialled: a placeholder there (whatever the framing split it into) is `secret_misuse`, and a
body without one still reaches the upstream byte for byte, whatever its size and framing.
"""
import hashlib
import os

import pytest

import expect
from gateway import Gateway, Runner
from oracles import cdn_hits, get, marker
from sluice_proc import bed_rules

SECRET = "sk-real-7f3a9c0e5b1d4a2e8c6f"
PLACEHOLDER = "sk-sluice-placeholder-01"


def with_secret(config, workdir):
    config["secrets"] = {"apikey": {"env": "SLUICE_TEST_API_KEY", "placeholder": PLACEHOLDER}}


def secret_rules(bed):
    rules = bed_rules(bed.tls_port, bed.plain_port)
    for rule in rules:
        if rule["name"] == "cdn":
            rule["inject"] = [{"header": "x-api-key", "secret": "apikey"}]
    return rules


@pytest.fixture(scope="module")
def sgw(sluice_binary, bed):
    runner = Runner(sluice_binary, bed)
    try:
        yield Gateway(runner.start(env={"SLUICE_TEST_API_KEY": SECRET}, edit=with_secret,
                                   rules=secret_rules(bed)), bed)
    finally:
        runner.stop_all()


def test_the_rule_injects_the_secret_in_place_of_the_placeholder(sgw, bed):
    m = marker()
    mark = sgw.audit.mark()
    ex = sgw.tunnel("allowed.test", [get("/whoami.txt?m=" + m,
                                         headers=[("x-api-key", PLACEHOLDER)])])
    assert ex.final.status == 200
    assert SECRET.encode() not in ex.final.body and SECRET.encode() not in ex.final.raw_head
    hits = cdn_hits(bed, m)
    assert [h["x_api_key"] for h in hits] == [SECRET], hits
    rec = sgw.audit.one(mark, lambda r: m in r["url"])
    expect.record(rec, decision="allow", rule="cdn", status=200)


def test_an_upstream_that_echoes_the_secret_does_not_hand_it_to_the_sandbox(sgw, bed):
    """/echo-key returns the x-api-key it received in a header and in the body: the sandbox
    gets it masked, same length, so the framing holds."""
    ex = sgw.tunnel("allowed.test", [get("/echo-key", headers=[("x-api-key", PLACEHOLDER)])])
    assert ex.final.status == 200
    assert SECRET.encode() not in ex.final.raw_head + ex.final.body
    assert ex.final.body == b"key=" + b"*" * len(SECRET) + b"\n"
    assert ex.final.header("X-Echo-Key") == "*" * len(SECRET)


def test_the_secret_replaces_whatever_the_sandbox_sent(sgw, bed):
    m = marker()
    ex = sgw.tunnel("allowed.test", [get("/whoami.txt?m=" + m,
                                         headers=[("X-Api-Key", "attacker-chosen"),
                                                  ("x-api-key", "second")])])
    assert ex.final.status == 200
    assert [h["x_api_key"] for h in cdn_hits(bed, m)] == [SECRET]


@pytest.mark.parametrize("where", ["header", "query"])
def test_the_placeholder_to_a_host_that_does_not_inject_is_misuse(sgw, bed, where):
    m = marker()
    mark = sgw.audit.mark()
    if where == "header":
        req = get("/whoami.txt?m=" + m, host="second.test",
                  headers=[("authorization", "Bearer " + PLACEHOLDER)])
    else:
        req = get("/whoami.txt?m=%s&key=%s" % (m, PLACEHOLDER), host="second.test")
    ex = sgw.tunnel("second.test", [req])
    expect.denial(ex.final, 403, "secret_misuse")
    rec = sgw.audit.one(mark, lambda r: r["reason"] == "secret_misuse")
    expect.record(rec, decision="deny", reason="secret_misuse", status=403)
    assert cdn_hits(bed, m, role="second") == []


def test_the_secret_appears_nowhere_but_upstream(sgw, bed):
    sgw.tunnel("allowed.test", [get("/whoami.txt", headers=[("x-api-key", PLACEHOLDER)])])
    sgw.tunnel("second.test", [get("/whoami.txt", host="second.test",
                                   headers=[("x-api-key", PLACEHOLDER)])])
    sluice = sgw.sluice
    texts = {"audit": "\n".join(sgw.audit.lines()), "stderr": sluice.stderr()}
    stdout = os.path.join(sluice.workdir, "sluice.stdout")
    if os.path.exists(stdout):
        with open(stdout, errors="replace") as f:
            texts["stdout"] = f.read()
    for name, text in texts.items():
        assert SECRET not in text, name


def test_a_secret_that_cannot_be_read_is_a_config_error_naming_it(sluice_binary, bed, tmp_path):
    runner = Runner(sluice_binary, bed)
    try:
        with pytest.raises(RuntimeError):
            runner.start(edit=with_secret, rules=secret_rules(bed))  # no SLUICE_TEST_API_KEY
        sluice = runner.started[-1]
        assert sluice.proc.returncode == 2, sluice.stderr()
        assert "secret 'apikey'" in sluice.stderr()
        assert "SLUICE_TEST_API_KEY is not set" in sluice.stderr()
    finally:
        runner.stop_all()


# --- the body ----------------------------------------------------------------------------------

def upload(gw, host, body, m, chunks=None, extra=()):
    head = "POST /upload/%s HTTP/1.1\r\nHost: %s\r\nX-Test: %s\r\nConnection: close\r\n" % (
        m, host, m)
    head += "".join("%s: %s\r\n" % kv for kv in extra)
    if chunks is None:
        wire = (head + "Content-Length: %d\r\n\r\n" % len(body)).encode() + body
    else:
        pieces, at = [], 0
        for n in chunks + [len(body)]:
            pieces.append(body[at:at + n])
            at += n
        pieces = [p for p in pieces if p]
        wire = (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + b"".join(
            b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    return gw.tunnel(host, [wire])


def stored_body(bed, m, role):
    entry = bed.nginx.wait_access(role, lambda e: e["x_test"] == m)[0]
    with open(entry["body_file"], "rb") as f:
        return f.read()


@pytest.mark.parametrize("size,chunks", [(10, None), (1 << 20, None), (200, [1, 5, 7]),
                                         (300000, [70000, 3, 65536])])
def test_bodies_without_placeholders_arrive_exactly(sgw, bed, size, chunks):
    body = os.urandom(size)
    m = marker()
    ex = upload(sgw, "second.test", body, m, chunks)
    assert ex.final.status == 200, ex.final
    assert hashlib.sha256(stored_body(bed, m, "second")).digest() == \
        hashlib.sha256(body).digest()


@pytest.mark.parametrize("chunks", [None, [1000, 5], [1010]])
def test_a_placeholder_in_the_body_is_misuse(sgw, bed, chunks):
    """In one piece, or split across chunks (1000 bytes of padding, then the placeholder
    straddling a chunk boundary)."""
    body = b"x" * 1000 + b'{"key": "' + PLACEHOLDER.encode() + b'"}' + b"y" * 5000
    m = marker()
    mark = sgw.audit.mark()
    ex = upload(sgw, "second.test", body, m, chunks)
    expect.denial(ex.final, 403, "secret_misuse")
    rec = sgw.audit.one(mark, lambda r: r["reason"] == "secret_misuse")
    expect.record(rec, decision="deny", status=403)
    bed.nginx.barrier()
    assert [e for e in bed.nginx.access("second") if e["x_test"] == m] == []


def test_a_placeholder_past_the_first_64_kib_is_not_looked_for(sgw, bed):
    body = os.urandom(70 * 1024) + PLACEHOLDER.encode()
    m = marker()
    ex = upload(sgw, "second.test", body, m)
    assert ex.final.status == 200
    assert stored_body(bed, m, "second") == body


def test_the_placeholder_in_a_body_to_the_injecting_rule_is_forwarded(sgw, bed):
    body = b"token=" + PLACEHOLDER.encode()
    m = marker()
    ex = upload(sgw, "allowed.test", body, m)
    assert ex.final.status == 200
    assert stored_body(bed, m, "cdn") == body  # only the header is replaced, never the body


def test_expect_100_continue_is_answered_while_the_body_is_held(sgw, bed, tmp_path):
    path = tmp_path / "body.bin"
    body = os.urandom(3000)
    path.write_bytes(body)
    m = marker()
    r = sgw.curl(sgw.url("second.test", "/upload/" + m), "-H", "Expect: 100-continue",
                 "-H", "X-Test: " + m, "--expect100-timeout", "30", "--data-binary",
                 "@%s" % path)
    assert r.http_code == 200, r.stderr
    assert [b.status for b in r.blocks[1:]][:1] == [100], [b.status for b in r.blocks]
    assert stored_body(bed, m, "second") == body
