"""kill -9 under load (issue 12): sluice is killed by SIGKILL while clients are mid-request,
started again on the same config and audit file, loaded again, then stopped cleanly. The audit
log's hash chain verifies across the restart (`sluice audit verify` exits 0: the restarted
process continues the chain from the last complete line), and every request whose client
received a complete response, before or after the kill, has its one record with the status
the client saw (a record is handed to the OS before the answer it describes completes, so a
kill cannot take it). Requests cut by the kill need no record.
"""
import os
import signal
import subprocess

from audit import check_shape
from netutil import wait_until
from soak_load import LoadThreads, Plan, Proxy, Request
import soak_bed as sb
from tlsraw import AT_CONNECT

OK = frozenset({(200, True)})
THREADS = 6
ANSWERED_PER_PHASE = 300


def draw(bed):
    def plan(rng):
        roll = rng.random()
        get = [Request("GET", rng.choice(["/whoami.txt", "/small.bin"]) + "?m={m}", expect=OK)
               for _ in range(rng.randint(1, 4))]
        if roll < 0.45:
            return Plan("tunnel", "tunnel", "allowed.test", bed.tls_port, get)
        if roll < 0.9:
            return Plan("forward", "forward", "allowed.test", bed.plain_port, get)
        # Refused at the CONNECT (asked for): one record per marker.
        return Plan("denied", "tunnel", "m{m}.denied.test", bed.tls_port, connect_marker=True,
                    connect_expect=frozenset({403}), connect_fields=AT_CONNECT)
    return plan


def load_until(proxy, bed, answered, seed):
    """Starts load and returns it once `answered` complete responses have arrived."""
    load = LoadThreads([proxy], draw(bed), THREADS, seed=seed).start()
    wait_until(lambda: sum(o.complete for o in load.outcomes) >= answered, 60,
               "%d complete responses through sluice" % answered)
    return load


def test_sigkill_under_load_keeps_every_answered_record_and_the_chain(start_sluice, bed,
                                                                      sluice_binary):
    s = start_sluice()
    proxy = Proxy("sbx1", s.address, s.ca_pem)

    before = load_until(proxy, bed, ANSWERED_PER_PHASE, seed=1)
    os.kill(s.proc.pid, signal.SIGKILL)  # by PID, with requests in flight
    assert s.proc.wait(timeout=30) == -signal.SIGKILL
    killed = before.stop()
    lines_at_kill = len(s.audit.lines())

    s.start()  # the same config file: the same listener, CA and audit file
    after = load_until(proxy, bed, ANSWERED_PER_PHASE, seed=2)
    restarted = after.stop()
    assert s.stop() == 0, s.stderr()[-3000:]
    s.exit_checked = True

    path = s.config["audit"]["path"]
    res = subprocess.run([sluice_binary, "audit", "verify", path], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, "the chain breaks across the restart: %s %s" % (res.stdout,
                                                                               res.stderr)
    records = s.audit.records()
    assert len(records) > lines_at_kill >= ANSWERED_PER_PHASE // 4, (len(records), lines_at_kill)
    by_marker = sb.records_by_marker(records)
    complete = [o for o in killed + restarted if o.complete]
    missing = sb.unrecorded(complete, by_marker)
    assert not missing, "%d complete responses have no record (or not one as answered):\n%s" % (
        len(missing), "\n".join(missing[:20]))
    surprises = sb.unexpected([o for o in restarted if o.status is not None] +
                              [o for o in killed if o.complete], by_marker)
    assert not surprises, "\n".join(sb.describe(o, recs) for o, recs in surprises[:20])
    # Cut by the kill: a request under way (a refused connect came after it, and counts not).
    cut = [o for o in killed if not o.complete and "ConnectionRefused" not in (o.error or "")]
    if os.environ.get("SLUICE_SOAK_FIGURES"):
        print("\nkill -9: %d complete responses before the kill, %d requests cut by it, %d "
              "complete after the restart; %d records (%d before the restart); verify: %s" % (
                  sum(o.complete for o in killed), len(cut), sum(o.complete for o in restarted),
                  len(records), lines_at_kill, res.stdout.strip()))
    assert cut, "no request was under way at the kill"
    for rec in records:
        check_shape(rec)


def test_a_record_torn_by_a_kill_is_set_aside_at_restart(start_sluice, bed, sluice_binary):
    """A flush cut by SIGKILL between pages leaves a torn last line. The restarted sluice moves
    it to PATH.torn (kept as found) and continues the chain on a line of its own, so the log
    verifies and every complete response keeps its record."""
    s = start_sluice()
    proxy = Proxy("sbx1", s.address, s.ca_pem)
    before = load_until(proxy, bed, 20, seed=3)
    os.kill(s.proc.pid, signal.SIGKILL)
    assert s.proc.wait(timeout=30) == -signal.SIGKILL
    killed = before.stop()
    path = s.config["audit"]["path"]
    fragment = '{"ts":"2026-12-01T16:28:01.123Z","sandbox":"sbx1","co'
    with open(path, "a") as f:
        f.write(fragment)  # what a write(2) stopped at a page boundary leaves

    s.start()
    after = load_until(proxy, bed, 20, seed=4)
    restarted = after.stop()
    assert s.stop() == 0, s.stderr()[-3000:]
    s.exit_checked = True

    res = subprocess.run([sluice_binary, "audit", "verify", path], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, (res.stdout, res.stderr)
    with open(path + ".torn") as f:
        assert f.read() == fragment + "\n"
    assert "last line was incomplete" in s.stderr()
    missing = sb.unrecorded([o for o in killed + restarted if o.complete],
                            sb.records_by_marker(s.audit.records()))
    assert not missing, "\n".join(missing[:20])
