"""The package firewall (docs/packages.md) with real npm and pip, through sluice with only what
`sluice env` prints, against the local registries of registry_server.py (npm at
allowed.test/npm/, PyPI at allowed.test/pypi/):

  - every package request is on record with its package (`package`: ecosystem, kind, name,
    version for a file) and nothing else changes for an allowed install;
  - a denied name fails npm and pip with sluice's reason in their own output
    (`package_denied`), on record, and the registry never sees the request;
  - `allow` serves only what it lists: a dependency it does not list fails the install;
  - a version an OSV advisory calls malicious is refused as a file (`package_malicious`, the
    advisory's id in the body and the record), for npm's and pip's direct URLs;
    `block: all` refuses what a non-malicious advisory names too;
  - a path in the registry's namespace that names no package sluice reads is refused
    (`package_unrecognized`) and never reaches the registry;
  - advisories are read at each reload: a new one refuses at once, an unreadable one keeps the
    running configuration;
  - report mode records the refusal and forwards.
"""
import json
import os
import shutil

import pytest

from admin_client import Admin, with_admin
from gateway import Gateway, Runner
import registry_clients as rc
from registry_clients import npm_through as npm, pip_through as pip
from registry_server import (STANDARD_NPM_NEWEST, STANDARD_PYPI_NEWEST, publish_standard,
                             registry_rules, serve)
from reload_util import Reloads, rewrite_config, sighup

HOST = "allowed.test"


@pytest.fixture(scope="module")
def reg(bed):
    with serve(bed, host=HOST) as served:
        publish_standard(served)
        yield served


def with_packages(packages, mode="enforce"):
    def edit(config, workdir):
        if packages is not None:
            config["policies"]["bed"]["packages"] = packages
        config["sandboxes"][0]["mode"] = mode
    return edit


def start(sluice_binary, bed, reg, packages=None, mode="enforce"):
    runner = Runner(sluice_binary, bed)
    gw = Gateway(runner.start(rules=registry_rules(reg), edit=with_packages(packages, mode)), bed)
    return runner, gw


@pytest.fixture
def firewall(sluice_binary, bed, reg):
    """Factory: a sluice whose policy has `packages` (None: none) over the two registries."""
    runners = []

    def make(packages=None, mode="enforce"):
        runner, gw = start(sluice_binary, bed, reg, packages, mode)
        runners.append(runner)
        return gw
    yield make
    for runner in runners:
        runner.stop_all()


def package_records(gw, mark=0):
    return [r for r in gw.audit.since(mark) if r.get("package") is not None]


def osv(directory, ident, ecosystem, name, versions=(), ranges=()):
    os.makedirs(directory, exist_ok=True)
    doc = {"id": ident, "modified": "2026-12-01T00:00:00Z", "summary": "test advisory",
           "affected": [{"package": {"ecosystem": ecosystem, "name": name},
                         "versions": list(versions), "ranges": list(ranges)}]}
    with open(os.path.join(directory, ident + ".json"), "w") as f:
        json.dump(doc, f)


# --- allowed installs are on record ----------------------------------------------------------

def test_installs_are_on_record_with_their_packages(firewall, reg, scratch):
    gw = firewall(packages=None)
    r, project = npm(gw, reg, scratch, ["app-a"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.npm_installed(project) == STANDARD_NPM_NEWEST
    r, target = pip(gw, reg, scratch, ["app-a"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.pip_installed(target) == STANDARD_PYPI_NEWEST
    got = {(p["ecosystem"], p["kind"], p["name"], p["version"])
           for p in (rec["package"] for rec in package_records(gw))}
    assert ("npm", "metadata", "app-a", None) in got
    assert ("npm", "metadata", "@myorg/util", None) in got
    assert ("npm", "file", "lib-b", "1.2.0") in got
    assert ("npm", "file", "@myorg/util", "1.0.1") in got
    assert ("pypi", "metadata", "app-a", None) in got
    assert ("pypi", "file", "app-a", "1.1.0") in got
    assert ("pypi", "file", "lib-b", "1.2.0") in got
    for rec in package_records(gw):
        assert rec["decision"] == "allow" and rec["reason"] is None, rec
        assert rec["package"]["advisory"] is None


# --- names -----------------------------------------------------------------------------------

def test_a_denied_name_fails_npm_and_pip_with_the_reason(firewall, reg, scratch):
    gw = firewall(packages={"deny": ["lib-b", "@evil/*"]})
    mark = len(reg.access())
    r, project = npm(gw, reg, scratch, ["app-a"])
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "403" in out and "package_denied" in out, out
    assert "lib-b" in out
    r, target = pip(gw, reg, scratch, ["app-a"])
    assert r.returncode != 0
    # pip shows a refused index page as "no versions" (docs/packages.md#what-clients-see).
    assert "lib-b" in r.stdout + r.stderr
    refused = [rec for rec in package_records(gw) if rec["reason"] == "package_denied"]
    assert {(rec["package"]["ecosystem"], rec["package"]["name"]) for rec in refused} >= {
        ("npm", "lib-b"), ("pypi", "lib-b")}
    for rec in refused:
        assert rec["decision"] == "deny" and rec["status"] == 403, rec
    assert not [e for e in reg.access()[mark:] if "lib-b" in e["uri"]], "the registry saw it"


def test_allow_serves_only_what_it_lists(firewall, reg, scratch):
    gw = firewall(packages={"allow": ["app-a", "@myorg/*"]})
    r, _ = npm(gw, reg, scratch, ["app-a"])
    assert r.returncode != 0
    assert "package_denied" in r.stdout + r.stderr
    refused = [rec["package"]["name"] for rec in package_records(gw)
               if rec["reason"] == "package_denied"]
    assert refused and set(refused) == {"lib-b"}, refused


def test_case_and_separators_do_not_get_past_a_list(firewall, reg, bed):
    """Names are compared in their normal forms (docs/packages.md#names): npm's lower case,
    PyPI's PEP 503, for the list entry and the request alike."""
    gw = firewall(packages={"deny": ["lib-b", "App_A"]})
    for path in ("/npm/LIB-B", "/npm/%6cib-b", "/pypi/simple/Lib.B/", "/pypi/simple/app_a/",
                 "/pypi/simple/APP--A/"):
        status, _, body = curl_status(gw, reg, path)
        assert status == 403 and b"package_denied" in body, (path, status, body)
    # npm does not fold separators: its app_a is another package than app-a.
    assert curl_status(gw, reg, "/npm/app-a")[0] == 200


def curl_status(gw, reg, path):
    """GET https://allowed.test:PORT/PATH through sluice: (status, headers, body)."""
    r = gw.curl(gw.url(HOST, path, port=reg.port), "--path-as-is")
    return r.http_code, r.blocks, r.body


# --- advisories ------------------------------------------------------------------------------

def test_a_malicious_version_is_refused_as_a_file(firewall, reg, scratch):
    """A file a resolver never picked (a direct URL, a lockfile: docs/packages.md#the-decision)
    is refused; resolution itself skips the version (test_package_metadata.py)."""
    advisories = os.path.join(scratch, "osv")
    osv(advisories, "MAL-2026-100", "npm", "lib-b", versions=["1.2.0"])
    osv(advisories, "MAL-2026-101", "PyPI", "Lib_B", versions=["1.2"])  # 1.2 == 1.2.0, PEP 440
    gw = firewall(packages={"advisories": [advisories]})
    mark = len(reg.access())
    r, _ = npm(gw, reg, scratch, [reg.npm.tarball_url("lib-b", "1.2.0")])
    assert r.returncode != 0
    out = r.stdout + r.stderr
    # npm prints the status line (the reason); the advisory's id is in the body and the record.
    assert "package_malicious" in out and "lib-b-1.2.0.tgz" in out, out
    r, target = pip(gw, reg, scratch, [reg.pypi.file_url("lib-b", "1.2.0", "wheel")])
    assert r.returncode != 0
    assert "403" in r.stdout + r.stderr
    refused = [rec for rec in package_records(gw) if rec["reason"] == "package_malicious"]
    assert {(rec["package"]["ecosystem"], rec["package"]["version"], rec["package"]["advisory"])
            for rec in refused} == {("npm", "1.2.0", "MAL-2026-100"),
                                    ("pypi", "1.2.0", "MAL-2026-101")}
    assert not [e for e in reg.access()[mark:] if e["uri"].endswith(("lib-b-1.2.0.tgz",
                                                                     "1.2.0-py3-none-any.whl"))]
    # Another version of the same package is served.
    r, target = pip(gw, reg, scratch, [reg.pypi.file_url("lib-b", "1.1.0", "wheel")])
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.pip_installed(target) == {"lib-b": "1.1.0"}


def test_block_all_refuses_what_any_advisory_names(firewall, reg, scratch):
    advisories = os.path.join(scratch, "osv")
    osv(advisories, "GHSA-aaaa-bbbb-cccc", "npm", "lib-b",
        ranges=[{"type": "SEMVER", "events": [{"introduced": "1.2.0"}, {"fixed": "1.3.0"}]}])
    tarball = reg.npm.tarball_url("lib-b", "1.2.0")
    gw = firewall(packages={"advisories": [advisories]})
    status, _, body = curl_status(gw, reg, tarball.split(str(reg.port), 1)[1])
    assert status == 200
    gw = firewall(packages={"advisories": [advisories], "block": "all"})
    status, _, body = curl_status(gw, reg, tarball.split(str(reg.port), 1)[1])
    assert status == 403 and b"package_malicious" in body and b"GHSA-aaaa-bbbb-cccc" in body


def test_advisories_are_read_again_at_each_reload(firewall, reg, scratch):
    advisories = os.path.join(scratch, "osv")
    osv(advisories, "MAL-2026-200", "npm", "app-a", versions=["0.0.1"])
    gw = firewall(packages={"advisories": [advisories]})
    assert "policy 'bed': 1 advisories" in gw.sluice.stderr()
    path = reg.npm.tarball_url("app-a", "1.1.0").split(str(reg.port), 1)[1]
    assert curl_status(gw, reg, path)[0] == 200
    reloads = Reloads(gw.sluice)
    osv(advisories, "MAL-2026-201", "npm", "app-a", versions=["1.1.0"])
    sighup(gw.sluice)
    reloads.wait_applied(1)
    assert "policy 'bed': 2 advisories" in gw.sluice.stderr()
    status, _, body = curl_status(gw, reg, path)
    assert status == 403 and b"MAL-2026-201" in body
    # A document that is no advisory fails the reload; what was loaded stays in force.
    with open(os.path.join(advisories, "broken.json"), "w") as f:
        f.write('{"id": 7}')
    sighup(gw.sluice)
    reloads.wait_refused(1)
    assert "broken.json" in gw.sluice.stderr()
    assert curl_status(gw, reg, path)[0] == 403


def test_advisories_are_in_the_metrics(sluice_binary, bed, reg, scratch):
    """sluice_package_advisories{policy, fingerprint}: the count and the fingerprint the log
    line names, replaced at a reload that changes them (docs/metrics.md)."""
    advisories = os.path.join(scratch, "osv")
    osv(advisories, "MAL-2026-400", "npm", "app-a", versions=["0.0.1"])
    packages = with_packages({"advisories": [advisories]})
    runner = Runner(sluice_binary, bed)
    try:
        sluice = runner.start(rules=registry_rules(reg),
                              edit=with_admin(lambda config, workdir, port: packages(config,
                                                                                    workdir)))
        admin = Admin(sluice)
        loaded = admin.scrape().samples("sluice_package_advisories")
        assert [(s.labels["policy"], s.value) for s in loaded] == [("bed", 1)], loaded
        first = loaded[0].labels["fingerprint"]
        assert "fingerprint " + first in sluice.stderr()
        reloads = Reloads(sluice)
        osv(advisories, "MAL-2026-401", "npm", "app-a", versions=["0.0.2"])
        sighup(sluice)
        reloads.wait_applied(1)
        loaded = admin.scrape().samples("sluice_package_advisories")
        assert [(s.labels["policy"], s.value) for s in loaded] == [("bed", 2)], loaded
        assert loaded[0].labels["fingerprint"] not in (first, "")
    finally:
        runner.stop_all()


def test_a_missing_advisory_path_fails_the_start(sluice_binary, bed, reg, scratch):
    runner = Runner(sluice_binary, bed)
    try:
        with pytest.raises(RuntimeError):
            runner.start(rules=registry_rules(reg), edit=with_packages(
                {"advisories": [os.path.join(scratch, "nowhere")]}))
        assert "nowhere" in runner.started[-1].stderr()
    finally:
        runner.stop_all()


# --- what sluice cannot read -----------------------------------------------------------------

def test_paths_that_name_no_readable_package_are_refused(firewall, reg):
    gw = firewall(packages=None)
    mark = len(reg.access())
    # (With the rules' `paths`, an ambiguous path never gets this far: not_allowed_path.)
    for path in ("/npm/lib-b/-/other-1.0.0.tgz", "/npm/lib-b/a/b", "/npm/_private",
                 "/pypi/project/lib-b/", "/pypi/simple/lib-b/extra/"):
        status, _, body = curl_status(gw, reg, path)
        assert status == 403 and b"package_unrecognized" in body, (path, status, body)
    assert not reg.access()[mark:], "the registry saw a refused request"
    recs = [rec for rec in package_records(gw) if rec["reason"] == "package_unrecognized"]
    assert len(recs) == 5 and all(rec["package"]["kind"] == "unrecognized" for rec in recs)


# --- report mode -----------------------------------------------------------------------------

def test_report_mode_records_the_refusal_and_forwards(firewall, reg, scratch):
    gw = firewall(packages={"deny": ["lib-b"]}, mode="report")
    r, project = npm(gw, reg, scratch, ["app-a"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.npm_installed(project) == STANDARD_NPM_NEWEST
    reported = [rec for rec in package_records(gw) if rec["package"]["name"] == "lib-b"]
    assert reported and all(rec["decision"] == "report" and rec["reason"] == "package_denied"
                            for rec in reported)
