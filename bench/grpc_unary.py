#!/usr/bin/python3
"""A gRPC unary call loop for bench/compare, both ends: python3-grpcio (Debian's), no protobuf
(generic handlers, bytes in and bytes out).

  grpc_unary.py serve --address IP --port P --cert PEM --key PEM
      A TLS gRPC origin: /bench.Echo/Unary answers the request's bytes. Logs "ready IP:P" on
      stderr once it listens; stops on SIGTERM.

  grpc_unary.py loop --target HOST:PORT --cacert PEM (--connect IP:PORT | --proxy IP:PORT)
                     [--duration S] [--warmup S] [--payload BYTES] [--label TEXT]
      Unary calls back to back on one channel (one HTTP/2 connection; with --proxy, grpc-core's
      own CONNECT HOST:PORT through the proxy, the name never resolved here; with --connect,
      straight to IP:PORT with HOST as the TLS name and :authority). Calls during the warm-up
      are not counted (the first one opens the connection). Prints one JSON line shaped like
      sluice-loadgen's (mode "grpc-unary"): requests (calls that returned OK with the payload
      echoed), errors, seconds, req_per_s, p50_us, p99_us (call started -> answer in hand),
      bytes (answer bytes), cpu_seconds (this process, grpc-core's threads included, over the
      window). Exit 0 if a call succeeded in the window, 1 if none did, 2 on bad arguments.

One call at a time: the figures are per-call latency through grpc-core and Python, the same on
every path, so what a proxy adds is the difference from direct.
"""
import argparse
import json
import math
import os
import resource
import signal
import sys
import threading
import time
from concurrent import futures

import grpc

METHOD = "/bench.Echo/Unary"


def serve(a):
    def unary(request, context):
        return request

    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Unary": grpc.unary_unary_rpc_method_handler(unary)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=(handler,))
    with open(a.cert, "rb") as c, open(a.key, "rb") as k:
        credentials = grpc.ssl_server_credentials([(k.read(), c.read())])
    port = server.add_secure_port(f"{a.address}:{a.port}", credentials)
    if port == 0:
        sys.exit(f"grpc_unary serve: cannot listen on {a.address}:{a.port}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    print(f"ready {a.address}:{port}", file=sys.stderr, flush=True)
    stop.wait()
    server.stop(0).wait(5)
    return 0


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def percentile_us(sorted_ns, p):
    if not sorted_ns:
        return None
    rank = max(1, math.ceil(p * len(sorted_ns)))
    return round(sorted_ns[rank - 1] / 1000)


def loop(a):
    with open(a.cacert, "rb") as f:
        credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
    host = a.target.rsplit(":", 1)[0]
    options = [("grpc.enable_retries", 0)]
    if a.proxy:
        target = a.target
        options.append(("grpc.http_proxy", f"http://{a.proxy}"))
    else:
        target = a.connect
        options += [("grpc.enable_http_proxy", 0), ("grpc.ssl_target_name_override", host),
                    ("grpc.default_authority", a.target)]
    channel = grpc.secure_channel(target, credentials, options=options)
    call = channel.unary_unary(METHOD)
    payload = os.urandom(a.payload)
    latencies = []
    errors, ok_bytes, first_error = 0, 0, None
    start = time.monotonic()
    measure_at = start + a.warmup
    end_at = measure_at + a.duration
    measuring, cpu_begin, t_begin = False, 0.0, 0.0
    while True:
        now = time.monotonic()
        if now >= end_at:
            break
        if not measuring and now >= measure_at:
            measuring, cpu_begin, t_begin = True, cpu_seconds(), now
        t0 = time.perf_counter_ns()
        try:
            answer = call(payload, timeout=10)
            failure = None if answer == payload else "the answer is not the payload"
        except grpc.RpcError as e:
            failure = f"{e.code().name}: {e.details()}"
        t1 = time.perf_counter_ns()
        if not measuring:
            continue
        if failure is None:
            latencies.append(t1 - t0)
            ok_bytes += len(answer)
        else:
            errors += 1
            first_error = first_error or failure
    t_end, cpu_end = time.monotonic(), cpu_seconds()
    channel.close()
    seconds = t_end - t_begin if measuring else 0.0
    latencies.sort()
    n = len(latencies)
    result = dict(mode="grpc-unary", label=a.label, url=f"grpc://{a.target}{METHOD}",
                  proxy=a.proxy, concurrency=1, threads=1, seconds=round(seconds, 3),
                  requests=n, errors=errors,
                  req_per_s=round(n / seconds, 1) if seconds > 0 else None,
                  p50_us=percentile_us(latencies, 0.50), p99_us=percentile_us(latencies, 0.99),
                  conn_per_s=None, mb_per_s=None, bytes=ok_bytes, connections=None,
                  cpu_seconds=round(cpu_end - cpu_begin, 3) if measuring else 0.0,
                  proto="h2", streams=1)
    if errors:
        print(f"grpc_unary: {errors} errors; first: {first_error}", file=sys.stderr)
    print(json.dumps(result, separators=(",", ":")), flush=True)
    return 0 if n > 0 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--address", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    lp = sub.add_parser("loop")
    lp.add_argument("--target", required=True, help="HOST:PORT (TLS name and :authority)")
    lp.add_argument("--cacert", required=True)
    route = lp.add_mutually_exclusive_group(required=True)
    route.add_argument("--connect", help="IP:PORT to dial for HOST (direct)")
    route.add_argument("--proxy", help="IP:PORT of an explicit proxy (CONNECT HOST:PORT)")
    lp.add_argument("--duration", type=float, default=10.0)
    lp.add_argument("--warmup", type=float, default=1.0)
    lp.add_argument("--payload", type=int, default=100)
    lp.add_argument("--label")
    a = ap.parse_args()
    if a.command == "serve":
        return serve(a)
    if a.duration <= 0 or a.warmup < 0 or a.payload < 0:
        ap.error("--duration above 0, --warmup and --payload from 0")
    return loop(a)


if __name__ == "__main__":
    sys.exit(main())
