"""gRPC end to end through sluice (docs/wire.md#http2, docs/wire.md#http2-toward-origins): the
client is python3-grpcio with the sandbox CA as its only root and the channel option
`grpc.http_proxy` (grpc-core's own CONNECT to sluice's listener: the client never resolves
grpc.test); the origin is grpcio too (grpc_origin.py: TLS as grpc.test on 127.0.0.26, generic
handlers, bytes in and out), in a process of its own. Both legs are HTTP/2: the sandbox's (ALPN
h2, which grpc-core requires) and the origin's (a gRPC server speaks nothing else), so each call
is a stream translated from one HTTP/2 connection to another, with `te: trailers` kept
(grpc-core refuses a request without it), the response trailers (grpc-status, grpc-message)
carried back as trailers, messages relayed as they come both ways, and a client's deadline or
cancellation reaching the origin as the end of its stream.

The policy opens grpc.test for the paths under /pkg.Allowed/ only, so /pkg.Other/Call is
`not_allowed_path`: a denial that a gRPC client reads as `PERMISSION_DENIED` with the reason in
its details (the trailers-only answer of docs/wire.md#grpc), that never reaches the
origin. Oracles: the origin's event log (every call that reached it, by the `x-test` marker the
test puts in its metadata; its streamed messages and cancellations, with CLOCK_MONOTONIC times
comparable with the test's) and the audit log (`proto` "h2", `upstream_proto` "h2", `url`
https://grpc.test:PORT/pkg.Allowed/Method, method POST)."""
import hashlib
import os
import queue
import tempfile
import time

import grpc
import pytest

import expect
from gateway import Gateway, Runner, remove_dir
from grpc_origin import ADDRESS, NAME, SLEEP, TICK_GAP, TICKS, GrpcOrigin
from oracles import marker
from sluice_proc import bed_rules


@pytest.fixture(scope="module")
def origin(bed):
    directory = tempfile.mkdtemp(prefix="sluice-grpc-")
    server = GrpcOrigin(bed.pki, directory)
    yield server
    server.stop()
    remove_dir(directory)


@pytest.fixture(scope="module")
def ggw(sluice_binary, bed, origin):
    """sluice with the bed's rules and one for grpc.test: its port, its address (`ips`), and
    the paths under /pkg.Allowed/ only."""
    rules = bed_rules(bed.tls_port, bed.plain_port) + [
        {"name": "grpc", "hosts": [NAME], "ports": [origin.port], "paths": ["/pkg.Allowed/"],
         "ips": [ADDRESS + "/32"]}]
    runner = Runner(sluice_binary, bed)
    try:
        yield Gateway(runner.start(rules=rules), bed)
    finally:
        runner.stop_all()


def open_channel(target, root_pem, options=()):
    with open(root_pem, "rb") as f:
        credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
    return grpc.secure_channel(target, credentials,
                               options=[("grpc.enable_retries", 0)] + list(options))


@pytest.fixture
def channel(ggw, origin):
    """A channel to grpc.test:PORT through sluice: grpc-core sends CONNECT grpc.test:PORT to
    sluice's listener (`grpc.http_proxy`), trusts only the sandbox's CA and checks the name
    grpc.test on sluice's certificate."""
    ch = open_channel("%s:%d" % (NAME, origin.port), ggw.sluice.ca_pem,
                      [("grpc.http_proxy", ggw.sluice.proxy_url)])
    yield ch
    ch.close()


def url(origin, method):
    return "https://%s:%d%s" % (NAME, origin.port, method)


def allowed_records(gw, origin, mark, method, count=1):
    """The records of `count` calls of `method` since `mark`: allowed by the grpc rule, HTTP/2
    on both legs, POST to https://grpc.test:PORT/METHOD, answered 200 by the origin."""
    recs = gw.audit.wait(mark, lambda r: r["url"] == url(origin, method), count=count)
    assert len(recs) == count, recs
    for rec in recs:
        expect.record(rec, sandbox="sbx1", mode="connect", decision="allow", rule="grpc",
                      reason=None, sni=NAME, method="POST", status=200, proto="h2",
                      upstream_proto="h2", upstream="%s:%d" % (ADDRESS, origin.port))
    return recs


def grpc_frame(message):
    """A message as a gRPC body carries it: no compression flag, 4-byte length, the bytes."""
    return b"\0" + len(message).to_bytes(4, "big") + message


def test_the_origin_answers_directly(bed, origin):
    """Self-test of the bed: without sluice (straight to 127.0.0.26, the test CA as root, the
    name grpc.test checked), the origin answers a unary call and logs it; if this fails, no
    verdict of this module means anything."""
    m = marker()
    ch = open_channel("%s:%d" % (ADDRESS, origin.port), bed.pki.test_ca.cert,
                      [("grpc.ssl_target_name_override", NAME)])
    try:
        answer = ch.unary_unary("/pkg.Allowed/Echo")(b"direct", metadata=(("x-test", m),),
                                                      timeout=10)
    finally:
        ch.close()
    assert answer == b"echo:direct"
    assert [c["method"] for c in origin.calls(m)] == ["/pkg.Allowed/Echo"]


# --- unary ----------------------------------------------------------------------------------

def test_unary_echo_small_and_beyond_the_windows(ggw, origin, channel):
    """Two unary calls on one channel: 5 bytes, then 1 MiB each way (more than the 64 KiB stream
    windows of either leg, so both legs' flow control must turn). Each answer is exactly the
    origin's; the origin got each call once, by its method; each record is an allowed h2-to-h2
    stream whose req_bytes and resp_bytes are the gRPC bodies (5-byte message prefix included)
    and whose hashes are theirs."""
    small, big = b"hello", os.urandom(1 << 20)
    m, mark = marker(), ggw.audit.mark()
    echo = channel.unary_unary("/pkg.Allowed/Echo")
    assert echo(small, metadata=(("x-test", m),), timeout=10) == b"echo:hello"
    assert echo(big, metadata=(("x-test", m),), timeout=20) == b"echo:" + big
    assert [c["method"] for c in origin.calls(m)] == ["/pkg.Allowed/Echo"] * 2
    recs = allowed_records(ggw, origin, mark, "/pkg.Allowed/Echo", count=2)
    by_size = sorted(recs, key=lambda r: r["req_bytes"])
    for rec, sent in zip(by_size, (small, big)):
        body, answer = grpc_frame(sent), grpc_frame(b"echo:" + sent)
        expect.record(rec, req_bytes=len(body), resp_bytes=len(answer),
                      req_sha256=hashlib.sha256(body).hexdigest(),
                      resp_sha256=hashlib.sha256(answer).hexdigest())


# --- streaming ------------------------------------------------------------------------------

def test_server_streaming_arrives_as_it_is_sent(ggw, origin, channel):
    """The origin sends 4 messages TICK_GAP (300 ms) apart on one stream: each reaches the
    client before the origin sends the next (DATA relayed as it comes, not gathered until the
    stream ends); then the stream ends with status OK (the trailers came through)."""
    m, mark = marker(), ggw.audit.mark()
    call = channel.unary_stream("/pkg.Allowed/Ticks")(b"", metadata=(("x-test", m),),
                                                      timeout=10)
    received = []
    for message in call:
        received.append((message, time.monotonic()))
    assert [msg for msg, _ in received] == [b"tick-%d" % i for i in range(TICKS)]
    assert call.code() == grpc.StatusCode.OK, (call.code(), call.details())
    sent = {e["i"]: e["t"] for e in origin.events("tick", m)}
    assert sorted(sent) == list(range(TICKS)), sent
    for i in range(TICKS - 1):
        assert received[i][1] < sent[i + 1], \
            "tick-%d reached the client %.3f s after the origin sent tick-%d (%.1f s later)" % (
                i, received[i][1] - sent[i + 1], i + 1, TICK_GAP)
    assert received[0][1] < sent[TICKS - 1] - TICK_GAP, (received, sent)
    allowed_records(ggw, origin, mark, "/pkg.Allowed/Ticks")


def test_bidirectional_messages_are_relayed_as_they_come(ggw, origin, channel):
    """A bidirectional call whose client sends its next message only after the echo of the last
    has come back: this completes only if sluice relays each request DATA frame upstream as it
    arrives (not the whole request body at END_STREAM) and each answer back as it comes."""
    m, mark = marker(), ggw.audit.mark()
    outgoing = queue.Queue()

    def requests():
        while True:
            item = outgoing.get()
            if item is None:
                return
            yield item

    call = channel.stream_stream("/pkg.Allowed/Chat")(requests(), metadata=(("x-test", m),),
                                                      timeout=10)
    answers = []
    try:
        for i in range(3):
            outgoing.put(b"m-%d" % i)
            answers.append(next(call))
    finally:
        outgoing.put(None)
    assert list(call) == []
    assert answers == [b"echo:m-%d" % i for i in range(3)]
    assert call.code() == grpc.StatusCode.OK, (call.code(), call.details())
    assert [e["message"] for e in origin.events("chat", m)] == ["m-0", "m-1", "m-2"]
    allowed_records(ggw, origin, mark, "/pkg.Allowed/Chat")


def test_an_origin_error_is_a_trailers_only_answer_the_client_reads(ggw, origin, channel):
    """/pkg.Allowed/Fail fails at once: the origin's answer is trailers-only (one HEADERS frame
    with grpc-status 5 NOT_FOUND and grpc-message that ends the stream). sluice passes it on as
    one, never as a head followed by an empty DATA frame, which a gRPC client reads as a call
    that ended without a status ("Stream removed", UNKNOWN): the client sees NOT_FOUND and the
    origin's message (docs/wire.md#http2-toward-origins)."""
    m, mark = marker(), ggw.audit.mark()
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/pkg.Allowed/Fail")(b"x-17", metadata=(("x-test", m),), timeout=10)
    assert (e.value.code(), e.value.details()) == (grpc.StatusCode.NOT_FOUND,
                                                   "no such thing: x-17")
    assert [c["method"] for c in origin.calls(m)] == ["/pkg.Allowed/Fail"]
    allowed_records(ggw, origin, mark, "/pkg.Allowed/Fail")


# --- endings --------------------------------------------------------------------------------

def test_deadline_exceeded_ends_the_call_at_the_origin(ggw, origin, channel):
    """A call whose handler sleeps SLEEP (3 s) with a client deadline of 0.5 s: the client gets
    DEADLINE_EXCEEDED at about 0.5 s, and the origin's context sees the call end (is_active()
    false) within a couple of seconds of the deadline, long before its sleep would end (the
    grpc-timeout field forwarded, or the client's RST_STREAM carried to the origin's stream).
    On record as whichever came first (docs/audit.md#errors): the client's RST_STREAM (error
    client_reset), or the origin's own DEADLINE_EXCEEDED answer (status 200, relayed); never as
    an allowed call with no answer and no error."""
    m = marker()
    mark = ggw.audit.mark()
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/pkg.Allowed/Sleep")(b"", metadata=(("x-test", m),), timeout=0.5)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, (e.value.code(),
                                                                e.value.details())
    assert time.monotonic() - started < 2.5
    begun = origin.wait_event("sleep-start", m)
    end = origin.wait_event("sleep-end", m, timeout=SLEEP + 2)
    assert end["active"] is False, end
    assert end["t"] - started < 2.5, "the origin saw the call end %.2f s after it began" % (
        end["t"] - started)
    assert end["t"] - begun["t"] < SLEEP - 0.5, (begun, end)
    rec = ggw.audit.one(mark, lambda r: (r["url"] or "").endswith("/pkg.Allowed/Sleep"))
    seen = {k: rec[k] for k in ("decision", "reason", "status", "error", "proto", "resp_bytes")}
    assert (rec["decision"], rec["reason"], rec["proto"]) == ("allow", None, "h2"), seen
    assert rec["error"] == "client_reset" or (rec["error"] is None and rec["status"] == 200), seen


def test_client_cancellation_reaches_the_origin(ggw, origin, channel):
    """A call without a deadline, cancelled by the client once the origin's handler runs: only
    the client's RST_STREAM (CANCEL) says so, and sluice carries it to the origin's stream
    (docs/wire.md#http2-toward-origins, "Endings": RST_STREAM CANCEL toward the origin): the
    origin's context ends within 2 s, not when its 3 s sleep runs out."""
    m = marker()
    future = channel.unary_unary("/pkg.Allowed/Sleep").future(b"", metadata=(("x-test", m),))
    origin.wait_event("sleep-start", m)
    assert future.cancel()
    cancelled = time.monotonic()
    end = origin.wait_event("sleep-end", m, timeout=SLEEP + 2)
    assert end["active"] is False, end
    assert end["t"] - cancelled < 2.0, "the origin saw the cancellation after %.2f s" % (
        end["t"] - cancelled)
    assert future.cancelled()


# --- denial ---------------------------------------------------------------------------------

def test_denied_method_is_permission_denied_and_never_reaches_the_origin(ggw, origin, channel):
    """/pkg.Other/Call is under no path of the grpc rule: sluice answers on the stream the way
    a gRPC client reads a refusal (docs/wire.md#grpc: 200, grpc-status 7, the
    reason in grpc-message, trailers-only), so the client sees PERMISSION_DENIED with
    not_allowed_path in its details and the sluice-reason field; the origin never hears of the
    call (barrier: an allowed call after it on the same channel, which it does log); the record
    is a deny, not_allowed_path, with no upstream and status 200: the status sluice sent
    (docs/audit.md)."""
    m, ok, mark = marker(), marker(), ggw.audit.mark()
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/pkg.Other/Call")(b"x", metadata=(("x-test", m),), timeout=10)
    err = e.value
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED, (err.code(), err.details())
    assert "not_allowed_path" in (err.details() or ""), err.details()
    fields = dict(err.trailing_metadata() or ()) | dict(err.initial_metadata() or ())
    assert fields.get("sluice-reason") == "not_allowed_path", fields
    assert expect.proxy_status_error(fields.get("proxy-status")) == "http_request_denied", fields
    rec = ggw.audit.one(mark, lambda r: r["url"] == url(origin, "/pkg.Other/Call"))
    expect.record(rec, sandbox="sbx1", mode="connect", decision="deny",
                  reason="not_allowed_path", sni=NAME, method="POST", proto="h2",
                  upstream=None, upstream_proto=None, status=200)
    answer = channel.unary_unary("/pkg.Allowed/Echo")(b"after", metadata=(("x-test", ok),),
                                                      timeout=10)
    assert answer == b"echo:after"
    assert [c["method"] for c in origin.calls(ok)] == ["/pkg.Allowed/Echo"]
    assert origin.calls(m) == [], "the denied call reached the origin"
    allowed_records(ggw, origin, mark, "/pkg.Allowed/Echo")
