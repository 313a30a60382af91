"""docs/cli.md#signals and exit codes: SIGTERM and SIGINT stop accepting, let requests in flight
finish for up to limits.shutdown_grace, flush the audit log and exit 0 (README: a second signal
closes everything at once); `run` exits 2 on a bad config, 1 when it cannot start (address in
use, unreadable CA), and prints where the CA certificate is and how to trust it.
"""
import os
import re
import signal
import socket
import ssl
import subprocess
import time

import pytest

import clients
import content as C
import expect
from gateway import Gateway
from http1 import request_bytes
from netutil import (DIE_WITH_US, clean_env, free_port, listener, read_text, read_until_closed,
                     signal_handled, signal_pending, stop_process, wait_until)
from sluice_proc import PROXY_ADDRESS, make_config, run_once, write_config

BIG_RATE = "80M"     # curl --limit-rate: the 200 MiB file takes about 2.5 s
SLOW_RATE = "2M"     # far too slow to finish within any grace used here
SIGNALS = [pytest.param(signal.SIGTERM, id="SIGTERM"), pytest.param(signal.SIGINT, id="SIGINT")]


def send(sluice, sig):
    """Send `sig` to this sluice (by PID) and wait until it was delivered; returns when."""
    wait_until(lambda: signal_handled(sluice.proc.pid, sig), 5,
               "sluice to install its handler for signal %d" % sig)
    os.kill(sluice.proc.pid, sig)
    at = time.monotonic()
    wait_until(lambda: not signal_pending(sluice.proc.pid, sig), 5, "the signal's delivery")
    return at


def wait_exit(sluice, timeout, since):
    """The exit status and the seconds from `since` to the exit; fails if still running."""
    try:
        code = sluice.proc.wait(timeout=max(0.0, since + timeout - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise AssertionError("sluice still running %.1fs after the signal; stderr:\n%s"
                             % (time.monotonic() - since, sluice.stderr()[-3000:]))
    sluice.exit_code = code
    sluice.exit_checked = True  # the caller asserts it; the fixture's teardown need not
    return code, time.monotonic() - since


def start_download(g, scratch, rate, name="big.out"):
    return clients.CurlDownload(g.url("allowed.test", "/big.bin"), os.path.join(scratch, name),
                                "--limit-rate", rate, proxy=g.sluice.proxy_url,
                                cacert=g.sluice.ca_pem, timeout=120)


def wait_flowing(dl, at_least=4 << 20):
    wait_until(lambda: dl.size() >= at_least or dl.proc.poll() is not None, 30,
               "the download through sluice to be under way")
    assert dl.proc.poll() is None and dl.size() < C.BIG_SIZE, \
        "the download ended before the signal: %s" % dl.stderr


class StalledDownload:
    """GET /big.bin over a tunnel, read the head and the first MiB, then stop reading: a
    download at 0 B/s that no grace can see finished (TCP backpressure holds sluice's writes).
    finish() then reads whatever arrives, as fast as it can, until the end."""

    def __init__(self, s, bed):
        self.sock, self.tls, reader = clients.open_tls_tunnel(
            s.address, "allowed.test:%d" % bed.tls_port, s.ca_pem)
        self.tls.sendall(request_bytes("GET", "/big.bin", "allowed.test", keep_alive=False))
        head = reader.read_head()
        assert head.status == 200, head
        self.body_bytes = len(reader.buf)  # body bytes that came with the head
        while self.body_bytes < 1 << 20:
            self.body_bytes += len(self.tls.recv())

    def finish(self, timeout=5):
        """Read to the end; returns how it ended: "eof", "reset" or "timeout"."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.tls.recv()
                if not data:
                    return "eof"
                self.body_bytes += len(data)
        except (ConnectionResetError, BrokenPipeError):
            return "reset"
        except (socket.timeout, TimeoutError):
            return "timeout"
        except ssl.SSLError:
            return "reset"
        finally:
            self.sock.close()


def new_connection_outcome(address, timeout=2.0):
    """Connect to the listener and send a CONNECT: ("refused", b""), or how the connection
    ended within `timeout` and the bytes it got ("eof"/"reset"/"timeout", data)."""
    try:
        sock = socket.create_connection(address, timeout=timeout)
    except ConnectionRefusedError:
        return "refused", b""
    try:
        try:
            sock.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
        except OSError:
            return "reset", b""
        data, how, _ = read_until_closed(sock, timeout)
        return how, data
    finally:
        sock.close()


# --- draining --------------------------------------------------------------------------------

def test_sigterm_lets_a_download_in_flight_finish(start_sluice, bed, scratch):
    """Edge case: SIGTERM while a 200 MiB download runs (about 2.5 s, grace 10 s): the body
    arrives byte-exact, the request is audited, and sluice exits 0 once the download is
    done."""
    s = start_sluice(limits={"shutdown_grace": "10s"})
    g = Gateway(s, bed)
    mark = g.audit.mark()
    url = g.url("allowed.test", "/big.bin")
    dl = start_download(g, scratch, BIG_RATE)
    try:
        wait_flowing(dl)
        at = send(s, signal.SIGTERM)
        size_at_signal = dl.size()
        rc = dl.wait(60)
        done = time.monotonic()
    finally:
        dl.stop()
    assert (rc, dl.http_code) == (0, 200), "curl: rc %d, %s" % (rc, dl.stderr)
    assert size_at_signal < C.BIG_SIZE
    assert (os.path.getsize(dl.out_path), dl.sha256()) == (C.BIG_SIZE, bed.content.big_sha256)
    code, seconds = wait_exit(s, 10 + 3, at)
    assert code == 0, "exit %d; stderr:\n%s" % (code, s.stderr()[-3000:])
    assert seconds < (done - at) + 3, "sluice lingered %.1fs after the last request ended" % (
        seconds - (done - at))
    rec = g.audit.one(mark, lambda r: r["url"] == url, timeout=1)
    expect.record(rec, decision="allow", status=200, resp_bytes=C.BIG_SIZE,
                  resp_sha256=bed.content.big_sha256)


def test_no_new_connection_is_accepted_after_sigterm(start_sluice, bed, scratch):
    """Edge case: while the drain waits for a download in flight (grace 10 s), a new client
    connects to the listener: it is refused, or closed without an answer, within 2 s (not
    left in the listen queue until sluice exits)."""
    s = start_sluice(limits={"shutdown_grace": "10s"})
    g = Gateway(s, bed)
    dl = start_download(g, scratch, SLOW_RATE)
    try:
        wait_flowing(dl, 256 << 10)
        send(s, signal.SIGTERM)
        # Delivered is not yet handled: the main loop takes the signal on its next turn, and
        # says so once every worker has been told to take nothing new.
        wait_until(lambda: "no new connections" in s.stderr(), 5, "sluice to begin its drain")
        assert s.proc.poll() is None, "sluice exited with a download in flight"
        how, data = new_connection_outcome(s.address)
        still_draining = s.proc.poll() is None
        queued = listener(*s.address)
    finally:
        dl.stop()
    # The drain's last connection is gone: sluice ends by itself (no further signal).
    code, _ = wait_exit(s, 5, time.monotonic())
    assert code == 0, "exit %d; stderr:\n%s" % (code, s.stderr()[-3000:])
    assert still_draining, "sluice exited before the new connection was judged"
    assert data == b"", "a connection made after the signal was answered: %r" % data[:200]
    assert how in ("refused", "eof", "reset"), \
        "a connection made after the signal was neither refused nor closed within 2 s: the " \
        "listening socket is still open (%r) and holds it unanswered" % (queued,)


@pytest.mark.parametrize("sig", SIGNALS)
def test_signal_with_only_an_idle_keepalive_connection_exits_promptly(start_sluice, bed, sig):
    """Edge case: the only connection is an idle keep-alive tunnel (its request answered);
    SIGTERM/SIGINT with a 10 s grace: nothing is in flight, so sluice exits 0 within 3 s, and
    the client sees its session end."""
    s = start_sluice(limits={"shutdown_grace": "10s", "idle_timeout": "30s"})
    sock, tls, reader = clients.open_tls_tunnel(s.address, "allowed.test:%d" % bed.tls_port,
                                                s.ca_pem)
    try:
        tls.sendall(request_bytes("GET", "/whoami.txt", "allowed.test"))
        resp = reader.read_response()
        assert (resp.status, resp.body) == (200, b"allowed.test\n")
        at = send(s, sig)
        code, seconds = wait_exit(s, 3, at)
        assert code == 0, "exit %d; stderr:\n%s" % (code, s.stderr()[-3000:])
        tail, how = reader.read_to_close(timeout=2)
        assert (tail, how) in ((b"", "eof"), (b"", "reset")), (tail[:100], how)
    finally:
        sock.close()


@pytest.mark.parametrize("sig", SIGNALS)
def test_signal_cuts_a_download_that_outlasts_the_grace(start_sluice, bed, sig):
    """Edge case: a download that cannot finish within shutdown_grace (1 s; the client has
    stopped reading): sluice waits out the grace, cuts the connection and exits 0 within
    grace + 2 s."""
    s = start_sluice(limits={"shutdown_grace": "1s"})
    dl = StalledDownload(s, bed)
    at = send(s, sig)
    code, seconds = wait_exit(s, 1 + 2, at)
    how = dl.finish()
    assert code == 0, "exit %d; stderr:\n%s" % (code, s.stderr()[-3000:])
    assert seconds >= 0.8, "sluice exited %.2fs after the signal: the grace is 1 s" % seconds
    assert how in ("eof", "reset"), "the download's connection is still open after the exit"
    assert dl.body_bytes < C.BIG_SIZE, "the download was not cut"


def test_download_cut_at_shutdown_is_audited(start_sluice, bed):
    """Edge case: the request cut when the grace runs out was forwarded upstream and partly
    answered, so it has its audit record in the flushed log (docs/audit.md: one audit record per
    request; docs/wire.md#denials: a failure after the response head went out can only cut the
    connection, and the audit record says why)."""
    s = start_sluice(limits={"shutdown_grace": "1s"})
    g = Gateway(s, bed)
    mark = g.audit.mark()
    url = g.url("allowed.test", "/big.bin")
    dl = StalledDownload(s, bed)
    at = send(s, signal.SIGTERM)
    code, _ = wait_exit(s, 1 + 2, at)
    dl.finish()
    assert code == 0
    assert dl.body_bytes < C.BIG_SIZE
    recs = [r for r in g.audit.since(mark) if r["url"] == url]
    assert len(recs) == 1, "the request cut at shutdown (forwarded upstream, 200 sent, %d of " \
        "%d body bytes delivered) has %d audit records; the log after the mark: %r" % (
            dl.body_bytes, C.BIG_SIZE, len(recs), g.audit.since(mark))
    expect.record(recs[0], method="GET", status=200)
    assert recs[0]["resp_bytes"] is None or recs[0]["resp_bytes"] < C.BIG_SIZE, recs[0]


@pytest.mark.parametrize("sig", SIGNALS)
def test_second_signal_during_drain_exits_at_once(start_sluice, bed, sig):
    """Edge case: a second SIGTERM/SIGINT while the drain waits for a download that is not
    finishing (grace 10 s): sluice closes everything at once and exits 0."""
    s = start_sluice(limits={"shutdown_grace": "10s"})
    dl = StalledDownload(s, bed)
    send(s, sig)
    assert s.proc.poll() is None, "sluice exited with a download in flight"
    at = send(s, sig)
    code, seconds = wait_exit(s, 1.5, at)
    how = dl.finish()
    assert code == 0, "exit %d; stderr:\n%s" % (code, s.stderr()[-3000:])
    assert how in ("eof", "reset") and dl.body_bytes < C.BIG_SIZE, "the download was not cut"


@pytest.mark.parametrize("sig", SIGNALS)
def test_burst_of_signals_still_exits_0(start_sluice, sig):
    """Edge case: the signal repeated every 0.2 ms until sluice is gone (an impatient operator,
    a supervisor that re-sends): the first drains, the second closes everything, the rest
    must not kill the process on its way out. Ten rounds: each must end with exit 0."""
    rounds = 10
    codes = []
    for _ in range(rounds):
        s = start_sluice(limits={"shutdown_grace": "10s"})
        wait_until(lambda: signal_handled(s.proc.pid, sig), 5,
                   "sluice to install its handler for signal %d" % sig)
        started = time.monotonic()
        while s.proc.poll() is None and time.monotonic() - started < 10:
            try:
                os.kill(s.proc.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(0.0002)  # spaces the signals; nothing waits on it
        code, _ = wait_exit(s, 5, started)
        codes.append(code)
    assert codes == [0] * rounds, "exit statuses %r (negative: killed by that signal); last " \
        "stderr:\n%s" % (codes, s.stderr()[-1500:])


@pytest.mark.parametrize("sig", SIGNALS)
def test_signal_the_moment_it_is_taken_in_charge_exits_0(sluice_binary, bed, scratch, sig):
    """Edge case: a supervisor that signals the instant /proc shows the signal taken in charge.
    sluice blocks it while its workers start, before its handler exists; a signal sent then
    must wait for the handler, not kill the process by the default action once unblocked.
    Twenty rounds, each polling /proc as fast as it can: each ends with exit 0."""
    config, _ = config_in(bed, scratch, limits={"shutdown_grace": "1s"})
    path = write_config(config, os.path.join(scratch, "sluice.yaml"))
    codes = []
    for _ in range(20):
        proc = subprocess.Popen(DIE_WITH_US + [sluice_binary, "run", "-c", path], cwd=scratch,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=clean_env())
        try:
            deadline = time.monotonic() + 20
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    if signal_handled(proc.pid, sig):
                        break
                except (FileNotFoundError, ProcessLookupError):
                    break
            os.kill(proc.pid, sig)
            codes.append(proc.wait(timeout=20))
        finally:
            if proc.poll() is None:
                stop_process(proc, signal.SIGKILL)
    assert codes == [0] * len(codes), "exit statuses %r (negative: killed by that signal)" % (
        codes,)


# --- exit codes and startup -----------------------------------------------------------------

def config_in(bed, scratch, **kw):
    port = free_port((PROXY_ADDRESS,))
    return make_config(bed, scratch, port, **kw), port


def test_bad_config_exits_2_with_file_line_col(sluice_binary, bed, scratch):
    """Edge case: a config with an unknown key and a duration without a unit."""
    config, port = config_in(bed, scratch, limits={"idle_timeout": 30})
    config["no_such_key"] = True
    path = write_config(config, os.path.join(scratch, "bad.yaml"))
    lines = read_text(path).splitlines()
    unknown = 1 + next(i for i, l in enumerate(lines) if l.startswith("no_such_key:"))
    duration = 1 + next(i for i, l in enumerate(lines) if l.strip().startswith("idle_timeout:"))
    r = run_once(sluice_binary, path)
    assert r.returncode == 2, "exit %d, stderr %r" % (r.returncode, r.stderr)
    for line_no in (unknown, duration):
        assert [l for l in r.stderr.splitlines() if l.startswith("%s:%d:" % (path, line_no))
                and l.split(":")[2].isdigit()], \
            "no %s:%d:COL: error line in stderr:\n%s" % (path, line_no, r.stderr)
    assert not os.path.exists(os.path.join(scratch, "ca-sbx1", "ca.pem")), \
        "a CA was created from a bad config"


def test_listen_address_in_use_exits_1_naming_it(sluice_binary, bed, scratch):
    """Edge case: the sandbox's listen address is already bound and listening (by the test)."""
    config, port = config_in(bed, scratch)
    squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        squatter.bind((PROXY_ADDRESS, port))
        squatter.listen(1)
        path = write_config(config, os.path.join(scratch, "sluice.yaml"))
        r = run_once(sluice_binary, path)
    finally:
        squatter.close()
    assert r.returncode == 1, "exit %d, stderr %r" % (r.returncode, r.stderr)
    assert "%s:%d" % (PROXY_ADDRESS, port) in r.stderr, r.stderr


def _ca_key_open_to_others(ca_dir):
    os.chmod(os.path.join(ca_dir, "ca.key"), 0o644)
    return "ca.key"


def _ca_pem_garbage(ca_dir):
    with open(os.path.join(ca_dir, "ca.pem"), "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    return "ca.pem"


def _ca_key_garbage(ca_dir):
    with open(os.path.join(ca_dir, "ca.key"), "w") as f:
        f.write("garbage\n")
    return "ca.key"


@pytest.mark.parametrize("spoil", [_ca_key_open_to_others, _ca_pem_garbage, _ca_key_garbage],
                         ids=["ca.key-mode-0644", "ca.pem-garbage", "ca.key-garbage"])
def test_unusable_ca_exits_1_with_a_message(sluice_binary, bed, scratch, spoil):
    """Edge cases: the sandbox CA exists but its key is readable by others, or a file is not
    a certificate / key: sluice refuses to start (and does not replace the CA)."""
    config, port = config_in(bed, scratch)
    ca_dir = config["sandboxes"][0]["ca"]
    made = subprocess.run([sluice_binary, "ca", "init", "--dir", ca_dir], capture_output=True,
                          text=True, timeout=20, env=clean_env())
    assert made.returncode == 0, made.stderr
    bad_file = spoil(ca_dir)
    before = read_text(os.path.join(ca_dir, bad_file))
    path = write_config(config, os.path.join(scratch, "sluice.yaml"))
    r = run_once(sluice_binary, path)
    assert r.returncode == 1, "exit %d, stderr %r" % (r.returncode, r.stderr)
    assert bad_file in r.stderr, "the message does not name %s: %r" % (bad_file, r.stderr)
    assert read_text(os.path.join(ca_dir, bad_file)) == before, "sluice rewrote the CA"


def test_run_prints_where_the_ca_is_and_how_to_trust_it(start_sluice):
    """Edge case: a first start creates the sandbox CA; stderr says where ca.pem is and gives
    the line a sandbox needs to trust it."""
    s = start_sluice()
    wait_until(lambda: "SSL_CERT_FILE=" + s.ca_pem in s.stderr(), 10,
               "the CA's path and trust line on stderr")
    err = s.stderr()
    assert s.ca_pem in err and s.proxy_url in err, err
    assert not [l for l in err.splitlines() if "ca.key" in l and "SSL_CERT_FILE" in l], err


def test_every_line_at_start_has_its_time_and_level_and_paths_are_absolute(sluice_binary, bed,
                                                                           scratch):
    """docs/cli.md: messages are `TIME LEVEL message` lines, and paths are printed absolute and
    lexically normal. The lines before `ready` (the CA created, where each sandbox listens, the
    line a sandbox needs) were bare `sluice: ...` lines, and the created CA was named as the
    config wrote it (issue 34, item 7): here a relative `ca` with a `..` in it."""
    config, port = config_in(bed, scratch)
    config["sandboxes"][0]["ca"] = "./state/../ca-relative"
    os.chmod(scratch, 0o755)  # others may open the CA: no warn line (test_ca_other_users.py)
    path = write_config(config, os.path.join(scratch, "sluice.yaml"))
    stderr_path = os.path.join(scratch, "run.stderr")
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(DIE_WITH_US + [sluice_binary, "run", "-c", path], cwd=scratch,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, env=clean_env())
    try:
        wait_until(lambda: " sluice: ready " in read_text(stderr_path) or proc.poll() is not None,
                   30, "sluice to say it is ready")
        text = read_text(stderr_path)
    finally:
        stop_process(proc, signal.SIGTERM)
    ca_pem = os.path.join(scratch, "ca-relative", "ca.pem")
    lines = text.splitlines()
    assert lines and all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info sluice: ", l)
                         for l in lines), text
    assert "sluice: sandbox 'sbx1': created CA %s" % ca_pem in text, text
    assert "CA certificate %s" % ca_pem in text and "SSL_CERT_FILE=%s " % ca_pem in text, text
