"""Idle upstream connections are bounded per sandbox and for the whole process
(docs/wire.md#upstreams, "Idle upstream bounds"), so that one sandbox cannot hold the gateway's descriptors and deny service
to another.

The attack: a sandbox whose policy allows a wildcard (`*.flood.test`, every name of which
resolves to the CDN's keep-alive plain port) asks for hundreds of different names on one
keep-alive connection, then leaves. Each name is a pool key of its own, and a bound per key
holds nothing back: without a bound per sandbox and in total, sluice keeps one idle upstream
connection per name, with no client connected, until they expire.
"""
import os
import socket
import ssl

from http1 import ConnectionClosed, HttpReader, request_bytes
from netutil import free_port, tcp_sockets, wait_until
from sluice_proc import PROXY_ADDRESS

FLOOD, VICTIM = "flood", "victim"
CDN = "127.0.0.20"


def flood_and_victim(bed, upstream=None):
    """An `edit=` for make_config: `flood` (the bed's listener) allows every name under
    flood.test over plain http; `victim` (a listener and audit file of its own) allows
    allowed.test over http and https. `upstream`: keys added to the config's `upstream`."""
    t, p = bed.tls_port, bed.plain_port

    def edit(config, workdir):
        flood = config["sandboxes"][0]
        flood.update(name=FLOOD, ca=os.path.join(workdir, "ca-" + FLOOD), policy="pf")
        config["sandboxes"].append({
            "name": VICTIM, "listen": "%s:%d" % (PROXY_ADDRESS, free_port((PROXY_ADDRESS,))),
            "ca": os.path.join(workdir, "ca-" + VICTIM), "policy": "pv", "mode": "enforce",
            "audit": os.path.join(workdir, "audit-" + VICTIM + ".jsonl")})
        config["policies"] = {
            "pf": {"rules": [{"name": "wildcard", "hosts": ["*.flood.test"],
                              "schemes": ["http"], "ports": [p], "ips": [CDN + "/32"]}]},
            "pv": {"rules": [{"name": "plain", "hosts": ["allowed.test"], "schemes": ["http"],
                              "ports": [p], "ips": [CDN + "/32"]},
                             {"name": "tls", "hosts": ["allowed.test"], "ports": [t],
                              "ips": [CDN + "/32"]}]},
        }
        config["upstream"].update(upstream or {})
    return edit


def plain_get(name, port, path="/whoami.txt"):
    return request_bytes("GET", "http://%s:%d%s" % (name, port, path), "%s:%d" % (name, port))


def flood(address, names, port, timeout=5):
    """A GET for each name, one after another on a keep-alive connection (a new one whenever
    sluice closes it). The status of each, until the first that is not 200 (then a status, or
    what went wrong: "timeout", "closed")."""
    statuses = []
    sock = reader = None
    try:
        for name in names:
            if sock is None:
                sock = socket.create_connection(address, timeout=timeout)
                reader = HttpReader(sock)
            try:
                sock.sendall(plain_get(name, port))
                resp = reader.read_response("GET")
            except (socket.timeout, TimeoutError):
                statuses.append("timeout")
                return statuses
            except (ConnectionClosed, OSError):
                statuses.append("closed")
                return statuses
            statuses.append(resp.status)
            if resp.status != 200:
                return statuses
            if (resp.header("Connection") or "").lower() == "close":
                sock.close()
                sock = None
    finally:
        if sock is not None:
            sock.close()
    return statuses


def ask(address, request, timeout=5):
    """One request on a new connection: its status, or "timeout" / "closed"."""
    try:
        with socket.create_connection(address, timeout=timeout) as sock:
            sock.sendall(request)
            return HttpReader(sock).read_response("GET").status
    except (socket.timeout, TimeoutError):
        return "timeout"
    except (ConnectionClosed, OSError):
        return "closed"


def ask_tls(address, authority, cafile, timeout=5):
    """GET /whoami.txt through a CONNECT tunnel: its status, or what went wrong."""
    try:
        with socket.create_connection(address, timeout=timeout) as sock:
            sock.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n"
                         % (authority.encode(), authority.encode()))
            answer = HttpReader(sock).read_head()
            if answer.status != 200:
                return "CONNECT %d" % answer.status
            ctx = ssl.create_default_context(cafile=cafile)
            host = authority.rsplit(":", 1)[0]
            with ctx.wrap_socket(sock, server_hostname=host) as tls:
                tls.sendall(request_bytes("GET", "/whoami.txt", host))
                return HttpReader(tls).read_response("GET").status
    except (socket.timeout, TimeoutError):
        return "timeout"
    except (ConnectionClosed, OSError) as e:
        return "failed: %s" % e


def upstream_sockets(bed):
    """sluice's connections to the CDN's plain port: established, or closed by nginx and not
    yet by sluice (nothing else in these tests stays connected there)."""
    return [s for s in tcp_sockets() if s["remote"] == (CDN, bed.plain_port)
            and s["state"] in ("ESTABLISHED", "CLOSE_WAIT")]


def held_after_flood(bed, bound, timeout=5):
    """How many upstream connections sluice holds once the flood's client has gone: its last
    upstream goes from its session to the pool as the session closes, so this waits (up to
    `timeout`) for the count to come down to `bound`, and returns the count either way."""
    try:
        wait_until(lambda: len(upstream_sockets(bed)) <= bound, timeout,
                   "at most %d upstream connections" % bound)
    except TimeoutError:
        pass
    return len(upstream_sockets(bed))


def test_a_flood_of_names_leaves_the_gateway_descriptors_for_other_sandboxes(start_sluice, bed):
    """With the default bounds, a gateway allowed 256 descriptors, and 400 names asked for by
    one sandbox on one connection: every request of the flood is answered, and afterwards the
    other sandbox's requests (plain and through a tunnel) are answered at once, not refused
    with 502 or left unaccepted while the flood's connections sit in the pool."""
    sluice = start_sluice(edit=flood_and_victim(bed), nofile=256,
                          env={"SLUICE_WORKERS": "2"})
    victim = sluice.sandbox_view(VICTIM)
    p = bed.plain_port
    names = ["n%d.flood.test" % i for i in range(400)]
    statuses = flood(sluice.address, names, p)
    held = held_after_flood(bed, 64)
    after = [ask(victim.address, plain_get("allowed.test", p)) for _ in range(3)]
    after_tls = [ask_tls(victim.address, "allowed.test:%d" % bed.tls_port, victim.ca_pem)
                 for _ in range(2)]
    assert after == [200] * 3 and after_tls == [200] * 2, \
        (after, after_tls, "the flood held %d upstream connections; its last statuses: %s"
         % (held, statuses[-3:]))
    assert statuses == [200] * len(names), statuses[-3:]
    # a quarter of the descriptor limit at most (docs/configuration.md#upstream), and the
    # flood's own connection is gone
    assert held <= 64, held


def test_one_sandbox_holds_at_most_its_bound_and_the_others_keep_theirs(start_sluice, bed):
    """upstream.max_idle_per_sandbox: 8. After 60 names from `flood`, sluice holds at most 8
    idle connections to the CDN for it, and the connection `victim` pooled before the flood is
    still there: its next request reuses it (nginx's connection number is the same)."""
    sluice = start_sluice(edit=flood_and_victim(bed, {"max_idle": 100,
                                                      "max_idle_per_sandbox": 8}),
                          env={"SLUICE_WORKERS": "1"})
    victim = sluice.sandbox_view(VICTIM)
    p = bed.plain_port

    def victim_connection(mark):
        assert ask(victim.address, plain_get("allowed.test", p, "/whoami.txt?m=" + mark)) == 200
        entry = bed.nginx.wait_access("cdn", lambda e: mark in e["uri"])[0]
        return entry["connection"]

    first = victim_connection("pool-bound-before")
    # The victim's client has gone: its upstream connection is in the pool (after its
    # client's close, at once)
    wait_until(lambda: len(upstream_sockets(bed)) == 1, 10, "the victim's pooled connection")
    statuses = flood(sluice.address, ["m%d.flood.test" % i for i in range(60)], p)
    assert statuses == [200] * 60, statuses[-3:]
    # The victim's one and the flood's eight are left.
    held = held_after_flood(bed, 1 + 8)
    assert held <= 1 + 8, held
    assert victim_connection("pool-bound-after") == first
