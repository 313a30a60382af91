"""docs/configuration.md#sandboxes_dir and README "Sandboxes are files": every non-hidden *.yaml /
*.yml file in the directory (relative to the config file's directory) is one sandbox, with the keys
of an entry of `sandboxes` and paths relative to its own directory. Files come and go with reloads
(the directory is watched: no SIGHUP here): a new file's sandbox gets its listener and its CA,
a removed file's sandbox stops accepting and its connections drain, a bad file is named with
line:col and the reload refused (at start: exit 2).

The config: sbx1 as usual (the bed policy) plus a policy `gp` that allows other.test and
allowed.test (the big file lives there) and nothing else; the sandbox files use `gp`, with
`ca: ./ca-NAME` and `audit: ./NAME.jsonl` relative to the directory.
"""
import os
import socket
import uuid

import pytest

import clients
import content as C
import expect
from audit import AuditLog
from gateway import Gateway
from http1 import request_bytes
from netutil import free_port, listener, wait_until
from reload_util import Reloads, audit_verify, error_lines, replace_file, same_file
from sluice_proc import (PROXY_ADDRESS, SandboxView, make_config, run_once, to_yaml,
                         write_config)

DIR = "sandboxes.d"
SLOW_RATE = "20M"   # curl --limit-rate: the 200 MiB file takes about 10 s


def marker():
    return uuid.uuid4().hex[:12]


def with_dir(bed, files=None):
    """An `edit=` that adds sandboxes_dir (relative) and policy gp; `files`: {name: text}
    written into the directory before sluice starts."""
    def edit(config, workdir):
        directory = os.path.join(workdir, DIR)
        os.makedirs(directory, exist_ok=True)
        for name, text in (files or {}).items():
            with open(os.path.join(directory, name), "w") as f:
                f.write(text)
        config["sandboxes_dir"] = DIR
        config["policies"]["gp"] = {"rules": [
            {"name": "g-other", "hosts": ["other.test"], "ports": [bed.tls_port],
             "ips": ["127.0.0.20/32"]},
            {"name": "g-allowed", "hosts": ["allowed.test"], "ports": [bed.tls_port],
             "ips": ["127.0.0.20/32"]}]}
    return edit


def sandbox_text(name, port, **extra):
    entry = {"name": name, "listen": "%s:%d" % (PROXY_ADDRESS, port), "ca": "./ca-" + name,
             "policy": "gp", "mode": "enforce", "audit": "./%s.jsonl" % name}
    entry.update(extra)
    return to_yaml(entry) + "\n"


def dir_of(s):
    return os.path.join(s.workdir, DIR)


def view(s, bed, name, port):
    """A Gateway for the sandbox of file NAME.yaml (its paths relative to the directory)."""
    d = dir_of(s)
    return Gateway(SandboxView(name, (PROXY_ADDRESS, port),
                               "http://%s:%d" % (PROXY_ADDRESS, port),
                               os.path.join(d, "ca-" + name, "ca.pem"),
                               AuditLog(os.path.join(d, name + ".jsonl"))), bed)


def wait_serving(s, port, name):
    wait_until(lambda: listener(PROXY_ADDRESS, port) is not None and
               os.path.exists(os.path.join(dir_of(s), "ca-" + name, "ca.pem")), 20,
               "sandbox %s to listen on %d with its CA" % (name, port))


def whoami(g, host, m=None):
    m = m or marker()
    return g.tunnel(host, [request_bytes("GET", "/whoami.txt?m=" + m, host, keep_alive=False)])


def ok(ex, host):
    return ex.final is not None and (ex.final.status, ex.final.body) == \
        (200, (host + "\n").encode())


def start_errors(stderr):
    """[(file, line, col, message)] of the `FILE:LINE:COL: message` lines `run` prints."""
    out = []
    for line in stderr.splitlines():
        parts = line.split(":", 3)
        if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
            out.append((parts[0], int(parts[1]), int(parts[2]), parts[3].strip()))
    return out


# --- a file comes --------------------------------------------------------------------------------

def test_dropped_file_starts_serving_without_restart(start_sluice, bed):
    """Edge case: gamma.yaml is renamed into the directory (hidden temp file first); a hidden
    *.yaml and a notes.txt with garbage are there from the start and ignored. Without a
    signal, gamma's port listens, its CA is created at its `ca` path (relative to the
    directory), requests are judged by its policy, and its records (with sandbox gamma) go to
    its own audit file."""
    s = start_sluice(edit=with_dir(bed, {".hidden.yaml": "garbage: [\n",
                                         "notes.txt": "not: [yaml\n"}))
    sbx1 = Gateway(s, bed)
    assert ok(whoami(sbx1, "allowed.test"), "allowed.test")
    port = free_port((PROXY_ADDRESS,))
    reloads = Reloads(s)
    replace_file(os.path.join(dir_of(s), "gamma.yaml"), sandbox_text("gamma", port))
    _, count, added, removed = reloads.wait_applied()
    assert (count, added, removed) == (2, ["gamma"], []), reloads.applied()
    wait_serving(s, port, "gamma")
    g = view(s, bed, "gamma", port)

    m = marker()
    ex = whoami(g, "other.test", m)
    assert ok(ex, "other.test"), (ex.connect, ex.final)
    assert ex.peer_names == ["other.test"]  # a leaf from gamma's own CA (verified with it)
    rec = g.audit.one(0, lambda r: m in (r["url"] or ""))
    expect.record(rec, sandbox="gamma", decision="allow", rule="g-other", status=200)
    # second.test: sbx1's policy allows it, gamma's does not
    denied = whoami(g, "second.test")
    expect.denial(denied, 403, "not_allowed_host")
    assert whoami(sbx1, "second.test").final.status == 200
    assert not [r for r in s.audit.records() if r["sandbox"] == "gamma"], \
        "a record of gamma in the global log"
    code, out = audit_verify(s.binary, g.audit.path)
    assert code == 0, out


def test_configmap_style_updates_are_seen(start_sluice, bed):
    """Edge case: the directory is a Kubernetes ConfigMap volume. The kubelet writes each
    version into a hidden timestamped directory, points the `..data` symlink at it by renaming
    a new `..data_tmp` over it, and the visible files are symlinks through `..data`. An update
    that adds a key (a sandbox) is a new directory, one rename and one new symlink; sluice
    reloads without a signal and serves the new sandbox; the old one keeps serving. An update of
    an existing key is the rename alone, and is seen too."""
    port_a = free_port((PROXY_ADDRESS,))

    def configmap(version, files):
        """Write version `version` of the volume (files: {name: text}) the kubelet's way."""
        d = dir_of_workdir[-1]  # of the last start attempt
        stamp = "..2026_11_30_v%d" % version
        os.makedirs(os.path.join(d, stamp))
        for name, text in files.items():
            with open(os.path.join(d, stamp, name), "w") as f:
                f.write(text)
        os.symlink(stamp, os.path.join(d, "..data_tmp"))
        os.rename(os.path.join(d, "..data_tmp"), os.path.join(d, "..data"))
        for name in files:
            link = os.path.join(d, name)
            if not os.path.islink(link):
                os.symlink(os.path.join("..data", name), link)

    dir_of_workdir = []

    def edit(config, workdir):
        with_dir(bed)(config, workdir)
        dir_of_workdir.append(os.path.join(workdir, DIR))
        configmap(1, {"alpha.yaml": sandbox_text("alpha", port_a)})

    s = start_sluice(edit=edit)
    wait_serving(s, port_a, "alpha")
    assert ok(whoami(view(s, bed, "alpha", port_a), "other.test"), "other.test")
    port_b = free_port((PROXY_ADDRESS,), avoid=(port_a,))
    reloads = Reloads(s)
    configmap(2, {"alpha.yaml": sandbox_text("alpha", port_a),
                  "beta.yaml": sandbox_text("beta", port_b)})
    # One reload, or two if the kubelet's steps straddle the watch's settling time.
    wait_until(lambda: any("beta" in added for _, _, added, _ in reloads.since()), 20,
               "a reload that adds beta")
    assert all(removed == [] for _, _, _, removed in reloads.since()), reloads.since()
    assert reloads.since()[-1][1] == 3, reloads.since()  # sbx1, alpha, beta
    wait_serving(s, port_b, "beta")
    assert ok(whoami(view(s, bed, "beta", port_b), "other.test"), "other.test")
    assert ok(whoami(view(s, bed, "alpha", port_a), "other.test"), "other.test")

    # An update of a key alone changes no visible name: only `..data` is swapped. alpha moves.
    port_c = free_port((PROXY_ADDRESS,), avoid=(port_a, port_b))
    reloads = Reloads(s)
    configmap(3, {"alpha.yaml": sandbox_text("alpha", port_c),
                  "beta.yaml": sandbox_text("beta", port_b)})
    reloads.wait_applied()
    wait_until(lambda: listener(PROXY_ADDRESS, port_a) is None and
               listener(PROXY_ADDRESS, port_c) is not None, 20, "alpha to move to its new port")
    assert ok(whoami(view(s, bed, "alpha", port_c), "other.test"), "other.test")


# --- a file goes ---------------------------------------------------------------------------------

def test_removed_file_stops_the_listener_and_drains(start_sluice, bed, scratch):
    """Edge case: gamma.yaml is removed while a 200 MiB download (about 10 s) runs through
    gamma and another tunnel through it sits idle after one request: the port refuses new
    connections, the idle tunnel is closed, the download finishes byte-exact and is recorded;
    sbx1 is unaffected."""
    port = free_port((PROXY_ADDRESS,))
    s = start_sluice(edit=with_dir(bed, {"gamma.yaml": sandbox_text("gamma", port)}))
    wait_serving(s, port, "gamma")
    g = view(s, bed, "gamma", port)
    url = g.url("allowed.test", "/big.bin")
    dl = clients.CurlDownload(url, os.path.join(scratch, "big.out"), "--limit-rate", SLOW_RATE,
                              proxy=g.sluice.proxy_url, cacert=g.sluice.ca_pem, timeout=120)
    sock = None
    try:
        sock, tls, reader = clients.open_tls_tunnel(g.sluice.address,
                                                    "other.test:%d" % bed.tls_port,
                                                    g.sluice.ca_pem)
        tls.sendall(request_bytes("GET", "/whoami.txt", "other.test"))
        first = reader.read_response()
        assert (first.status, first.body) == (200, b"other.test\n")
        wait_until(lambda: dl.size() >= 4 << 20 or dl.proc.poll() is not None, 30,
                   "the download through gamma to be under way")
        assert dl.proc.poll() is None, "the download ended early: rc %s" % dl.wait(5)

        reloads = Reloads(s)
        os.unlink(os.path.join(dir_of(s), "gamma.yaml"))
        _, count, added, removed = reloads.wait_applied()
        assert (count, added, removed) == (1, [], ["gamma"]), reloads.applied()
        wait_until(lambda: listener(PROXY_ADDRESS, port) is None, 10,
                   "gamma's port to stop listening")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((PROXY_ADDRESS, port), timeout=5).close()
        tail, how = reader.read_to_close(timeout=10)
        assert how in ("eof", "reset") and tail == b"", \
            "the idle tunnel of a removed sandbox is still open (%s, %r)" % (how, tail[:100])
        in_flight = dl.proc.poll() is None
        assert ok(whoami(Gateway(s, bed), "allowed.test"), "allowed.test")
        rc = dl.wait(90)
    finally:
        dl.stop()
        if sock is not None:
            sock.close()
    assert in_flight, "the download was no longer in flight after the removal"
    assert (rc, dl.http_code) == (0, 200), "curl: rc %d, %s" % (rc, dl.stderr)
    assert (os.path.getsize(dl.out_path), dl.sha256()) == (C.BIG_SIZE, bed.content.big_sha256)
    rec = g.audit.one(0, lambda r: r["url"] == url)
    expect.record(rec, sandbox="gamma", decision="allow", status=200, resp_bytes=C.BIG_SIZE)
    code, out = audit_verify(s.binary, g.audit.path)
    assert code == 0, out


# --- bad files -----------------------------------------------------------------------------------

def test_bad_file_is_named_and_refused_then_fixed(start_sluice, bed):
    """Edge case: gamma.yaml arrives with an unknown key: stderr names gamma.yaml:LINE:COL,
    the reload is refused, gamma does not listen and sbx1 keeps serving; the fixed file is
    then picked up and served."""
    s = start_sluice(edit=with_dir(bed))
    sbx1 = Gateway(s, bed)
    port = free_port((PROXY_ADDRESS,))
    path = os.path.join(dir_of(s), "gamma.yaml")
    text = sandbox_text("gamma", port) + "no_such_key: 1\n"
    bad_line = text.splitlines().index("no_such_key: 1") + 1
    reloads = Reloads(s)
    replace_file(path, text)
    stderr = reloads.wait_refused()
    errors = error_lines(stderr)
    assert [e for e in errors if same_file(e[0], path) and e[1] == bad_line], \
        "no `reload: %s:%d:COL: ...` line; errors: %r\n%s" % (path, bad_line, errors,
                                                               stderr[-2000:])
    assert reloads.since() == []
    assert s.proc.poll() is None
    assert listener(PROXY_ADDRESS, port) is None, "the refused sandbox listens"
    assert ok(whoami(sbx1, "allowed.test"), "allowed.test")

    reloads = Reloads(s)
    replace_file(path, sandbox_text("gamma", port))
    _, _, added, _ = reloads.wait_applied()
    assert added == ["gamma"]
    wait_serving(s, port, "gamma")
    assert ok(whoami(view(s, bed, "gamma", port), "other.test"), "other.test")


def test_start_with_empty_dir_and_one_listed_sandbox(start_sluice, bed):
    """Edge case: sandboxes_dir exists and is empty; the one sandbox is in `sandboxes:`."""
    s = start_sluice(edit=with_dir(bed))
    assert os.listdir(dir_of(s)) == []
    g = Gateway(s, bed)
    m = marker()
    assert ok(whoami(g, "allowed.test", m), "allowed.test")
    rec = g.audit.one(0, lambda r: m in (r["url"] or ""))
    expect.record(rec, sandbox="sbx1", decision="allow")


def _config_in(bed, scratch, files):
    port = free_port((PROXY_ADDRESS,))
    config = make_config(bed, scratch, port, edit=with_dir(bed, files))
    return write_config(config, os.path.join(scratch, "sluice.yaml"))


def test_start_with_a_bad_file_exits_2_naming_it(sluice_binary, bed, scratch):
    """Edge case: a file of the directory has a listen address that is no address: `run`
    exits 2 and prints FILE:LINE:COL naming that file."""
    text = sandbox_text("gamma", 1, listen="not an address")
    bad_line = next(i for i, l in enumerate(text.splitlines(), 1) if l.startswith("listen:"))
    path = _config_in(bed, scratch, {"gamma.yaml": text})
    r = run_once(sluice_binary, path)
    assert r.returncode == 2, "exit %d, stderr %r" % (r.returncode, r.stderr)
    want = os.path.join(scratch, DIR, "gamma.yaml")
    errors = start_errors(r.stderr)
    assert [e for e in errors if same_file(e[0], want) and e[1] == bad_line], \
        "no %s:%d:COL: line in stderr:\n%s" % (want, bad_line, r.stderr)


# --- names -------------------------------------------------------------------------------------

def test_two_files_with_the_same_name_refused_naming_the_second(start_sluice, bed):
    """Edge case: a.yaml defines gamma; b.yaml arrives defining gamma too (another port): the
    reload is refused with an error naming b.yaml, and gamma keeps serving from a.yaml."""
    port_a, port_b = free_port((PROXY_ADDRESS,)), free_port((PROXY_ADDRESS,))
    s = start_sluice(edit=with_dir(bed, {"a.yaml": sandbox_text("gamma", port_a)}))
    wait_serving(s, port_a, "gamma")
    reloads = Reloads(s)
    second = os.path.join(dir_of(s), "b.yaml")
    replace_file(second, sandbox_text("gamma", port_b))
    stderr = reloads.wait_refused()
    errors = error_lines(stderr)
    assert [e for e in errors if same_file(e[0], second)], \
        "no `reload: %s:LINE:COL: ...` line; errors: %r\n%s" % (second, errors, stderr[-2000:])
    assert not [e for e in errors if same_file(e[0], os.path.join(dir_of(s), "a.yaml"))], \
        "the first file is blamed: %r" % errors
    assert listener(PROXY_ADDRESS, port_b) is None
    assert ok(whoami(view(s, bed, "gamma", port_a), "other.test"), "other.test")


def test_two_files_with_the_same_name_at_start_exit_2(sluice_binary, bed, scratch):
    """Edge case: the same, at start: exit 2, the error names b.yaml."""
    port_a, port_b = free_port((PROXY_ADDRESS,)), free_port((PROXY_ADDRESS,))
    path = _config_in(bed, scratch, {"a.yaml": sandbox_text("gamma", port_a),
                                     "b.yaml": sandbox_text("gamma", port_b)})
    r = run_once(sluice_binary, path)
    assert r.returncode == 2, "exit %d, stderr %r" % (r.returncode, r.stderr)
    want = os.path.join(scratch, DIR, "b.yaml")
    assert [e for e in start_errors(r.stderr) if same_file(e[0], want)], \
        "no %s:LINE:COL: line in stderr:\n%s" % (want, r.stderr)


def test_file_reusing_a_listed_sandbox_name_is_refused(start_sluice, bed):
    """Edge case: a file defines sbx1, the name of the sandbox in `sandboxes:`: refused with
    an error naming the file; sbx1 keeps its listener and policy."""
    s = start_sluice(edit=with_dir(bed))
    port = free_port((PROXY_ADDRESS,))
    path = os.path.join(dir_of(s), "sbx1.yaml")
    reloads = Reloads(s)
    replace_file(path, sandbox_text("sbx1", port))
    stderr = reloads.wait_refused()
    errors = error_lines(stderr)
    assert [e for e in errors if same_file(e[0], path)], \
        "no `reload: %s:LINE:COL: ...` line; errors: %r\n%s" % (path, errors, stderr[-2000:])
    assert listener(PROXY_ADDRESS, port) is None
    assert ok(whoami(Gateway(s, bed), "allowed.test"), "allowed.test")
