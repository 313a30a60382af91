"""A CA the sandbox's users can read (docs/configuration.md#sandboxes, docs/cli.md#sluice-run):
a sandbox's clients may run as another user than sluice (an agent's non-root user; apt's https
method runs as `_apt`). The directories sluice makes for a CA are 0755, ca.pem and ca.p12 0644,
ca.key 0600: `nobody` and `_apt` trust sluice through ca.pem (a real curl through the proxy, as
that user) and cannot read the key. A CA under a directory others cannot search is named at
start (a warning line) and by `sluice env`."""
import os
import pwd
import shutil
import stat
import subprocess
import tempfile

import pytest

from netutil import clean_env, wait_until

USERS = ("nobody", "_apt")


def user_exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def as_user(user, *cmd):
    """`cmd` run as `user` (setpriv: its uid, group nogroup, no supplementary groups)."""
    return subprocess.run(["setpriv", "--reuid=" + user, "--regid=nogroup", "--clear-groups",
                           *cmd], capture_output=True, text=True, timeout=60,
                          env=clean_env(HOME="/nonexistent"))


@pytest.fixture
def open_base():
    """A directory others may search, for the CA's parent (mkdtemp makes 0700)."""
    base = tempfile.mkdtemp(prefix="sluice-ca-users-")
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_other_users_trust_sluice_through_the_ca_it_makes(make_gw, open_base):
    ca_dir = os.path.join(open_base, "state", "sbx1")  # both made by sluice
    g = make_gw(edit=lambda config, workdir: config["sandboxes"][0].update(ca=ca_dir))
    assert (mode(os.path.dirname(ca_dir)), mode(ca_dir)) == (0o755, 0o755)
    assert (mode(ca_dir + "/ca.pem"), mode(ca_dir + "/ca.key")) == (0o644, 0o600)
    wait_until(lambda: os.path.exists(ca_dir + "/ca.p12"), 10, "the trust store")
    assert mode(ca_dir + "/ca.p12") == 0o644
    assert "other users cannot open" not in g.sluice.stderr(), g.sluice.stderr()
    users = [u for u in USERS if user_exists(u)]
    assert "nobody" in users
    for user in users:
        r = as_user(user, "curl", "-sS", "--noproxy", "", "-x", g.sluice.proxy_url,
                    "--cacert", ca_dir + "/ca.pem", g.url("allowed.test", "/whoami.txt"))
        assert (r.returncode, r.stdout) == (0, "allowed.test\n"), (user, r.stderr)
        r = as_user(user, "cat", ca_dir + "/ca.key")
        assert r.returncode != 0 and "Permission denied" in r.stderr, (user, r)


def test_a_ca_others_cannot_reach_is_named_at_start_and_by_env(make_gw, open_base):
    hidden = os.path.join(open_base, "hidden")
    os.mkdir(hidden, 0o700)
    ca_dir = os.path.join(hidden, "sbx1")
    g = make_gw(edit=lambda config, workdir: config["sandboxes"][0].update(ca=ca_dir))
    line = wait_until(lambda: [l for l in g.sluice.stderr().splitlines()
                               if "other users cannot open the CA certificate" in l], 10,
                      "the warn line")[0]
    assert " warning sluice: sandbox 'sbx1': " in line, line
    assert "%s/ca.pem (%s is mode 0700)" % (ca_dir, hidden) in line, line
    r = subprocess.run([g.sluice.binary, "env", "-c", g.sluice.config_path, "--sandbox", "sbx1"],
                       capture_output=True, text=True, timeout=60, cwd=g.sluice.workdir,
                       env=clean_env())
    assert r.returncode == 0, r.stderr
    comment = r.stdout.splitlines()[1]
    assert comment == ("# sluice: other users cannot open it (%s is mode 0700): a client that "
                       "runs as another user (apt's https method runs as _apt) cannot trust "
                       "sluice" % hidden), r.stdout
    # What it says is so: nobody cannot reach it.
    r = as_user("nobody", "cat", ca_dir + "/ca.pem")
    assert r.returncode != 0 and "Permission denied" in r.stderr, r
