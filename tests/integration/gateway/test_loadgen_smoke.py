"""sluice-loadgen (bench/loadgen) works: every mode for about a second in a tiny configuration,
against nginx directly and through sluice, over HTTP/1.1 and over HTTP/2 (--proto h2, to the
bed's h2.test, the origin that selects ALPN h2). A smoke test of the tool, not a benchmark:
nothing here asserts on timing, only that the run happened and the JSON says so.

The binary is $SLUICE_LOADGEN (CTest sets it to the built target); without it these tests skip.
"""
import json
import os
import subprocess

import pytest

from netutil import clean_env

LOADGEN = os.environ.get("SLUICE_LOADGEN")
SMALL = "/small.bin"  # 64 KiB: small enough for a one-second bulk run to finish downloads

RESULT_FIELDS = ("mode", "label", "url", "proxy", "concurrency", "threads", "seconds",
                 "requests", "errors", "req_per_s", "p50_us", "p99_us", "conn_per_s",
                 "mb_per_s", "bytes", "connections", "cpu_seconds", "proto", "streams")

TINY = {
    "keepalive": ["--concurrency", "2", "--duration", "1", "--warmup", "0.2"],
    "newconn": ["--concurrency", "2", "--duration", "1", "--warmup", "0.2"],
    "bulk": ["--concurrency", "2", "--duration", "1", "--warmup", "0.2"],
    "idle": ["--concurrency", "2", "--connections", "5", "--hold", "1"],
}


@pytest.fixture(scope="module")
def loadgen():
    if not LOADGEN:
        pytest.skip("SLUICE_LOADGEN is not set (CTest sets it to the built sluice-loadgen)")
    if not os.access(LOADGEN, os.X_OK):
        pytest.skip("no sluice-loadgen at %s (build the sluice-loadgen target)" % LOADGEN)
    return LOADGEN


def run(binary, args, timeout=60):
    """Runs the generator; returns (exit code, parsed stdout lines, stderr)."""
    proc = subprocess.run([binary] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, env=clean_env(), timeout=timeout, text=True)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, lines, proc.stderr


def url(bed, path=SMALL, name="allowed.test"):
    return "https://%s:%d%s" % (name, bed.tls_port, path)


H2_NAME, H2_ADDRESS = "h2.test", "127.0.0.25"
H2_WHOAMI = b"h2.test\n"
H2_TINY = {
    "keepalive": ["--concurrency", "2", "--streams", "4", "--duration", "1", "--warmup", "0.2"],
    "newconn": ["--concurrency", "2", "--duration", "1", "--warmup", "0.2"],
    "bulk": ["--concurrency", "1", "--streams", "2", "--duration", "1", "--warmup", "0.2"],
}


@pytest.fixture(params=["direct", "sluice"])
def route(request, bed):
    """How the generator reaches allowed.test: (arguments, proxy text or None, sluice or None).
    The sluice variant skips, with the reason, where `sluice run` cannot start."""
    if request.param == "direct":
        return ["--connect", "127.0.0.20:%d" % bed.tls_port,
                "--cacert", bed.pki.test_ca.cert], None, None
    sluice = request.getfixturevalue("sluice")
    proxy = "%s:%d" % sluice.address
    return ["--proxy", proxy, "--cacert", sluice.ca_pem], proxy, sluice


def check_result(result, mode, proxy, label):
    missing = [f for f in RESULT_FIELDS if f not in result]
    assert not missing, "result lacks %s: %r" % (missing, result)
    assert (result["mode"], result["proxy"], result["label"]) == (mode, proxy, label)
    assert result["requests"] > 0, result
    assert result["errors"] == 0, result
    assert result["seconds"] > 0, result
    assert result["p50_us"] is not None and result["p99_us"] >= result["p50_us"], result


@pytest.mark.parametrize("mode", ["keepalive", "newconn", "bulk"])
def test_mode_runs(loadgen, bed, route, mode):
    args, proxy, sluice = route
    mark = sluice.audit.mark() if sluice else None
    code, lines, err = run(loadgen, ["--url", url(bed), "--mode", mode, "--label", "smoke"] +
                           args + TINY[mode])
    assert code == 0, err
    assert len(lines) == 1, lines
    result = lines[0]
    check_result(result, mode, proxy, "smoke")
    # Bytes count as they arrive in the window, requests as they complete in it: they differ
    # by at most the responses in flight at either edge, one per connection.
    size, in_flight = len(bed.content.small), result["concurrency"]
    assert (result["requests"] - in_flight) * size <= result["bytes"] <= \
        (result["requests"] + in_flight) * size, result
    assert result["req_per_s"] > 0, result
    assert (result["conn_per_s"] is not None) == (mode == "newconn"), result
    assert (result["mb_per_s"] is not None) == (mode == "bulk"), result
    assert result["connections"] is None, result
    assert (result["proto"], result["streams"]) == ("http/1.1", None), result
    if sluice:  # the requests really went through sluice (and were allowed)
        recs = sluice.audit.wait(mark, lambda r: r["url"] == url(bed), count=1)
        assert recs[0]["decision"] == "allow", recs[0]


def test_idle_holds_then_reports(loadgen, bed, route):
    args, proxy, _ = route
    code, lines, err = run(loadgen, ["--url", url(bed), "--mode", "idle"] + args + TINY["idle"])
    assert code == 0, err
    assert len(lines) == 2, lines
    holding, result = lines
    assert holding == {"event": "holding", "connections": 5}
    check_result(result, "idle", proxy, None)
    assert result["requests"] == result["connections"] == 5, result
    assert result["conn_per_s"] > 0 and result["req_per_s"] is None, result


@pytest.fixture(params=["direct", "sluice"])
def h2_route(request, bed):
    """As `route`, to h2.test (nginx `listen ... ssl http2`; through sluice, whose sandbox leg
    agrees to h2 and whose origin leg is h2 too)."""
    if request.param == "direct":
        return ["--connect", "%s:%d" % (H2_ADDRESS, bed.tls_port),
                "--cacert", bed.pki.test_ca.cert], None, None
    sluice = request.getfixturevalue("sluice")
    proxy = "%s:%d" % sluice.address
    return ["--proxy", proxy, "--cacert", sluice.ca_pem], proxy, sluice


@pytest.mark.parametrize("mode", ["keepalive", "newconn", "bulk"])
def test_h2_mode_runs(loadgen, bed, h2_route, mode):
    """--proto h2: an HTTP/2 session per connection, --streams GETs at once on it, each
    counted like an HTTP/1.1 request (bytes are body bytes, /whoami.txt's 8 each)."""
    args, proxy, sluice = h2_route
    target = url(bed, "/whoami.txt", H2_NAME)
    mark = sluice.audit.mark() if sluice else None
    code, lines, err = run(loadgen, ["--url", target, "--mode", mode, "--proto", "h2",
                                     "--label", "h2"] + args + H2_TINY[mode])
    assert code == 0, err
    assert len(lines) == 1, lines
    result = lines[0]
    check_result(result, mode, proxy, "h2")
    streams = 1 if mode == "newconn" else int(H2_TINY[mode][H2_TINY[mode].index("--streams") + 1])
    assert (result["proto"], result["streams"]) == ("h2", streams), result
    in_flight, size = result["concurrency"] * streams, len(H2_WHOAMI)
    assert (result["requests"] - in_flight) * size <= result["bytes"] <= \
        (result["requests"] + in_flight) * size, result
    assert (result["conn_per_s"] is not None) == (mode == "newconn"), result
    if sluice:  # HTTP/2 on both of sluice's legs
        recs = sluice.audit.wait(mark, lambda r: r["url"] == target, count=1)
        assert (recs[0]["decision"], recs[0]["proto"], recs[0]["upstream_proto"]) == \
            ("allow", "h2", "h2"), recs[0]


def test_h2_idle_holds_then_reports(loadgen, bed, h2_route):
    args, proxy, _ = h2_route
    code, lines, err = run(loadgen, ["--url", url(bed, "/whoami.txt", H2_NAME), "--mode", "idle",
                                     "--proto", "h2"] + args + TINY["idle"])
    assert code == 0, err
    assert len(lines) == 2, lines
    holding, result = lines
    assert holding == {"event": "holding", "connections": 5}
    check_result(result, "idle", proxy, None)
    assert result["requests"] == result["connections"] == 5, result
    assert result["bytes"] == 5 * len(H2_WHOAMI), result


def test_h2_needs_the_server_to_agree(loadgen, bed):
    """allowed.test's nginx speaks HTTP/1.1 only: offered h2 alone, it refuses the handshake
    (alert no_application_protocol), and every connection fails with that said, none measured
    as HTTP/1.1."""
    code, lines, err = run(loadgen, ["--url", url(bed), "--mode", "newconn", "--proto", "h2",
                                     "--connect", "127.0.0.20:%d" % bed.tls_port,
                                     "--cacert", bed.pki.test_ca.cert, "--concurrency", "1",
                                     "--requests", "3", "--warmup", "0"])
    assert code == 1, err
    assert (lines[-1]["requests"], lines[-1]["errors"]) == (0, 3), lines
    assert "tls=3" in err and "ALPN: the server refused h2" in err, err


def test_requests_stop_the_run(loadgen, bed):
    code, lines, err = run(loadgen, ["--url", url(bed, "/whoami.txt"), "--mode", "keepalive",
                                     "--connect", "127.0.0.20:%d" % bed.tls_port,
                                     "--cacert", bed.pki.test_ca.cert, "--concurrency", "2",
                                     "--requests", "50", "--warmup", "0", "--threads", "2"])
    assert code == 0, err
    result = lines[-1]
    assert (result["requests"], result["errors"], result["threads"]) == (50, 0, 2), result
    assert result["bytes"] == 50 * len(b"allowed.test\n"), result


def test_failures_are_counted_and_exit_1(loadgen, bed):
    """Nothing listens on 127.0.0.22: every connect fails, none is fatal, nothing succeeded."""
    code, lines, err = run(loadgen, ["--url", url(bed), "--mode", "keepalive",
                                     "--connect", "127.0.0.22:%d" % bed.tls_port,
                                     "--cacert", bed.pki.test_ca.cert, "--concurrency", "2",
                                     "--duration", "0.5", "--warmup", "0"])
    assert code == 1, err
    result = lines[-1]
    assert result["requests"] == 0 and result["errors"] > 0, result
    assert "connect=" in err


def test_certificate_for_another_name_is_a_tls_error(loadgen, bed):
    """The name is verified, not just the chain: nginx's default certificate for the CDN
    address is trusted but names 127.0.0.20, not notthere.test."""
    code, lines, err = run(loadgen, ["--url", url(bed, name="notthere.test"), "--mode",
                                     "newconn", "--connect", "127.0.0.20:%d" % bed.tls_port,
                                     "--cacert", bed.pki.test_ca.cert, "--concurrency", "1",
                                     "--requests", "3", "--warmup", "0"])
    assert code == 1, err
    assert lines[-1]["errors"] == 3, lines
    assert "tls=3" in err and "hostname mismatch" in err, err


@pytest.mark.parametrize("args", [
    [],
    ["--mode", "keepalive", "--cacert", "x"],  # no --url
    ["--url", "http://a.test/", "--mode", "keepalive", "--cacert", "x", "--connect",
     "127.0.0.1:1"],  # not https
    ["--url", "https://a.test/", "--mode", "fast", "--cacert", "x", "--connect", "127.0.0.1:1"],
    ["--url", "https://a.test/", "--mode", "idle", "--cacert", "x"],  # neither connect nor proxy
    ["--url", "https://a.test/", "--mode", "idle", "--cacert", "x", "--connect", "127.0.0.1:1",
     "--concurrency", "0"],
    ["--url", "https://a.test/", "--mode", "idle", "--cacert", "/nonexistent/ca.pem",
     "--connect", "127.0.0.1:1"],
    ["--url", "https://a.test/", "--mode", "keepalive", "--cacert", "x", "--connect",
     "127.0.0.1:1", "--proto", "h3"],
    ["--url", "https://a.test/", "--mode", "keepalive", "--cacert", "x", "--connect",
     "127.0.0.1:1", "--streams", "4"],  # streams without h2
    ["--url", "https://a.test/", "--mode", "newconn", "--cacert", "x", "--connect",
     "127.0.0.1:1", "--proto", "h2", "--streams", "4"],  # one request per connection
], ids=["nothing", "no_url", "http_url", "bad_mode", "no_dial", "zero_concurrency",
        "missing_cacert", "bad_proto", "streams_without_h2", "streams_with_newconn"])
def test_bad_arguments_exit_2(loadgen, args):
    code, lines, err = run(loadgen, args)
    assert (code, lines) == (2, []), err
    assert err.startswith("sluice-loadgen: "), err
