"""docs/configuration.md#the-built-in-default, docs/cli.md#sluice-run: `sluice run` without -c
serves the built-in default: sandbox `default` on 127.0.0.1:3128, its CA created in
$XDG_STATE_HOME/sluice/default (else ~/.local/state/sluice/default), and a message on stderr saying
where the CA is and how to trust it; SIGTERM ends it with exit 0.

No request is made through it: its resolver is this machine's /etc/resolv.conf, and the bed's
rule is that nothing leaves 127.0.0.0/8. Readiness is read from /proc/net/tcp, so not even a
probe connection is made."""
import os
import signal
import socket
import stat
import subprocess

import pytest

from gateway import remove_dir
from netutil import DIE_WITH_US, clean_env, listener, read_text, signal_handled, stop_process, \
    wait_until

ADDRESS = ("127.0.0.1", 3128)


def port_taken():
    if listener(*ADDRESS) is not None:
        return True
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(ADDRESS)
        return False
    except OSError:
        return True
    finally:
        s.close()


@pytest.fixture
def home(scratch):
    path = os.path.join(scratch, "home")
    os.makedirs(path)
    return path


def exited_for_the_port(proc, stderr_path):
    """`run` exits 1 naming the address when 127.0.0.1:3128 was taken between our check and
    its bind (another process on this machine): that is a skip, not a failure."""
    if proc.poll() == 1 and "127.0.0.1:3128" in read_text(stderr_path):
        pytest.skip("127.0.0.1:3128 was taken by another process meanwhile: %s"
                    % read_text(stderr_path).strip()[-200:])


def run_default(binary, home, scratch, extra_env=None):
    env = clean_env(HOME=home, **(extra_env or {}))
    if not extra_env or "XDG_STATE_HOME" not in extra_env:
        env.pop("XDG_STATE_HOME", None)
    out = open(os.path.join(scratch, "default.stdout"), "wb")
    err = open(os.path.join(scratch, "default.stderr"), "wb")
    proc = subprocess.Popen(DIE_WITH_US + [binary, "run"], cwd=scratch, env=env,
                            stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    out.close()
    err.close()
    return proc


@pytest.mark.parametrize("xdg", [False, True], ids=["home_local_state", "xdg_state_home"])
def test_run_without_config_serves_the_builtin_default(sluice_binary, home, scratch, xdg):
    """Edge case: no -c. Listens on 127.0.0.1:3128; creates ca.pem (and a 0600 ca.key) under
    $XDG_STATE_HOME/sluice/default, or $HOME/.local/state/sluice/default when XDG_STATE_HOME is
    unset; stderr names ca.pem; SIGTERM -> exit 0; no audit record (nothing was asked)."""
    if port_taken():
        pytest.skip("127.0.0.1:3128 is already in use on this machine")
    extra = {}
    if xdg:
        state = os.path.join(scratch, "xdg-state")
        extra["XDG_STATE_HOME"] = state
        ca_dir = os.path.join(state, "sluice", "default")
    else:
        ca_dir = os.path.join(home, ".local", "state", "sluice", "default")
    ca_pem = os.path.join(ca_dir, "ca.pem")
    stderr_path = os.path.join(scratch, "default.stderr")
    proc = run_default(sluice_binary, home, scratch, extra)
    try:
        def ready():
            exited_for_the_port(proc, stderr_path)
            if proc.poll() is not None:
                raise AssertionError("sluice run exited %d:\n%s" % (proc.returncode,
                                                                    read_text(stderr_path)))
            return listener(*ADDRESS) is not None and os.path.exists(ca_pem) and \
                signal_handled(proc.pid, signal.SIGTERM)
        wait_until(ready, 60, "the built-in default to listen on 127.0.0.1:3128")
        wait_until(lambda: ca_pem in read_text(stderr_path), 10, "stderr to name the CA")
        err = read_text(stderr_path)
        assert "SSL_CERT_FILE=" + ca_pem in err, err
        assert "127.0.0.1:3128" in err, err
        assert "ca.key" not in err, "stderr points the sandbox at the CA key: %s" % err
        key = os.path.join(ca_dir, "ca.key")
        assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
        text = subprocess.run(["openssl", "x509", "-in", ca_pem, "-noout", "-text"],
                              capture_output=True, text=True, check=True).stdout
        assert "CA:TRUE" in text and "pathlen:0" in text
        exited_for_the_port(proc, stderr_path)
        code = stop_process(proc, signal.SIGTERM, 30)
        exited_for_the_port(proc, stderr_path)
        assert code == 0, "exit %r after SIGTERM; stderr:\n%s" % (code, read_text(stderr_path))
        assert read_text(os.path.join(scratch, "default.stdout")) == "", \
            "audit records on stdout although nothing was asked"
        if xdg:
            assert not os.path.exists(os.path.join(home, ".local")), "HOME used despite XDG"
    finally:
        if proc.poll() is None:
            stop_process(proc, signal.SIGKILL)


def test_builtin_default_keeps_its_ca_across_restarts(sluice_binary, home, scratch):
    """Edge case: a second start finds the CA it made and uses it (never overwrites)."""
    if port_taken():
        pytest.skip("127.0.0.1:3128 is already in use on this machine")
    ca_pem = os.path.join(home, ".local", "state", "sluice", "default", "ca.pem")
    fingerprints = []
    for _ in range(2):
        proc = run_default(sluice_binary, home, scratch)
        stderr_path = os.path.join(scratch, "default.stderr")
        try:
            def ready():
                exited_for_the_port(proc, stderr_path)
                assert proc.poll() is None, read_text(stderr_path)
                return listener(*ADDRESS) is not None and os.path.exists(ca_pem) and \
                    signal_handled(proc.pid, signal.SIGTERM)
            wait_until(ready, 60, "the built-in default")
            fingerprints.append(read_text(ca_pem))
            assert stop_process(proc, signal.SIGTERM, 30) == 0
        finally:
            if proc.poll() is None:
                stop_process(proc, signal.SIGKILL)
        wait_until(lambda: listener(*ADDRESS) is None, 10, "3128 to be released")
    assert fingerprints[0] == fingerprints[1]
    remove_dir(os.path.join(home, ".local"))
