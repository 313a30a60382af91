"""A gRPC origin (python3-grpcio 1.51, the library Debian ships) for test_grpc.py: TLS with a leaf
of the bed's test CA for `grpc.test`, on 127.0.0.26 and a port of its own, in a process of its
own (started and stopped by PID; grpc-core's threads stay out of the test process, which forks
sluice and nginx). No protobuf: generic handlers, bytes in and bytes out.

  /pkg.Allowed/Echo    unary: answers b"echo:" + the request
  /pkg.Allowed/Ticks   server streaming: b"tick-0".."tick-3", TICK_GAP seconds apart
  /pkg.Allowed/Chat    bidirectional: each message comes back as b"echo:" + it, as it comes
  /pkg.Allowed/Sleep   unary: sleeps SLEEP seconds unless the call ends first (the client's
                       deadline or cancellation, as the server's context sees it)
  /pkg.Allowed/Fail    unary: fails at once with NOT_FOUND and a message (gRPC's trailers-only
                       answer: one HEADERS frame that ends the stream, with grpc-status)
  /pkg.Other/Call      unary: what a rule for /pkg.Allowed/ must never let through

The oracle is its event log (JSON lines, `time.monotonic()`, which is the system's
CLOCK_MONOTONIC and so comparable with the test process's): "call" for every call that
reached it (method and the `x-test` metadata the test marks it with, before any handler
runs, so a method it does not serve is logged too), "tick" as each streamed message goes, "chat"
as each bidirectional message arrives, "sleep-start"/"sleep-end" (whether the call was still
active), "terminated" from the context's callback, and "ready" with the port once it listens.

    origin = GrpcOrigin(pki, directory)   # started; origin.port
    origin.calls(m)                       # the "call" events marked m
    origin.stop()
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc

from netutil import DIE_WITH_US, clean_env, read_text, stop_process, wait_until

ADDRESS = "127.0.0.26"
NAME = "grpc.test"
TICKS = 4
TICK_GAP = 0.3
SLEEP = 3.0


# --- the server (this file run as a script) ----------------------------------------------

def serve(address, cert, key, log_path):
    lock = threading.Lock()
    log = open(log_path, "a")

    def emit(event, **fields):
        fields.update(event=event, t=time.monotonic())
        with lock:
            log.write(json.dumps(fields) + "\n")
            log.flush()

    def mark(context):
        return dict(context.invocation_metadata()).get("x-test")

    def echo(request, context):
        return b"echo:" + request

    def ticks(request, context):
        for i in range(TICKS):
            if i:
                time.sleep(TICK_GAP)
            emit("tick", i=i, x_test=mark(context))
            yield b"tick-%d" % i

    def chat(requests, context):
        for request in requests:
            emit("chat", message=request.decode(), x_test=mark(context))
            yield b"echo:" + request

    def sleep(request, context):
        m = mark(context)
        context.add_callback(lambda: emit("terminated", x_test=m))
        emit("sleep-start", x_test=m)
        end = time.monotonic() + SLEEP
        while context.is_active() and time.monotonic() < end:
            time.sleep(0.01)
        emit("sleep-end", x_test=m, active=context.is_active())
        return b"slept"

    def fail(request, context):
        context.abort(grpc.StatusCode.NOT_FOUND, "no such thing: " + request.decode())

    def other(request, context):
        return b"other"

    handlers = {
        "/pkg.Allowed/Echo": grpc.unary_unary_rpc_method_handler(echo),
        "/pkg.Allowed/Ticks": grpc.unary_stream_rpc_method_handler(ticks),
        "/pkg.Allowed/Chat": grpc.stream_stream_rpc_method_handler(chat),
        "/pkg.Allowed/Sleep": grpc.unary_unary_rpc_method_handler(sleep),
        "/pkg.Allowed/Fail": grpc.unary_unary_rpc_method_handler(fail),
        "/pkg.Other/Call": grpc.unary_unary_rpc_method_handler(other),
    }

    class Logged(grpc.GenericRpcHandler):
        def service(self, details):
            emit("call", method=details.method,
                 x_test=dict(details.invocation_metadata).get("x-test"))
            return handlers.get(details.method)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         handlers=(Logged(),))
    with open(cert, "rb") as c, open(key, "rb") as k:
        credentials = grpc.ssl_server_credentials([(k.read(), c.read())])
    port = server.add_secure_port("%s:0" % address, credentials)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    emit("ready", port=port)
    stop.wait()
    server.stop(0).wait(5)


# --- the test side ---------------------------------------------------------------------------

class GrpcOrigin:
    """The origin's process and its event log."""

    def __init__(self, pki, directory):
        os.makedirs(directory, exist_ok=True)
        self.dir = directory
        self.log = os.path.join(directory, "grpc-events.jsonl")
        leaf = pki.test_ca.issue("grpc-origin", NAME, dns=[NAME])
        self.cert = leaf.cert
        with open(os.path.join(directory, "stderr.log"), "wb") as err:
            self.proc = subprocess.Popen(
                DIE_WITH_US + [sys.executable, os.path.abspath(__file__), "--address", ADDRESS,
                               "--cert", leaf.cert, "--key", leaf.key, "--log", self.log],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                env=clean_env(PYTHONDONTWRITEBYTECODE="1"))

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError("the gRPC origin exited with %d:\n%s" % (
                    self.proc.returncode, self.stderr()))
            return [e for e in self.events() if e["event"] == "ready"]
        try:
            self.port = wait_until(ready, 30, "the gRPC origin to listen")[0]["port"]
        except Exception:
            self.stop()
            raise

    def stderr(self):
        return read_text(os.path.join(self.dir, "stderr.log"))[-3000:]

    def events(self, event=None, x_test=None):
        """The events logged so far, oldest first; of one kind and one marker if given."""
        out = []
        for line in read_text(self.log).split("\n")[:-1]:  # whole lines only
            e = json.loads(line)
            if (event is None or e["event"] == event) and \
                    (x_test is None or e.get("x_test") == x_test):
                out.append(e)
        return out

    def calls(self, x_test):
        return self.events("call", x_test)

    def wait_event(self, event, x_test, timeout=10):
        return wait_until(lambda: self.events(event, x_test), timeout,
                          "the gRPC origin's %r event for %s" % (event, x_test))[0]

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for option in ("--address", "--cert", "--key", "--log"):
        parser.add_argument(option, required=True)
    a = parser.parse_args()
    serve(a.address, a.cert, a.key, a.log)
