"""Upstream connections across a keep-alive client's requests, and connections spread over the
workers: the parts of the gateway that exist for speed, tested for correctness.

  - a keep-alive client's requests ride one upstream connection (sluice keeps it between
    requests instead of dialling, or handshaking, again);
  - an upstream connection that the origin closed while it sat idle is never sent a request:
    the next request goes out on a new connection and succeeds;
  - a burst of clients is spread over the workers (handed from the worker that accepted them to
    a less busy one), and every client is served.
"""
import collections
import concurrent.futures
import re
import socket
import time

import pytest

import clients
from gateway import Gateway, Runner
from netutil import wait_until
from oracles import get, marker


def nginx_entry(bed, m):
    return bed.nginx.wait_access("cdn", lambda e: m in e["uri"])[0]


def test_keep_alive_client_requests_share_one_upstream_connection(gw, bed):
    marks = [marker() for _ in range(4)]
    ex = gw.tunnel("allowed.test", [get("/whoami.txt?m=" + m) for m in marks])
    assert [r.status for r in ex.responses] == [200] * 4, ex.responses
    entries = [nginx_entry(bed, m) for m in marks]
    assert len({e["connection"] for e in entries}) == 1, entries
    counts = [int(e["connection_requests"]) for e in entries]
    assert counts == list(range(counts[0], counts[0] + 4)), counts


def test_upstream_closed_while_idle_is_replaced_not_used(gw, bed):
    """nginx closes a connection 300 ms after answering /brief/; the client's next request
    comes later, on the same client connection, and must be answered over a new upstream
    connection (never written into the dead one, never a 502)."""
    first, second = marker(), marker()
    sock, tls, reader = clients.open_tls_tunnel(gw.sluice.address, gw.authority("allowed.test"),
                                                gw.sluice.ca_pem)
    try:
        tls.sendall(get("/brief/?m=" + first))
        assert reader.read_response("GET").status == 200
        time.sleep(0.7)  # nginx closed its side at 300 ms; sluice keeps it parked until 1 s
        tls.sendall(get("/whoami.txt?m=" + second))
        resp = reader.read_response("GET")
        assert resp.status == 200, resp
    finally:
        sock.close()
    before = nginx_entry(bed, first)
    after = nginx_entry(bed, second)
    assert before["connection"] != after["connection"], (before, after)


@pytest.fixture(scope="module")
def two_workers(sluice_binary, bed):
    runner = Runner(sluice_binary, bed)
    try:
        yield Gateway(runner.start(env={"SLUICE_WORKERS": "2", "SLUICE_LOG": "debug"}), bed)
    finally:
        runner.stop_all()


def test_a_burst_of_clients_is_spread_over_the_workers_and_all_served(two_workers, bed):
    """40 clients connect at once and stay connected: both workers get a fair share (each
    worker's epoll wakes for the shared listening socket, and left alone the first to wake
    takes the whole burst). Three rounds, each after the last one's clients left: a worker's
    count of its connections must come back down, or later rounds would all go to the other.
    Then every one of them is served."""
    n = 40
    seen = 0
    for round_ in range(3):
        held = []
        try:
            for _ in range(n):
                held.append(socket.create_connection(two_workers.sluice.address, timeout=10))
            accepted = lambda: re.findall(
                r"accepted from \S+ for sandbox sbx1 on worker (\d+)",
                two_workers.sluice.stderr())[seen:]
            wait_until(lambda: len(accepted()) >= n, 20, "%d accepted connections" % n)
            per_worker = collections.Counter(accepted()[:n])
            assert set(per_worker) == {"0", "1"} and min(per_worker.values()) >= n // 2 - 4, \
                (round_, per_worker)
            seen += n
        finally:
            for s in held:
                s.close()
        closed = lambda: two_workers.sluice.stderr().count("close: client closed") >= seen
        wait_until(closed, 20, "the round's connections closed")

    marks = [marker() for _ in range(n)]

    def one(m):
        ex = two_workers.tunnel("allowed.test", [get("/whoami.txt?m=" + m + "a"),
                                                 get("/whoami.txt?m=" + m + "b")])
        return [r.status for r in ex.responses]

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        results = list(pool.map(one, marks))
    assert results == [[200, 200]] * n, results
