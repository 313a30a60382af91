"""Issue 33: what one hostile sandbox speaking HTTP/2 can make sluice hold or do, against the
bounds sluice promises (docs/wire.md#http2 "Flow control and memory" and "Floods",
docs/wire.md#limits-and-timeouts, docs/wire.md#upstreams "Idle upstream bounds",
docs/audit.md#when-the-audit-file-cannot-be-written). One test per finding, each added with
its fix; the scenarios and their figures are h2_scenarios.py's, which bench/h2_bounds prints
for any binary.

1. Memory: 100 streams of an 8 MiB file whose client never sends WINDOW_UPDATE hold at most
   2 MiB of sluice's RSS per connection (16 MiB under ASan, whose quarantine is turned off),
   toward an HTTP/1.1 origin (allowed.test) or an h2 one (h2.test); 16 such connections, one
   sandbox at its `max_connections`, at most 16 x that.
2. Idle upstreams: 400 names under a wildcard whose origin speaks h2 (an nginx of the module's
   own on 127.0.0.25 for *.h2flood.test, and a dnsmasq whose zone has that tree) leave at most
   `upstream.max_idle_per_sandbox` idle upstreams, and with 256 descriptors another sandbox is
   served afterwards.
3. Provoked resets (MadeYouReset, CVE-2025-8671): streams that nghttp2 must reset for the
   client (`content-length: 1`, 2 bytes of DATA) count like the client's own RST_STREAMs: GOAWAY
   ENHANCE_YOUR_CALM within that budget (100, then 50 a second), and no more upstream dials.
4. Progress: PING, WINDOW_UPDATE or PRIORITY once a second is no request progress: a stream
   whose origin is silent gets 504 after idle_timeout, a connection with no stream GOAWAY.
5. Audit fail-closed: while the audit file cannot be written, one open HTTP/2 connection
   cannot make sluice keep records past the cap (4 MiB, and per connection one refusal and
   the records of its streams in flight): its first refusal is followed by GOAWAY, and the
   streams it opens after it are refused unprocessed (REFUSED_STREAM) and only counted.

Oracles: sluice's /proc (RSS, descriptors, its sockets to the origins), its /metrics (streams
in flight, finished connects, kept audit records), nginx's connection counter ($connection,
one worker) and access log, and the frames sluice sent (GOAWAY, RST_STREAM, heads).
"""
from admin_client import Admin, with_admin
import os
import tempfile
from types import SimpleNamespace

import pytest

from gateway import remove_dir
from h2_hostile import WildcardH2Origin, silent_tls_origin, start_flood_dnsmasq
from h2_scenarios import (MAX_IDLE_PER_SANDBOX, NUDGES, PENDING_LIMIT, VICTIM, audit_flood,
                          audit_on_dev_full, flood_and_victim, hold_windows, idle_flood,
                          made_you_reset, probe_rules, stalled_progress)
from sluice_proc import is_asan

KIB = 1024
PER_CONNECTION_KIB = 2 * KIB        # the target of issue 33: 2 MiB per hostile connection
# ASan (its quarantine off: memory_gw): redzones and shadow memory multiply what the 100
# streams' small objects take about fivefold (9 to 10 MiB measured for what is 1.7 to 1.9 MiB
# without ASan); the product's bound is the line above, asserted in the gcc tree.
PER_CONNECTION_ASAN_KIB = 16 * KIB
SANDBOX_CONNECTIONS = 16            # limits.per_sandbox.max_connections
REFUSED_STREAM = 0x7
RESET_BURST, RESET_RATE, STREAMS_IN_FLIGHT = 100, 50, 100
IDLE = 2.0                          # limits.idle_timeout of finding 4


def mib(kib):
    return "%.1f MiB" % (kib / KIB)


# --- 1. memory --------------------------------------------------------------------------------

def memory_gw(start_sluice, sluice_binary):
    # Under ASan a freed block stays in its quarantine (256 MiB by default) instead of being
    # reused, so RSS counts every allocation ever made: without the quarantine it counts what
    # is held (with ASan's redzones and shadow, hence the larger bound).
    # One worker: the warm-up request then readies the worker the hostile connections land on
    # (its malloc arena, TLS and resolver caches). With two, a first connection on the other
    # worker counted that worker's first use (about 0.1 MiB, once per worker) as the
    # connection's. Which worker serves a burst is test_h2_upstream.py's concern.
    env = {"SLUICE_WORKERS": "1"}
    if is_asan(sluice_binary):
        env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + \
            ":quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
    s = start_sluice(edit=with_admin(), env=env,
                     limits={"per_sandbox": {"max_connections": SANDBOX_CONNECTIONS}})
    return s, Admin(s)


def per_connection_kib(s):
    return PER_CONNECTION_ASAN_KIB if is_asan(s.binary) else PER_CONNECTION_KIB


def held_as_told(f):
    """The client did what the scenario says: every stream's HEADERS went out, and not one
    WINDOW_UPDATE."""
    sent = f["client_frames_sent"]
    assert sent.get("HEADERS") == f["connections"] * f["streams"], f
    assert "WINDOW_UPDATE" not in sent, f
    assert f["warm_status"] == 200, f


def figures(f):
    return ("RSS %s -> %s (+%s, %s per connection), %d -> %d descriptors, %d upstream "
            "sockets, streams in flight: %d client / %d origin, answers %r" % (
                mib(f["rss_before_kib"]), mib(f["rss_during_kib"]), mib(f["rss_growth_kib"]),
                mib(f["per_connection_kib"]), f["fds_before"], f["fds_during"],
                f["upstream_sockets"], f["client_streams_active"], f["origin_streams_active"],
                f["statuses"]))


@pytest.mark.parametrize("origin", ["allowed.test", "h2.test"])
def test_streams_whose_window_never_comes_back_hold_little_memory(start_sluice, sluice_binary,
                                                                 bed, origin):
    """One connection, 100 GETs of an 8 MiB file, and never a WINDOW_UPDATE: sluice reads
    from the origin only what its client could take, so the connection holds at most 2 MiB."""
    s, admin = memory_gw(start_sluice, sluice_binary)
    f = hold_windows(s, admin, bed, origin, connections=1)
    held_as_told(f)
    assert f["per_connection_kib"] <= per_connection_kib(s), \
        "one HTTP/2 connection that returns no window holds %s of sluice's memory (at most " \
        "%s): %s" % (mib(f["per_connection_kib"]), mib(per_connection_kib(s)), figures(f))


def test_a_sandbox_at_its_connection_limit_holds_its_connections_share(start_sluice,
                                                                      sluice_binary, bed):
    """16 such connections of one sandbox (its max_connections) to the h2 origin: at most
    16 x 2 MiB in all."""
    s, admin = memory_gw(start_sluice, sluice_binary)
    f = hold_windows(s, admin, bed, "h2.test", connections=SANDBOX_CONNECTIONS)
    held_as_told(f)
    bound = SANDBOX_CONNECTIONS * per_connection_kib(s)
    assert f["rss_growth_kib"] <= bound, \
        "one sandbox at its %d connections holds %s of sluice's memory (at most %s): %s" % (
            SANDBOX_CONNECTIONS, mib(f["rss_growth_kib"]), mib(bound), figures(f))


# --- 2. idle upstreams of a wildcard h2 origin --------------------------------------------------

@pytest.fixture(scope="module")
def h2flood(bed):
    """An h2 origin for every name under h2flood.test, and a resolver that knows them."""
    directory = tempfile.mkdtemp(prefix="sluice-h2flood-")
    try:
        dns = start_flood_dnsmasq(os.path.join(directory, "dns"))
        try:
            origin = WildcardH2Origin(bed, os.path.join(directory, "nginx")).start()
            try:
                yield SimpleNamespace(dns=dns, origin=origin)
            finally:
                origin.stop()
        finally:
            dns.stop()
    finally:
        remove_dir(directory)


def test_a_flood_of_h2_names_keeps_idle_upstreams_within_bounds(start_sluice, bed, h2flood):
    """max_idle 8, max_idle_per_sandbox 4, 256 descriptors: after 400 names of the flood
    sandbox (each its own h2 upstream session), sluice holds at most 4 idle upstreams, and 20
    requests of the victim sandbox are all answered."""
    s = start_sluice(edit=with_admin(flood_and_victim(bed, h2flood)), nofile=256)
    f = idle_flood(s, s.sandbox_view(VICTIM), bed, h2flood.origin.port, names=400,
                   victim_requests=20, bound=MAX_IDLE_PER_SANDBOX)
    held = f["idle_h2_upstreams"] + f["idle_h1_upstreams"]
    report = "after %d names (%r), sluice holds %d idle h2 and %d h1 upstreams and %d of its " \
             "256 descriptors; the victim's %d requests: %r" % (
                 f["names"], f["flood_statuses"], f["idle_h2_upstreams"],
                 f["idle_h1_upstreams"], f["fds_after_flood"], f["victim_requests"],
                 f["victim_statuses"])
    assert f["victim_ok"] == f["victim_requests"], report
    assert held <= MAX_IDLE_PER_SANDBOX, report
    assert f["flood_ok"] == f["names"], report


# --- 3. resets sluice is made to send -----------------------------------------------------------

def test_resets_the_client_provokes_count_like_its_own(start_sluice, bed):
    """5,000 streams each reset by sluice (content-length 1, 2 bytes of DATA), sent as fast as
    sluice takes them: GOAWAY ENHANCE_YOUR_CALM once the reset budget (100, then 50 a second)
    is spent, and no more streams reset or upstream connections made than that budget and the
    100 streams in flight when it ran out."""
    s = start_sluice(edit=with_admin())
    f = made_you_reset(s, Admin(s), bed, streams=5000)
    limit = RESET_BURST + RESET_RATE * f["budget_seconds"] + STREAMS_IN_FLIGHT
    report = "%d streams sent in %.1fs: %d reset PROTOCOL_ERROR by sluice, GOAWAY %r; the " \
             "origin accepted %d connections (sluice finished %d connects) and got %d requests;" \
             " the budget allows %d" % (
                 f["sent"], f["flood_seconds"], f["resets_protocol_error"], f["goaway"],
                 f["origin_connections"], f["dials_counted_by_sluice"], f["origin_requests"],
                 limit)
    assert f["resets_protocol_error"] > 0, report  # the flood did provoke resets
    assert f["goaway_enhance_your_calm"], report
    assert f["resets_protocol_error"] <= limit, report
    assert f["origin_connections"] <= limit, report


# --- 4. frames that are no progress -------------------------------------------------------------

@pytest.fixture(scope="module")
def silent_origin(bed):
    origin = silent_tls_origin(bed)
    yield origin
    origin.stop()


def assert_about(seconds, limit, what):
    assert seconds is not None and 0.8 * limit <= seconds <= 3 * limit, \
        "%s after %s; the limit is %.1fs (expected %.2f..%.2fs)" % (
            what, "%.2fs" % seconds if seconds is not None else "never", limit, 0.8 * limit,
            3 * limit)


@pytest.mark.parametrize("kind", NUDGES)
def test_control_frames_do_not_hold_off_the_upstream_timeout(start_sluice, bed, silent_origin,
                                                             kind):
    """A stream whose origin reads the request and never answers, while the client sends a
    `kind` frame a second: 504 upstream_timeout about idle_timeout after the request."""
    s = start_sluice(rules=probe_rules(bed, silent_origin), limits={"idle_timeout": "2s"})
    stalled = silent_origin.counts["stall"]
    f = stalled_progress(s, "probe.test:%d" % silent_origin.tls_port, "/stall/h2-" + kind,
                         kind, idle=IDLE)
    assert silent_origin.counts["stall"] == stalled + 1, "the request never reached the origin"
    if kind == "ping":
        assert f["events"].get("PingAckReceived"), f  # the frames reached sluice's nghttp2
    what = "a stream waiting on a silent origin, with %d %s frames, answered %r" % (
        f["nudges"], kind, (f["status"], f["reason"]))
    assert_about(f["answered_after"], IDLE, what)
    assert (f["status"], f["reason"]) == (504, "upstream_timeout"), f


@pytest.mark.parametrize("kind", NUDGES)
def test_control_frames_do_not_keep_an_idle_connection_open(start_sluice, bed, kind):
    """A connection with no stream at all, and a `kind` frame a second: GOAWAY about
    idle_timeout after it opened."""
    s = start_sluice(limits={"idle_timeout": "2s"})
    f = stalled_progress(s, "allowed.test:%d" % bed.tls_port, None, kind, idle=IDLE)
    if kind == "ping":
        assert f["events"].get("PingAckReceived"), f  # the frames reached sluice's nghttp2
    assert_about(f["ended_after"], IDLE, "an idle connection with %d %s frames ended (GOAWAY "
                 "%r)" % (f["nudges"], kind, f["goaway"]))
    assert f["goaway"] is not None, "closed without GOAWAY: %r" % f


# --- 5. refusals kept while the audit file cannot be written ------------------------------------

def test_one_h2_connection_cannot_keep_refusals_past_the_cap(make_gw, bed):
    """audit.path /dev/full; an HTTP/2 connection opened before the first write failed keeps
    opening streams (8 KB paths, so each kept record holds 4 KiB of url). Each is refused 503,
    and each refusal is a record kept: past the cap (4 MiB, and two records per connection
    open) the connection must get no more, e.g. GOAWAY."""
    g = make_gw(edit=with_admin(audit_on_dev_full))
    bound = PENDING_LIMIT + 64 * KIB
    f = audit_flood(g.sluice, Admin(g.sluice), bed, g, streams=2000, stop_above=2 * bound)
    assert f["connect_status"] == 403, f  # the refused CONNECT whose record failed
    report = "%d streams on one connection in %.1fs, answered %r (resets %r), GOAWAY %r: " \
             "%d records (%s) kept, RSS +%s" % (
                 f["sent"], f["seconds"], f["statuses"], f["resets"], f["goaway"],
                 f["pending_records"], mib(f["pending_bytes"] // KIB),
                 mib(f["rss_growth_kib"]))
    assert f["pending_bytes"] <= bound, report
    assert f["statuses"].get("503") == 1, report  # the one refusal kept
    assert f["goaway"] == 0, report  # GOAWAY NO_ERROR after it
    refused = Admin(g.sluice).scrape().value("sluice_audit_refused_streams_total",
                                             path=g.sluice.config["audit"]["path"])
    assert refused == f["resets"].get(REFUSED_STREAM, 0), report
