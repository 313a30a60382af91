"""The five findings of issue 33 as scenarios that return figures: what one sandbox speaking
HTTP/2 can make sluice hold or do. test_h2_bounds.py asserts the bounds of docs/wire.md on
them; bench/h2_bounds runs them against a binary and prints the figures. Each takes a running
sluice (sluice_proc.Sluice, started by the caller with the config its docstring names) and
returns a dict of plain numbers and strings (JSON-ready), never asserting itself.

1. hold_windows      streams of a large file whose client never gives a window back: RSS,
                     descriptors and upstream sockets per connection.
2. idle_flood        one sandbox asks for hundreds of names under a wildcard of an h2 origin:
                     the idle upstreams left behind, and another sandbox's requests after it.
3. made_you_reset    streams that sluice itself must reset (content-length 1, 2 bytes of
                     DATA; CVE-2025-8671): when GOAWAY comes, and the dials made meanwhile.
4. stalled_progress  PING (or WINDOW_UPDATE, PRIORITY) a second on a connection whose only
                     stream waits on a silent origin, or that has no stream: 504 / GOAWAY?
5. audit_flood       streams on one h2 connection while the audit file cannot be written:
                     each refusal's record is kept.
"""
import collections
import os
import socket
import struct
import time
import uuid

from h2client import H2Tunnel
from h2_hostile import (DATA, END_STREAM, ENHANCE_YOUR_CALM, FRAME_NAMES, H2_ADDRESS,
                        H2FLOOD_ZONE, PRIORITY, PROBE_ADDRESS, RawH2, fd_total, frame,
                        large_file, rss_kib, settled_rss)
from http1 import ConnectionClosed, HttpReader, request_bytes
from netutil import free_port, wait_until
from sluice_proc import PROXY_ADDRESS, bed_rules
from soak_bed import fd_kinds, upstream_sockets
from tlsraw import AT_CONNECT, HandshakeFailed, TLSStream, connect_tunnel

MIB = 1 << 20
ORIGIN_ADDRESS = {"allowed.test": "127.0.0.20", "h2.test": H2_ADDRESS}


def wait_no_connections(admin, sandbox="sbx1", timeout=20):
    admin.wait_for(lambda s: None if s.value("sluice_connections_active", sandbox=sandbox) == 0
                   else "still %d" % s.value("sluice_connections_active", sandbox=sandbox),
                   "%s's connections to close" % sandbox, timeout=timeout)


def _frame_counter(tunnel):
    """Count the frames the h2 library sends on `tunnel` by type (wraps its TLS writes: h2
    hands over whole frames, the preface first)."""
    sent = collections.Counter()
    write = tunnel.tls.sendall

    def counting(data):
        data = bytes(data)
        pos = 24 if data.startswith(b"PRI * HTTP/2.0") else 0
        while pos + 9 <= len(data):
            sent[FRAME_NAMES.get(data[pos + 3], data[pos + 3])] += 1
            pos += 9 + int.from_bytes(data[pos:pos + 3], "big")
        write(data)
    tunnel.tls.sendall = counting
    return sent


# --- 1. a client that never gives a window back ------------------------------------------------

def _read_heads(t, ids, quiet=2.0, limit=60.0):
    """Reads until every stream of `ids` has its response head (or ended), or until no head
    came for `quiet` seconds: a gateway that holds what it may for the connection lets later
    streams' heads wait until the client takes some bytes, and this client never does."""
    def heads():
        return sum(1 for i in ids if t.streams[i].headers is not None or t.streams[i].done)
    deadline = time.monotonic() + limit
    seen, since = heads(), time.monotonic()
    while seen < len(ids) and time.monotonic() < deadline and not t.closed:
        t._pump(min(deadline, time.monotonic() + 0.2))
        now_seen = heads()
        if now_seen != seen:
            seen, since = now_seen, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break


def hold_windows(sluice, admin, bed, name, connections=1, streams=100, size=8 * MIB):
    """`connections` HTTP/2 connections of sbx1 to `name` (allowed.test: an HTTP/1.1 origin;
    h2.test: an h2 one), one after another, each opening `streams` GETs of a `size`-byte file
    and reading what arrives without ever sending WINDOW_UPDATE (the windows stay h2's 65,535
    bytes per stream and for the connection), held open. sbx1 needs an admin endpoint and
    `per_sandbox.max_connections` >= `connections`."""
    pid = sluice.proc.pid
    path = large_file(bed, name, size)  # each origin's document root is named after it
    authority = "%s:%d" % (name, bed.tls_port)
    with H2Tunnel(sluice.address, authority, sluice.ca_pem).start() as warm:
        warm_status = warm.one("GET", "/whoami.txt").status  # leaf minted, upstream dialled
    wait_no_connections(admin)
    before, _, _ = settled_rss(pid)
    fds_before = fd_total(pid)
    tunnels, statuses, sent = [], collections.Counter(), collections.Counter()
    data_bytes = 0
    start = time.monotonic()
    try:
        for c in range(connections):
            t = H2Tunnel(sluice.address, authority, sluice.ca_pem, timeout=60)
            tunnels.append(t)
            counter = _frame_counter(t)
            t.hold_window = True  # read, never give a window back
            t.start()
            t.read_until(lambda: t.remote_settings_seen, "sluice's SETTINGS")
            ids = [t.request("GET", "%s?c=%d&s=%d" % (path, c, i)) for i in range(streams)]
            _read_heads(t, ids)
            for i in ids:
                s = t.streams[i]
                statuses[s.status if s.status is not None else
                         ("reset" if s.reset is not None else "none")] += 1
                data_bytes += len(s.data)
            sent.update(counter)
        heads_seconds = time.monotonic() - start
        during, settle_seconds, settled = settled_rss(pid, timeout=30)
        scrape = admin.scrape()
        held = {
            "rss_during_kib": during, "settle_seconds": round(settle_seconds, 1),
            "settled": settled, "fds_during": fd_total(pid),
            "fd_kinds": dict(fd_kinds(pid).most_common(4)),
            "upstream_sockets": upstream_sockets(pid, [(ORIGIN_ADDRESS[name], bed.tls_port)]),
            "client_streams_active": scrape.value("sluice_h2_streams_active", sandbox="sbx1",
                                                  leg="client"),
            "origin_streams_active": scrape.value("sluice_h2_streams_active", sandbox="sbx1",
                                                  leg="origin"),
            "connections_open": sum(1 for t in tunnels if not t.closed and t.terminated is None),
        }
    finally:
        for t in tunnels:
            t.close()
    after, _, _ = settled_rss(pid)
    growth = during - before
    return dict(held, origin=name, connections=connections, streams=streams,
                file_bytes=size, warm_status=warm_status, heads_seconds=round(heads_seconds, 1),
                statuses={str(k): v for k, v in statuses.items()}, data_bytes=data_bytes,
                client_frames_sent=dict(sent), rss_before_kib=before, fds_before=fds_before,
                rss_growth_kib=growth, per_connection_kib=growth // connections,
                rss_after_close_kib=after)


# --- 2. names under a wildcard, and another sandbox after them ---------------------------------

FLOOD, VICTIM = "flood", "victim"
MAX_IDLE, MAX_IDLE_PER_SANDBOX = 8, 4


def flood_and_victim(bed, peers, max_idle=MAX_IDLE, max_idle_per_sandbox=MAX_IDLE_PER_SANDBOX):
    """An `edit=` for admin_client.with_admin: `flood` (the bed's listener) allows
    *.h2flood.test on `peers.origin` (a WildcardH2Origin); `victim` (a listener and audit file
    of its own) allows allowed.test; the upstream bounds; `peers.dns` (a FloodDnsmasq) as the
    resolver."""
    t, p = bed.tls_port, bed.plain_port

    def edit(config, workdir, admin_port):
        flood = config["sandboxes"][0]
        flood.update(name=FLOOD, ca=os.path.join(workdir, "ca-" + FLOOD), policy="pf")
        config["sandboxes"].append({
            "name": VICTIM, "listen": "%s:%d" % (PROXY_ADDRESS, free_port((PROXY_ADDRESS,))),
            "ca": os.path.join(workdir, "ca-" + VICTIM), "policy": "pv", "mode": "enforce",
            "audit": os.path.join(workdir, "audit-" + VICTIM + ".jsonl")})
        config["policies"] = {
            "pf": {"rules": [{"name": "wildcard", "hosts": ["*." + H2FLOOD_ZONE],
                              "ports": [peers.origin.port], "ips": [H2_ADDRESS + "/32"]}]},
            "pv": {"rules": [{"name": "tls", "hosts": ["allowed.test"], "ports": [t],
                              "ips": ["127.0.0.20/32"]},
                             {"name": "plain", "hosts": ["allowed.test"], "schemes": ["http"],
                              "ports": [p], "ips": ["127.0.0.20/32"]}]},
        }
        config["upstream"].update(max_idle=max_idle, max_idle_per_sandbox=max_idle_per_sandbox)
        config["dns"]["servers"] = ["%s:%d" % (peers.dns.ADDRESS, peers.dns.port)]
    return edit


def get_in_tunnel(address, authority, cafile, path="/whoami.txt", timeout=5):
    """CONNECT, TLS (HTTP/1.1), one GET on a new connection: 200, or "STATUS reason", or what
    went wrong ("timeout", "closed")."""
    try:
        sock, answer, _ = connect_tunnel(address, authority, timeout=timeout)
    except (socket.timeout, TimeoutError):
        return "timeout"
    except (ConnectionClosed, OSError):
        return "closed"
    try:
        if answer.status != 200:
            return "CONNECT %d %s" % (answer.status, answer.sluice_reason)
        host = authority.rsplit(":", 1)[0]
        tls = TLSStream(sock, host, cafile)
        tls.sendall(request_bytes("GET", path, host, keep_alive=False))
        resp = HttpReader(tls).read_response("GET")
        return 200 if resp.status == 200 else "%d %s" % (resp.status, resp.sluice_reason)
    except (socket.timeout, TimeoutError):
        return "timeout"
    except (ConnectionClosed, HandshakeFailed, OSError):
        return "closed"
    finally:
        sock.close()


def idle_flood(sluice, victim, bed, origin_port, names=400, victim_requests=20, bound=None):
    """The flood sandbox (sluice's first listener) asks, one tunnel after another, for
    /whoami.txt of `names` names n<i>.h2flood.test:`origin_port` (an h2 origin on 127.0.0.25:
    each name its own upstream session); it stops at the first timeout. Then the upstreams
    sluice holds are counted (after waiting up to 5 s for them to come down to `bound`), and
    `victim` (a SandboxView allowed allowed.test) makes `victim_requests` requests, each a
    tunnel of its own."""
    pid = sluice.proc.pid
    start = time.monotonic()
    statuses = []
    for i in range(names):
        statuses.append(get_in_tunnel(sluice.address, "n%d.h2flood.test:%d" % (i, origin_port),
                                      sluice.ca_pem))
        if statuses[-1] == "timeout":
            break
    flood_seconds = time.monotonic() - start
    h2_end, h1_ends = ("127.0.0.25", origin_port), [("127.0.0.20", bed.tls_port),
                                                      ("127.0.0.20", bed.plain_port)]

    def held():
        return upstream_sockets(pid, [h2_end]) + upstream_sockets(pid, h1_ends)
    if bound is not None:
        try:
            wait_until(lambda: held() <= bound, 5, "at most %d upstreams" % bound, interval=0.1)
        except TimeoutError:
            pass
    h2_held, h1_held, fds = upstream_sockets(pid, [h2_end]), upstream_sockets(pid, h1_ends), \
        fd_total(pid)
    after = []
    for _ in range(victim_requests):
        after.append(get_in_tunnel(victim.address, "allowed.test:%d" % bed.tls_port,
                                   victim.ca_pem))
        if after[-1] == "timeout" and after.count("timeout") >= 2:
            break  # the rest would wait as long
    return {"names": names, "flood_seconds": round(flood_seconds, 1),
            "flood_statuses": {str(k): v for k, v in collections.Counter(statuses).items()},
            "flood_ok": statuses.count(200), "idle_h2_upstreams": h2_held,
            "idle_h1_upstreams": h1_held, "fds_after_flood": fds,
            "victim_statuses": [str(s) for s in after], "victim_ok": after.count(200),
            "victim_requests": victim_requests}


# --- 3. resets sluice is made to send ----------------------------------------------------------

def nginx_connection_serial(bed):
    """nginx's connection counter now ($connection of a request on a new connection; the bed's
    nginx has one worker): the difference of two readings is the connections nginx accepted in
    between, plus one (the later reading's own)."""
    path = "/__barrier/%s" % uuid.uuid4().hex
    with socket.create_connection(("127.0.0.20", bed.plain_port), timeout=10) as s:
        s.sendall(b"GET %s HTTP/1.1\r\nHost: barrier.invalid\r\nConnection: close\r\n\r\n"
                  % path.encode())
        while s.recv(65536):
            pass
    entry = wait_until(lambda: [e for e in bed.nginx.access("cdn", include_barriers=True)
                                if e["uri"] == path], 20, "nginx barrier")[0]
    return int(entry["connection"])


def made_you_reset(sluice, admin, bed, streams=5000, concurrency=100, seconds=30):
    """One HTTP/2 connection of sbx1 to allowed.test (an HTTP/1.1 origin): each stream a POST
    with `content-length: 1` whose HEADERS go out first and whose DATA, 2 bytes, follows as
    soon as sluice has had a chance to start on the request (one read later), so that nghttp2
    resets it PROTOCOL_ERROR after sluice began dialling. Streams go as fast as sluice resets
    them, `concurrency` in flight, until `streams` were sent, GOAWAY, or `seconds`. sluice
    needs an admin endpoint (its connect histogram counts the dials it finished)."""
    m = uuid.uuid4().hex[:12]
    serial_before = nginx_connection_serial(bed)
    access_before = len(bed.nginx.access("cdn"))
    dials_before = admin.scrape().histogram("sluice_upstream_connect_seconds")["count"]
    r = RawH2(sluice.address, "allowed.test:%d" % bed.tls_port, sluice.ca_pem, replenish=True)
    try:
        r.read_for(5, until=lambda: r.frames_in.get(4, 0) >= 1)  # sluice's SETTINGS
        sent = 0
        start = time.monotonic()

        def answered():
            return len(set(r.resets) | r.ended)
        while sent < streams and r.goaway is None and not r.closed and \
                time.monotonic() - start < seconds:
            room = min(concurrency - (sent - answered()), streams - sent)
            if room > 0:
                ids = [r.take_id() for _ in range(room)]
                r.send(b"".join(r.stream_frames("POST", "/upload/mry-%s-%d" % (m, sid),
                                                [("content-length", "1")], end=False,
                                                stream_id=sid) for sid in ids))
                r.pump(0.002)  # sluice takes the heads up (and dials) before their DATA
                r.send(b"".join(frame(DATA, END_STREAM, sid, b"ab") for sid in ids))
                sent += room
            r.pump(0.005)
        flood_seconds = time.monotonic() - start
        r.read_for(3, until=lambda: answered() >= sent)
    finally:
        r.close()
    resets = collections.Counter(r.resets.values())
    goaway_seconds = None if r.goaway_at is None else r.goaway_at - start
    budget_seconds = goaway_seconds if goaway_seconds is not None else flood_seconds
    dials = admin.scrape().histogram("sluice_upstream_connect_seconds")["count"] - dials_before
    origin_connections = nginx_connection_serial(bed) - serial_before - 1
    requests = [e for e in bed.nginx.access("cdn")[access_before:] if m in e["uri"]]
    return {"streams": streams, "sent": sent, "flood_seconds": round(flood_seconds, 2),
            "goaway": None if r.goaway is None else {
                "code": r.goaway[1], "last_stream_id": r.goaway[0],
                "seconds": round(goaway_seconds, 2)},
            "goaway_enhance_your_calm": bool(r.goaway and r.goaway[1] == ENHANCE_YOUR_CALM),
            "resets_protocol_error": resets.get(1, 0), "resets": dict(resets),
            "heads": len(r.statuses), "closed": r.closed,
            "budget": int(100 + 50 * budget_seconds), "budget_seconds": round(budget_seconds, 2),
            "dials_counted_by_sluice": int(dials), "origin_connections": origin_connections,
            "origin_requests": len(requests)}


# --- 4. frames that are no progress ------------------------------------------------------------

NUDGES = ("ping", "window_update", "priority")


def probe_rules(bed, origin):
    """The bed's policy, and probe.test on `origin` (silent_tls_origin)."""
    return [{"name": "probe", "hosts": ["probe.test"], "ports": [origin.tls_port],
             "ips": [PROBE_ADDRESS + "/32"]}] + bed_rules(bed.tls_port, bed.plain_port)


def _nudge(t, kind, stream_id):
    if kind == "ping":
        t.conn.ping(b"sluice33")
        t._flush()
    elif kind == "window_update":  # one more byte of connection window, each time
        t.conn.increment_flow_control_window(1)
        t._flush()
    else:  # PRIORITY on the stream (or on stream 1, idle, when there is none), raw: h2 4.1
        t.tls.sendall(frame(PRIORITY, 0, stream_id, struct.pack(">IB", 0, 15)))  # sends none


def stalled_progress(sluice, authority, path, kind="ping", idle=2.0, wait=None):
    """An HTTP/2 connection to `authority`: with `path`, one GET whose origin never answers,
    else no stream at all; then one `kind` frame a second. Returns how long until the stream
    was answered (its status) or the connection ended (GOAWAY or close), or None for each
    after `wait` seconds (default 3 x idle + 2)."""
    wait = 3 * idle + 2 if wait is None else wait
    t = H2Tunnel(sluice.address, authority, sluice.ca_pem).start()
    events = collections.Counter()  # what h2 made of sluice's frames (PingAckReceived, ...)
    on = t._on

    def counting(event):
        events[type(event).__name__] += 1
        on(event)
    t._on = counting
    try:
        sid = t.request("GET", path) if path else None
        start = time.monotonic()
        nudges, next_nudge = 0, start + 1
        while time.monotonic() - start < wait and t.terminated is None and not t.closed and \
                not (sid and t.streams[sid].done):
            if time.monotonic() >= next_nudge:
                _nudge(t, kind, sid or 1)
                nudges += 1
                next_nudge += 1
            t._pump(min(next_nudge, start + wait))
        seconds = time.monotonic() - start
        s = t.streams.get(sid) if sid else None
        return {"kind": kind, "stream": bool(sid), "nudges": nudges, "wait": wait,
                "idle_timeout": idle,
                "answered_after": round(seconds, 2) if s is not None and s.done else None,
                "status": s.status if s is not None else None,
                "reason": s.sluice_reason if s is not None else None,
                "ended_after": round(seconds, 2) if t.terminated is not None or t.closed
                else None,
                "goaway": None if t.terminated is None else t.terminated.error_code,
                "events": dict(events)}
    finally:
        t.close()


# --- 5. refusals kept while the audit file cannot be written -----------------------------------

# Bytes of records kept per audit file before new connections of its sandboxes are refused
# (docs/audit.md#when-the-audit-file-cannot-be-written).
PENDING_LIMIT = 4 << 20


def audit_on_dev_full(config, workdir, admin_port):
    """An `edit=` for admin_client.with_admin: the audit file cannot be written."""
    config["audit"]["path"] = "/dev/full"


def audit_pending(admin, path):
    scrape = admin.scrape()
    return (int(scrape.value("sluice_audit_pending_records", path=path)),
            int(scrape.value("sluice_audit_pending_bytes", path=path)))


def audit_flood(sluice, admin, bed, gateway, streams=2000, path_bytes=8000, seconds=30,
                stop_above=None):
    """sbx1's audit file is one that refuses writes (`audit.path: /dev/full`). One HTTP/2
    connection is opened while nothing has failed; then a refused CONNECT on another connection
    makes the first write fail; then the open connection sends GETs (paths of `path_bytes`
    bytes: each record keeps 4 KiB of its url), 100 in flight, each refused 503 and each
    refusal a kept record, until `streams`, GOAWAY, `seconds`, or more than `stop_above` bytes
    kept."""
    audit_path = sluice.config["audit"]["path"]
    pid = sluice.proc.pid
    r = RawH2(sluice.address, "allowed.test:%d" % bed.tls_port, sluice.ca_pem,
              stream_window=1 << 20, replenish=True)
    try:
        r.read_for(5, until=lambda: r.frames_in.get(4, 0) >= 1)
        # Refused at the CONNECT: its record is the first that cannot be written.
        refused = gateway.tunnel("other.test", connect_headers=AT_CONNECT)
        admin.wait_for(lambda s: None if s.value("sluice_audit_unavailable", path=audit_path)
                       == 1 else "the audit file still counts as writable", "audit unavailable")
        records_before, bytes_before = audit_pending(admin, audit_path)
        rss_before = rss_kib(pid)
        path = "/" + "a" * path_bytes
        sent, start, pending = 0, time.monotonic(), (records_before, bytes_before)
        next_look = 250

        def answered():
            return len(set(r.resets) | r.ended)
        while sent < streams and r.goaway is None and not r.closed and \
                time.monotonic() - start < seconds:
            room = min(100 - (sent - answered()), streams - sent)
            if room > 0:
                r.send(b"".join(r.stream_frames("GET", "%s?%d" % (path, sent + i))
                                for i in range(room)))
                sent += room
            r.pump(0.005)
            if sent >= next_look:
                next_look += 250
                pending = audit_pending(admin, audit_path)
                if stop_above is not None and pending[1] > stop_above:
                    break
        r.read_for(3, until=lambda: answered() >= sent)
        elapsed = time.monotonic() - start
        pending = audit_pending(admin, audit_path)
        rss_after = rss_kib(pid)
    finally:
        r.close()
    statuses = collections.Counter(r.statuses.values())
    return {"connect_status": refused.connect.status, "sent": sent,
            "seconds": round(elapsed, 2),
            "statuses": {str(k): v for k, v in statuses.items()},
            "resets": dict(collections.Counter(r.resets.values())),
            "goaway": None if r.goaway is None else r.goaway[1], "closed": r.closed,
            "pending_records_before": records_before, "pending_bytes_before": bytes_before,
            "pending_records": pending[0], "pending_bytes": pending[1],
            "rss_growth_kib": rss_after - rss_before, "rss_before_kib": rss_before}
