"""docs/cli.md#logs: at the default level (no SLUICE_LOG) sluice says on stderr, once a minute per
sandbox, host and reason, that a request was refused: sandbox, method, url, reason and why. The
audit log keeps every request; the log line is what an operator tailing stderr at 2 a.m. sees.
What came from the sandbox cannot shape the line."""
import re
import time

import pytest

import expect
from gateway import Gateway, Runner
from http1 import request_bytes
from oracles import get, marker
from netutil import wait_until


@pytest.fixture
def quiet_gw(sluice_binary, bed):
    """A sluice at the default log level (the shared one may run at debug)."""
    runner = Runner(sluice_binary, bed)
    try:
        yield Gateway(runner.start(), bed)
    finally:
        runner.stop_all()


def denial_lines(gw, fragment):
    return [l for l in gw.sluice.stderr().splitlines() if " denied " in l and fragment in l]


def test_a_refused_request_is_one_info_line(quiet_gw):
    gw = quiet_gw
    host = "deny-%s.attacker.test" % marker()
    ex = gw.forward([get("http://%s/steal?k=1" % host, host=host)])
    expect.denial(ex, 403, "not_allowed_host")
    lines = wait_until(lambda: denial_lines(gw, host), 10, "the denial line")
    assert len(lines) == 1, lines
    assert re.search(r" info +sandbox 'sbx1': denied GET http://%s/steal\?k=1: not_allowed_host "
                     r"\(%s is not in the policy of sandbox sbx1; a rule would need "
                     r"hosts: \[%s\]\)$"
                     % (re.escape(host), re.escape(host), re.escape(host)),
                     lines[0]), lines[0]
    assert "[C" not in lines[0], "the per-connection trace is debug only: %r" % lines[0]


def test_repeats_within_a_minute_are_counted_not_logged(quiet_gw):
    """The same sandbox, host and reason again and again: one line (the next, a minute later,
    would say how many were left out: tests/unit/proxy/limits/log_budget_test.cc); another host or
    another reason gets its own line at once. Every request is still in the audit log."""
    gw = quiet_gw
    host = "again-%s.attacker.test" % marker()
    mark = gw.audit.mark()
    for i in range(6):
        ex = gw.forward([get("http://%s/%d" % (host, i), host=host)])
        expect.denial(ex, 403, "not_allowed_host")
    gw.audit.wait(mark, lambda r: host in (r["url"] or ""), count=6)
    other = "other-%s.attacker.test" % marker()
    gw.forward([get("http://%s/" % other, host=other)])
    wait_until(lambda: denial_lines(gw, other), 10, "the other host's line")
    # Another reason for an allowed host: a method its rule does not allow.
    path = "/m-%s" % marker()
    ex = gw.tunnel("api.allowed.test", [request_bytes("DELETE", path, "api.allowed.test")])
    assert ex.final is not None and ex.final.status == 403, ex.final
    method_line = wait_until(lambda: denial_lines(gw, path), 10, "the method line")
    assert ex.final.sluice_reason in method_line[0], method_line
    time.sleep(0.5)
    assert len(denial_lines(gw, host)) == 1, denial_lines(gw, host)


def test_the_sandbox_cannot_shape_the_line(quiet_gw):
    """A url of encoded escapes and line breaks, 5,000 bytes long: the line is one line of
    printable ASCII, the url cut to a few hundred bytes. (The HTTP parser refuses raw control and
    non-ASCII bytes in a target before any decision: such a head is logged without its url.)"""
    gw = quiet_gw
    host = "shape-%s.attacker.test" % marker()
    path = "/%1b%5b31mred%0d%0afake-line/" + "x" * 5000
    ex = gw.forward([get("http://%s%s" % (host, path), host=host)])
    expect.denial(ex, 403, "not_allowed_host")
    lines = wait_until(lambda: denial_lines(gw, host), 10, "the denial line")
    assert len(lines) == 1, lines
    line = lines[0]
    assert all(0x20 <= ord(c) < 0x7f for c in line), repr(line)
    assert len(line) < 1000 and "x" * 200 + "...: not_allowed_host" in line, len(line)
    ex = gw.forward([get("http://%s/\xe9" % host, host=host)])
    expect.denial(ex, 400, "bad_request")
    bad = wait_until(lambda: [l for l in gw.sluice.stderr().splitlines()
                              if " denied GET -: bad_request" in l], 10, "the bad head's line")
    assert all(0x20 <= ord(c) < 0x7f for c in bad[0]), repr(bad[0])
