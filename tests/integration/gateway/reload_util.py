"""Reloading a running sluice (docs/cli.md#reloads, README "Reload"): rewriting its config file the
way an editor or an orchestrator does (a temp file renamed over it), SIGHUP by PID, waiting for
the outcome on stderr (the admin endpoint's sluice_config_reloads_total: admin_client.Admin).

stderr lines this module reads (one per event):
  ... info sluice: reloaded: configuration N in force, M sandboxes (added: a, b; removed: c)
  ... error sluice: reload: FILE:LINE:COL: message
  ... error sluice: reload refused, the running configuration stays in force: ...
"""
import copy
import os
import re
import signal
import subprocess

from netutil import signal_handled, signal_pending, wait_until
from sluice_proc import write_config

RELOADED = re.compile(r"sluice: reloaded: configuration (\d+) in force, (\d+) sandboxes "
                      r"\(added: ([^;]*); removed: ([^)]*)\)")
REFUSED = "sluice: reload refused, the running configuration stays in force"


# --- the config ------------------------------------------------------------------------------

def replace_file(path, text):
    """Write `text` to a hidden temp file beside `path`, then rename it over `path` (what an
    editor or an orchestrator does: the watcher never sees half a file)."""
    tmp = os.path.join(os.path.dirname(path), ".%s.tmp" % os.path.basename(path))
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def rewrite_config(s, config):
    """Replace the running sluice's config file with `config` (renamed over it); `s.config`
    follows, so that s.sandbox_view() sees the new sandboxes."""
    tmp = os.path.join(os.path.dirname(s.config_path), ".sluice.yaml.tmp")
    write_config(config, tmp)
    os.replace(tmp, s.config_path)
    s.config = config
    return s.config_path


def edited(s, change):
    """A deep copy of the running config with change(config) applied."""
    config = copy.deepcopy(s.config)
    change(config)
    return config


def without_rules(config, *names):
    for policy in config["policies"].values():
        policy["rules"] = [r for r in policy["rules"] if r["name"] not in names]


def line_of(path, predicate):
    """1-based number of the first line of `path` for which predicate(line) holds."""
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if predicate(line.rstrip("\n")):
                return number
    raise AssertionError("no such line in %s" % path)


# --- reloads as stderr tells them --------------------------------------------------------------

class Reloads:
    """What sluice's stderr says about reloads, counted from when this was made."""

    def __init__(self, s):
        self.s = s
        self.ok_before = len(self.applied())
        self.refused_before = self.refused_count()

    def applied(self):
        """[(generation, sandboxes, added, removed)] for each applied reload so far."""
        out = []
        for m in RELOADED.finditer(self.s.stderr()):
            split = lambda t: [] if t.strip() == "none" else [x.strip() for x in t.split(",")]
            out.append((int(m.group(1)), int(m.group(2)), split(m.group(3)), split(m.group(4))))
        return out

    def refused_count(self):
        return self.s.stderr().count(REFUSED)

    def generation(self):
        applied = self.applied()
        return applied[-1][0] if applied else 1

    def wait_applied(self, count=1, timeout=20, refusals_ok=False):
        """Wait until `count` reloads more were applied; returns the first of them as
        (generation, sandboxes, added, removed). Fails at once if a reload was refused
        meanwhile, unless `refusals_ok`."""
        def done():
            if not refusals_ok and self.refused_count() > self.refused_before:
                raise AssertionError("the reload was refused; stderr:\n%s"
                                     % self.s.stderr()[-3000:])
            self._check_alive()
            applied = self.applied()
            return applied[self.ok_before] if len(applied) >= self.ok_before + count else None
        return self._wait(done, timeout, "%d more applied reload(s) on stderr" % count)

    def since(self):
        """The reloads applied since this was made."""
        return self.applied()[self.ok_before:]

    def wait_refused(self, count=1, timeout=20):
        """Wait until `count` reloads more were refused; returns stderr."""
        def done():
            self._check_alive()
            return self.refused_count() >= self.refused_before + count
        self._wait(done, timeout, "%d more refused reload(s) on stderr" % count)
        return self.s.stderr()

    def _check_alive(self):
        if self.s.proc.poll() is not None:
            raise AssertionError("sluice exited with %d; stderr:\n%s"
                                 % (self.s.proc.returncode, self.s.stderr()[-3000:]))

    def _wait(self, predicate, timeout, what):
        try:
            return wait_until(predicate, timeout, what)
        except TimeoutError as e:
            raise AssertionError("%s; stderr:\n%s" % (e, self.s.stderr()[-3000:]))


def error_lines(stderr):
    """[(file, line, col, message)] of every `reload: FILE:LINE:COL: message` line."""
    out = []
    for m in re.finditer(r"sluice: reload: (.+?):(\d+):(\d+): (.*)", stderr):
        out.append((m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)))
    return out


def same_file(a, b):
    return os.path.realpath(a) == os.path.realpath(b)


def sighup(s):
    """SIGHUP to this sluice by PID; returns once the signal was delivered."""
    wait_until(lambda: signal_handled(s.proc.pid, signal.SIGHUP), 5,
               "sluice to take charge of SIGHUP")
    os.kill(s.proc.pid, signal.SIGHUP)
    wait_until(lambda: not signal_pending(s.proc.pid, signal.SIGHUP), 5,
               "the SIGHUP's delivery")


# --- the audit log ---------------------------------------------------------------------------

def audit_verify(binary, path):
    """`sluice audit verify FILE`: (exit status, output)."""
    r = subprocess.run([binary, "audit", "verify", path], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout + r.stderr
