"""docs/audit.md: after a clean shutdown, the audit log holds exactly one valid, chained JSON
record per request and per connection denied before any request."""
import os
import subprocess

import pytest

import audit
import expect
from http1 import request_bytes
from netutil import clean_env


def test_audit_log_is_complete_valid_and_chained(make_gw):
    g = make_gw()
    allowed = g.tunnel("allowed.test", [request_bytes("GET", "/whoami.txt", "allowed.test"),
                                        request_bytes("GET", "/small.bin", "allowed.test",
                                                      keep_alive=False)])
    denied_connect = g.tunnel("other.test")
    not_tls = g.tunnel("allowed.test", raw=b"SSH-2.0-x\r\n")
    no_sni = g.tunnel("allowed.test", [request_bytes("GET", "/", "allowed.test")], sni=None)
    forwarded = g.forward([request_bytes("GET", g.url("allowed.test", "/whoami.txt", "http"),
                                         "allowed.test:%d" % g.p, keep_alive=False)])
    clients_seen = [(allowed, 2), (denied_connect, 1), (not_tls, 1), (no_sni, 1), (forwarded, 1)]
    assert g.sluice.stop() == 0, g.sluice.stderr()[-3000:]

    lines = g.audit.lines()
    records = g.audit.records()  # every line is JSON
    for rec in records:
        audit.check_shape(rec)
    for ex, count in clients_seen:
        assert len([r for r in records if r["client"] == ex.client]) == count, ex.client
    assert len(records) == sum(c for _, c in clients_seen)
    assert audit.verify_chain(lines) == 0
    by_client = {r["client"]: r for r in records}
    expect.record(by_client[denied_connect.client], reason="not_allowed_host")
    expect.record(by_client[not_tls.client], reason="not_tls")
    expect.record(by_client[no_sni.client], reason="sni_missing")
    expect.record(by_client[forwarded.client], mode="forward", decision="allow")
    assert len({r["conn"] for r in records}) == len(clients_seen)


def test_audit_verify_command_agrees(make_gw, scratch):
    """`sluice audit verify` accepts the log and finds an edited line (when it exists)."""
    g = make_gw()
    for _ in range(3):
        g.tunnel("allowed.test", [request_bytes("GET", "/whoami.txt", "allowed.test",
                                                keep_alive=False)])
    assert g.sluice.stop() == 0
    lines = g.audit.lines()
    assert len(lines) == 3 and audit.verify_chain(lines) == 0
    edited = [lines[0], lines[1].replace('"GET"', '"PUT"'), lines[2]]
    assert audit.verify_chain(edited) == 2
    tampered = os.path.join(scratch, "tampered.jsonl")
    with open(tampered, "w") as f:
        f.write("\n".join(edited) + "\n")

    def verify(path):
        return subprocess.run([g.sluice.binary, "audit", "verify", path], capture_output=True,
                              text=True, timeout=60, env=clean_env())
    ok = verify(g.audit.path)
    if "unknown command" in ok.stderr:
        pytest.skip("`sluice audit verify` is not implemented yet")
    assert ok.returncode == 0, ok.stderr
    bad = verify(tampered)
    assert bad.returncode == 1 and "2" in (bad.stdout + bad.stderr), bad
