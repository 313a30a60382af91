"""A CA the sandbox's users can read (docs/configuration.md#sandboxes, docs/cli.md#sluice-run):
a sandbox's clients may run as another user than sluice (an agent's non-root user; apt's https
method runs as `_apt`). The directories sluice makes for a CA are 0755, ca.pem and ca.p12 0644,
ca.key 0600: `nobody` and `_apt` trust sluice through ca.pem (a real curl through the proxy, as
that user) and cannot read the key; apt-get update over https, whose https method runs as
`_apt`, trusts it through the APT_CONFIG `sluice env` prints. A CA under a directory others
cannot search is named at start (a warning line) and by `sluice env`."""
import os
import pwd
import shutil
import stat
import subprocess
import tempfile

import pytest

from clients import env_lines
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


def test_apt_over_https_runs_as_apt_and_trusts_sluice_through_env(make_gw, open_base, bed):
    """The real apt-get update (root; its https method drops to _apt) from a flat repository on
    allowed.test through sluice's proxy, with nothing but the lines of `sluice env`: APT_CONFIG
    names the apt.conf sluice wrote beside ca.pem (Acquire::https::CaInfo), https_proxy the
    proxy. apt's own state and lists go to a scratch directory."""
    if not user_exists("_apt"):
        pytest.skip("no _apt user: apt is not installed")
    ca_dir = os.path.join(open_base, "state", "sbx1")
    g = make_gw(edit=lambda config, workdir: config["sandboxes"][0].update(ca=ca_dir))
    lines = env_lines(g)
    apt_dir = os.path.join(open_base, "apt")
    for sub in ("state/lists/partial", "cache/archives/partial", "parts"):
        os.makedirs(os.path.join(apt_dir, sub))
    sources = os.path.join(apt_dir, "sources.list")
    with open(sources, "w") as f:
        f.write("deb [trusted=yes] %s ./\n" % g.url("allowed.test", "/debian"))
    options = ["-o", "Dir::Etc::SourceList=" + sources,
               "-o", "Dir::Etc::SourceParts=" + os.path.join(apt_dir, "parts"),
               "-o", "Dir::State=" + os.path.join(apt_dir, "state"),
               "-o", "Dir::State::status=" + os.path.join(apt_dir, "status"),
               "-o", "Dir::Cache=" + os.path.join(apt_dir, "cache"),
               "-o", "Debug::NoLocking=1", "-o", "Acquire::Retries=0"]
    open(os.path.join(apt_dir, "status"), "w").close()
    script = 'eval "$SLUICE_ENV_LINES"\nexec apt-get update ' + " ".join(
        "'%s'" % o for o in options)
    r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120,
                       env=clean_env(SLUICE_ENV_LINES=lines))
    assert r.returncode == 0 and "Err:" not in r.stdout, (r.stdout, r.stderr)
    assert "W: " not in r.stderr or "CaInfo" not in r.stderr, r.stderr
    recs = g.audit.wait(0, lambda rec: "/debian/" in (rec["url"] or ""), 1)
    assert all(rec["decision"] == "allow" for rec in recs), recs
    assert any(rec["url"].endswith("/debian/./Release") and rec["status"] == 200
               for rec in recs), [(rec["url"], rec["status"]) for rec in recs]
    # The method is _apt's: a CA directory that others cannot search fails it.
    os.chmod(ca_dir, 0o700)
    r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120,
                       env=clean_env(SLUICE_ENV_LINES=lines))
    assert "Err:" in r.stdout or r.returncode != 0, (r.stdout, r.stderr)


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
    comment = env_lines(g).splitlines()[1]
    assert comment == ("# sluice: other users cannot open it (%s is mode 0700): a client that "
                       "runs as another user (apt's https method runs as _apt) cannot trust "
                       "sluice" % hidden), comment
    # What it says is so: nobody cannot reach it.
    r = as_user("nobody", "cat", ca_dir + "/ca.pem")
    assert r.returncode != 0 and "Permission denied" in r.stderr, r
