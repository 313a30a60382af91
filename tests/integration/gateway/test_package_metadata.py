"""Registry metadata filtered in the request path (docs/packages.md#metadata), with real npm and
pip through sluice (only what `sluice env` prints) and curl, against the local registries of
registry_server.py (npm at allowed.test/npm/, PyPI at allowed.test/pypi/):

  - a version an OSV advisory calls malicious leaves the packument and the simple page, so npm
    and pip resolve to the newest version left and the install succeeds; the record of the
    document says what was removed and why;
  - each form is filtered: npm's full and abbreviated packuments, PyPI's PEP 691 JSON and a PEP
    503 page rendered for a client that asked for HTML; gzip'd or identity from the origin,
    served identity with sluice's own length, type and Vary, and no validators of the origin's;
  - the client's conditionals and ranges are not sent: it gets a whole filtered 200, never the
    origin's 304 or 206;
  - an origin that misbehaves (JSON cut short, a type that is not the document's, a document
    over `max_metadata`) gets the client a 502 with the reason, never its bytes;
  - the metadata of a package no advisory names is not held: it passes as the origin sent it;
  - HTTP/2 clients get the same filtered document;
  - with a minimum age, npm and pip install the newest versions old enough (npm's packument is
    asked for in its full form, which has `time`), `exempt` names are not held to it, and a too
    new file is refused (`package_too_new`) whatever asks for it; a PyPI file is as new as its
    own upload, whatever its release's other files.
"""
import gzip
import json
import os
import sys

import pytest

import clients
from gateway import Gateway, Runner
import registry_clients as rc
from registries import normalize
from registry_server import (STANDARD_NPM_OLDER_THAN_7D, STANDARD_PYPI_OLDER_THAN_7D,
                             publish_standard, registry_rules, serve)

HOST = "allowed.test"
NPM_ABBREVIATED = "application/vnd.npm.install-v1+json"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


def osv(directory, ident, ecosystem, name, versions):
    os.makedirs(directory, exist_ok=True)
    doc = {"id": ident, "modified": "2026-12-01T00:00:00Z", "summary": "test advisory",
           "affected": [{"package": {"ecosystem": ecosystem, "name": name},
                         "versions": list(versions)}]}
    with open(os.path.join(directory, ident + ".json"), "w") as f:
        json.dump(doc, f)


@pytest.fixture(scope="module", params=["static", "off"])
def reg(request, bed):
    """The registries, gzip'd ("static": nginx serves the .gz beside each document) or not."""
    with serve(bed, host=HOST, compression=request.param) as served:
        publish_standard(served)
        yield served


@pytest.fixture
def advisories(scratch):
    """lib-b 1.2.0, the newest of both registries, is malicious."""
    directory = os.path.join(scratch, "osv")
    osv(directory, "MAL-2026-300", "npm", "lib-b", ["1.2.0"])
    osv(directory, "MAL-2026-301", "PyPI", "lib-b", ["1.2.0"])
    return directory


@pytest.fixture
def firewall(sluice_binary, bed, reg):
    runners = []

    def make(packages, rules=None):
        runner = Runner(sluice_binary, bed)
        runners.append(runner)

        def edit(config, workdir):
            config["policies"]["bed"]["packages"] = packages
        return Gateway(runner.start(rules=rules or registry_rules(reg), edit=edit), bed)
    yield make
    for runner in runners:
        runner.stop_all()


def get(gw, reg, path, *headers, http2=False):
    args = ["--path-as-is", "--http2" if http2 else "--http1.1"]
    for h in headers:
        args += ["-H", h]
    return gw.curl(gw.url(HOST, path, port=reg.port), *args)


def metadata_records(gw, name):
    return [r for r in gw.audit.since(0)
            if (r.get("package") or {}).get("kind") == "metadata"
            and r["package"]["name"] == name]


# --- resolution ------------------------------------------------------------------------------

def test_npm_and_pip_resolve_past_a_malicious_version(firewall, reg, advisories, scratch):
    gw = firewall({"advisories": [advisories]})
    r, project = rc.npm_through(gw, reg, scratch, ["app-a"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.npm_installed(project) == {"app-a": "1.1.0", "lib-b": "1.1.0",
                                         "@myorg/util": "1.0.1"}
    r, target = rc.pip_through(gw, reg, scratch, ["app-a"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.pip_installed(target) == {"app-a": "1.1.0", "lib-b": "1.1.0"}
    removed = {"count": 1, "versions": [{"version": "1.2.0", "reason": "package_malicious",
                                         "advisory": None}]}
    for ecosystem, advisory in (("npm", "MAL-2026-300"), ("pypi", "MAL-2026-301")):
        records = [r for r in metadata_records(gw, "lib-b")
                   if r["package"]["ecosystem"] == ecosystem]
        assert records, ecosystem
        removed["versions"][0]["advisory"] = advisory
        for record in records:
            assert record["status"] == 200 and record["decision"] == "allow", record
            assert record["package"]["removed"] == removed, record
    # Nothing an advisory names was filtered: app-a's documents pass as the origin sent them.
    assert all(r["package"]["removed"] is None for r in metadata_records(gw, "app-a"))


# --- the forms -------------------------------------------------------------------------------

@pytest.mark.parametrize("accept", [None, NPM_ABBREVIATED])
def test_both_npm_forms_are_filtered(firewall, reg, advisories, accept):
    gw = firewall({"advisories": [advisories]})
    headers = ["Accept-Encoding: gzip"] + (["Accept: " + accept] if accept else [])
    r = get(gw, reg, reg.npm.packument_path("lib-b"), *headers)
    assert r.http_code == 200, (r.http_code, r.body)
    final = r.final
    assert final.header("Content-Type").startswith(accept or "application/json")
    assert final.header("Content-Encoding") is None and final.header("ETag") is None
    assert final.header("Last-Modified") is None
    assert final.header("Content-Length") == str(len(r.body))
    assert final.header("Sluice-Removed") == "1"
    assert final.header("Vary") == "Accept, Accept-Encoding"
    doc = json.loads(r.body)
    assert set(doc["versions"]) == {"1.0.0", "1.1.0", "2.0.0-beta.1"}
    assert doc["dist-tags"] == {"latest": "1.1.0", "next": "2.0.0-beta.1"}
    if accept is None:
        assert "1.2.0" not in doc["time"] and "1.1.0" in doc["time"]
    # What stays is the origin's bytes: the kept versions as it wrote them.
    origin_full, origin_abbreviated = reg.npm.documents("lib-b")
    origin = origin_abbreviated if accept else origin_full
    assert doc["versions"]["1.1.0"] == origin["versions"]["1.1.0"]


@pytest.mark.parametrize("accept,served_type", [
    (SIMPLE_JSON, SIMPLE_JSON),
    ("application/vnd.pypi.simple.v1+html", "application/vnd.pypi.simple.v1+html"),
    ("text/html", "text/html"),
    (None, "text/html")])
def test_pypi_pages_are_filtered_in_the_form_the_client_asked_for(firewall, reg, advisories,
                                                                  accept, served_type):
    gw = firewall({"advisories": [advisories]})
    mark = len(reg.access())
    r = get(gw, reg, reg.pypi.project_path("lib-b"), *(["Accept: " + accept] if accept else []))
    assert r.http_code == 200, (r.http_code, r.body)
    assert r.final.header("Content-Type").startswith(served_type)
    assert r.final.header("Sluice-Removed") == "1"
    text = r.body.decode()
    assert "lib_b-1.1.0-py3-none-any.whl" in text and "lib_b-1.0.0.tar.gz" in text
    assert "1.2.0" not in text.replace("1.2.0-py3", "")  # (no file of 1.2.0 at all)
    assert "lib_b-1.2.0" not in text
    if served_type == SIMPLE_JSON:
        doc = json.loads(text)
        assert doc["versions"] == ["1.0.0", "1.1.0"]
        assert all("upload-time" in f for f in doc["files"])
    # sluice asked the origin for the JSON, which has upload times, whatever the client took.
    asked = [e for e in reg.access()[mark:] if e["uri"].endswith("/simple/lib-b/")]
    assert asked and all(e["accept"].startswith(SIMPLE_JSON) for e in asked), asked


def test_pypi_json_api_is_filtered(firewall, reg, advisories):
    """PyPI's JSON API loses what the simple page loses; `info` stays as the origin wrote it; a
    version's document of a refused version is refused with its reason (docs/packages.md#metadata)."""
    gw = firewall({"advisories": [advisories]})
    path = lambda version=None: reg.pypi.json_api_url("lib-b", version).split(str(reg.port), 1)[1]
    r = get(gw, reg, path(), "Accept-Encoding: gzip")
    assert r.http_code == 200, (r.http_code, r.body)
    assert r.final.header("Content-Type") == "application/json"
    assert r.final.header("Sluice-Removed") == "1" and r.final.header("Content-Encoding") is None
    doc, origin = json.loads(r.body), reg.pypi.json_api("lib-b")
    assert set(doc["releases"]) == set(origin["releases"]) - {"1.2.0"}
    assert doc["releases"]["1.1.0"] == origin["releases"]["1.1.0"]
    assert doc["info"] == origin["info"] and origin["info"]["version"] == "1.2.0"
    assert doc["urls"] == []  # 1.2.0's files
    record = [rec for rec in gw.audit.since(0) if (rec["url"] or "").endswith(path())][-1]
    assert record["package"]["kind"] == "metadata" and \
        record["package"]["removed"]["versions"][0]["advisory"] == "MAL-2026-301", record
    # One version's document: served filtered, or refused with the version's reason.
    r = get(gw, reg, path("1.1.0"))
    assert r.http_code == 200 and json.loads(r.body) == reg.pypi.json_api("lib-b", "1.1.0")
    r = get(gw, reg, path("1.2.0"))
    assert r.http_code == 403 and r.sluice_reason == "package_malicious", (r.http_code, r.body)
    assert b"MAL-2026-301" in r.body
    # With the age rule, the releases younger than 7 days go.
    gw = firewall({"min_age": "7d"})
    r = get(gw, reg, path())
    assert r.http_code == 200, (r.http_code, r.body)
    older = {v for v, rel in reg.pypi.projects["lib-b"].items()
             if rel.published <= reg.pypi.now - 7 * 24 * 3600}
    assert set(json.loads(r.body)["releases"]) == older and "1.1.0" in older, older
    r = get(gw, reg, path("1.2.0"))
    assert r.http_code == 403 and r.sluice_reason == "package_too_new", (r.http_code, r.body)


def test_a_page_that_is_not_its_type_is_refused(firewall, reg, advisories):
    """HTML under PEP 691's JSON type: refused, not read as either."""
    reg.pypi.replace_document("lib-b", reg.pypi.simple_html("lib-b").encode(), forms=("json",))
    try:
        gw = firewall({"advisories": [advisories]})
        r = get(gw, reg, reg.pypi.project_path("lib-b"), "Accept: " + SIMPLE_JSON)
        assert r.http_code == 502 and r.sluice_reason == "package_metadata_invalid", r.body
        assert b"lib_b-1.2.0" not in r.body
    finally:
        reg.pypi.rewrite("lib-b")


# --- what the client asks that would pass the filter by -------------------------------------

def test_conditionals_and_ranges_get_a_whole_filtered_document(firewall, reg, advisories):
    # The origin's validator, as a client that fetched the document before would have it.
    unfiltered = get(firewall({"deny": ["nothing-here"]}), reg, reg.npm.packument_path("lib-b"))
    etag = unfiltered.final.header("ETag")
    assert etag and "1.2.0" in json.loads(unfiltered.body)["versions"]
    gw = firewall({"advisories": [advisories]})
    for header in ("If-None-Match: " + etag, "If-Modified-Since: Wed, 01 Jan 2098 00:00:00 GMT",
                   "Range: bytes=0-99"):
        r = get(gw, reg, reg.npm.packument_path("lib-b"), header)
        assert r.http_code == 200, (header, r.http_code)
        assert "1.2.0" not in json.loads(r.body)["versions"], header


# --- misbehaving origins ---------------------------------------------------------------------

@pytest.mark.parametrize("case", ["truncated", "not_json", "trailing"])
def test_a_document_the_filter_cannot_read_is_refused(firewall, reg, advisories, case):
    full, _ = reg.npm.documents("lib-b")
    text = json.dumps(full).encode()
    data = {"truncated": text[:len(text) // 2], "not_json": b"<html>hello</html>",
            "trailing": text + b"{}"}[case]
    reg.npm.replace_document("lib-b", data)
    try:
        gw = firewall({"advisories": [advisories]})
        r = get(gw, reg, reg.npm.packument_path("lib-b"))
        assert r.http_code == 502 and r.sluice_reason == "package_metadata_invalid", r.body
        assert b"1.2.0" not in r.body
        record = metadata_records(gw, "lib-b")[-1]
        assert record["reason"] == "package_metadata_invalid" and record["status"] == 502
    finally:
        reg.npm.rewrite("lib-b")


def test_a_document_over_max_metadata_is_refused(firewall, reg, advisories):
    full, _ = reg.npm.documents("lib-b")
    full["readme"] = "x" * (3 << 20)  # 3 MiB, over a 1 MiB max_metadata
    reg.npm.replace_document("lib-b", json.dumps(full).encode())
    try:
        gw = firewall({"advisories": [advisories], "max_metadata": "1MiB"})
        r = get(gw, reg, reg.npm.packument_path("lib-b"), "Accept-Encoding: gzip")
        assert r.http_code == 502 and r.sluice_reason == "package_metadata_too_large", r.body
        # The same document under a larger bound is served, filtered.
        gw = firewall({"advisories": [advisories], "max_metadata": "8MiB"})
        r = get(gw, reg, reg.npm.packument_path("lib-b"))
        assert r.http_code == 200 and "1.2.0" not in json.loads(r.body)["versions"]
    finally:
        reg.npm.rewrite("lib-b")


def test_a_gzip_bomb_is_refused_at_the_bound(firewall, reg, advisories):
    """A small gzip'd body that inflates past max_metadata: sluice stops at the bound."""
    bomb = gzip.compress(b'{"name":"lib-b","readme":"' + b"a" * (64 << 20) + b'"}')
    assert len(bomb) < 100_000
    gz = reg.npm._document_file("lib-b", False) + ".gz"
    saved = open(gz, "rb").read()
    with open(gz, "wb") as f:
        f.write(bomb)
    try:
        gw = firewall({"advisories": [advisories], "max_metadata": "2MiB"})
        r = get(gw, reg, reg.npm.packument_path("lib-b"), "Accept-Encoding: gzip")
        if reg.server.compression == "off":
            assert r.http_code == 200  # nginx never served the .gz: the real document
        else:
            assert r.http_code == 502 and r.sluice_reason == "package_metadata_too_large"
    finally:
        with open(gz, "wb") as f:
            f.write(saved)


# --- what is not held ------------------------------------------------------------------------

def test_metadata_no_advisory_names_passes_as_sent(firewall, reg, advisories):
    gw = firewall({"advisories": [advisories]})
    r = get(gw, reg, reg.npm.packument_path("app-a"))
    assert r.http_code == 200
    assert r.final.header("Sluice-Removed") is None and r.final.header("ETag") is not None
    full, _ = reg.npm.documents("app-a")
    assert json.loads(r.body) == full


def test_http2_clients_get_the_filtered_document(firewall, reg, advisories):
    gw = firewall({"advisories": [advisories]})
    for path in (reg.npm.packument_path("lib-b"), reg.pypi.project_path("lib-b")):
        r = get(gw, reg, path, "Accept: " + (SIMPLE_JSON if "simple" in path else "*/*"),
                http2=True)
        assert r.http_code == 200, (path, r.http_code, r.body)
        assert r.final.header("sluice-removed") == "1", r.blocks
        assert int(r.final.header("content-length")) == len(r.body)
    records = metadata_records(gw, "lib-b")
    assert len(records) == 2 and all(rec["proto"] == "h2" for rec in records), records
    assert all(rec["resp_bytes"] > 0 for rec in records)


# --- the age rule ----------------------------------------------------------------------------

def test_a_minimum_age_makes_npm_and_pip_install_older_versions(firewall, reg, scratch):
    gw = firewall({"min_age": "7d"})
    mark = len(reg.access())
    r, project = rc.npm_through(gw, reg, scratch, ["app-a"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.npm_installed(project) == STANDARD_NPM_OLDER_THAN_7D
    r, target = rc.pip_through(gw, reg, scratch, ["app-a"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.pip_installed(target) == STANDARD_PYPI_OLDER_THAN_7D
    # npm asked for the abbreviated form; sluice asked the origin for the one with `time`.
    packuments = [e for e in reg.access()[mark:] if e["uri"] == reg.npm.packument_path("lib-b")]
    assert packuments and all(e["accept"] == "application/json" for e in packuments), packuments
    record = [r for r in metadata_records(gw, "lib-b") if r["package"]["ecosystem"] == "npm"][0]
    assert record["package"]["removed"]["count"] == 2  # 1.2.0 (1 h), 2.0.0-beta.1 (3 h)
    assert {v["reason"] for v in record["package"]["removed"]["versions"]} == {"package_too_new"}


def test_exempt_names_are_not_held_to_the_age(firewall, reg, scratch):
    gw = firewall({"min_age": "7d", "exempt": ["@myorg/*"]})
    r, project = rc.npm_through(gw, reg, scratch, ["@myorg/util"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.npm_installed(project) == {"@myorg/util": "1.0.1"}  # 30 minutes old


def test_a_too_new_file_is_refused_whatever_asks_for_it(firewall, reg, scratch):
    """A lockfile or a URL skips the metadata: the file is refused, with the age sluice learned
    from the metadata, or because it learned none (docs/packages.md#the-decision)."""
    gw = firewall({"min_age": "7d"})
    tarball = reg.npm.tarball_path("lib-b", "1.2.0")
    # Never seen: sluice asks for the packument itself, and refuses by the time it gives.
    mark = len(reg.access())
    status = get(gw, reg, tarball)
    assert status.http_code == 403 and status.sluice_reason == "package_too_new"
    assert b"was published 1 hours ago" in status.body, status.body
    assert [e["uri"] for e in reg.access()[mark:]] == [reg.npm.packument_path("lib-b")]
    # Once learned, the time is known: no second fetch.
    mark = len(reg.access())
    status = get(gw, reg, tarball)
    assert status.http_code == 403 and b"was published 1 hours ago" in status.body, status.body
    assert not reg.access()[mark:]
    assert get(gw, reg, reg.npm.tarball_path("lib-b", "1.1.0")).http_code == 200
    # PyPI: sluice asks the same host for the project's simple page, as JSON, and judges the
    # wheel by its own upload time (docs/packages.md#the-age-rule).
    wheel = lambda version: reg.pypi.file("lib-b", version).url_path
    mark = len(reg.access())
    status = get(gw, reg, wheel("1.1.0"))
    assert status.http_code == 200, status.body
    asked = reg.access()[mark:]
    assert [e["uri"] for e in asked] == [reg.pypi.project_path("lib-b"), wheel("1.1.0")], asked
    assert asked[0]["accept"].startswith(SIMPLE_JSON), asked
    status = get(gw, reg, wheel("1.2.0"))
    assert status.http_code == 403 and b"this file was uploaded 1 hours ago" in status.body, \
        status.body
    # A files host that serves no index (pypi.org's) answers 404: the wheel stays of unknown
    # age, refused.
    rules = registry_rules(reg)
    files_only = firewall({"min_age": "7d"}, [dict(rules[1], name="pypi-files",
                                                   paths=["/pypi/packages/"],
                                                   registry={"ecosystem": "pypi",
                                                             "path": "/pypi/packages/"})] + rules)
    mark = len(reg.access())
    status = get(files_only, reg, wheel("1.1.0"))
    assert status.http_code == 403 and status.sluice_reason == "package_too_new"
    assert b"answered 404" in status.body, status.body
    assert [e["uri"] for e in reg.access()[mark:]] == ["/pypi/packages/simple/lib-b/"]
    # npm given the URL, pip given the wheel's: each fails with the reason.
    r, _ = rc.npm_through(gw, reg, scratch, [reg.npm.tarball_url("lib-b", "1.2.0")])
    assert r.returncode != 0 and "package_too_new" in r.stdout + r.stderr, r.stdout + r.stderr
    r, _ = rc.pip_through(gw, reg, scratch, [reg.pypi.file_url("lib-b", "1.2.0", "wheel")])
    assert r.returncode != 0 and "package_too_new" in r.stdout + r.stderr, r.stdout + r.stderr
    refused = [rec for rec in gw.audit.since(0) if rec["reason"] == "package_too_new"]
    assert refused and all(rec["status"] == 403 and rec["package"]["kind"] == "file"
                           for rec in refused)


def test_a_pypi_file_is_as_new_as_its_own_upload(firewall, reg, scratch):
    """A PyPI release takes files at any time: a wheel uploaded an hour ago to a month-old
    release leaves the page and is refused as a file, while the release's older files install
    (docs/packages.md#the-age-rule)."""
    name = "lib-late"
    if normalize(name) not in reg.pypi.projects:  # (the module's registry is shared)
        reg.pypi.publish(name, "1.0", age=30 * 24 * 3600)
        # pip ranks this interpreter's tag above py3-none-any, so it picks the late wheel
        # whenever it is listed.
        reg.pypi.add_wheel(name, "1.0", "py%d%d-none-any" % sys.version_info[:2], age=3600,
                           marker=b"ADDED_LATER = True\n")
    old = reg.pypi.file(name, "1.0")
    late = reg.pypi.file(name, "1.0", "py%d%d-none-any" % sys.version_info[:2])
    # Without the age rule pip takes the late wheel; with it, the old one.
    for packages, fetched, skipped in (({"deny": ["nothing-here"]}, late, old),
                                       ({"min_age": "7d"}, old, late)):
        gw = firewall(packages)
        mark = len(reg.access())
        install_scratch = os.path.join(scratch, fetched.filename)
        os.makedirs(install_scratch)
        r, target = rc.pip_through(gw, reg, install_scratch, [name])
        assert r.returncode == 0, r.stdout + r.stderr
        assert rc.pip_installed(target) == {name: "1.0"}
        uris = [e["uri"] for e in reg.access()[mark:]]
        assert fetched.url_path in uris and skipped.url_path not in uris, uris
    # The page's record lists the version that lost a file.
    record = metadata_records(gw, name)[-1]
    assert record["package"]["removed"] == {
        "count": 1, "versions": [{"version": "1.0", "reason": "package_too_new",
                                  "advisory": None}]}, record
    # Asked for directly, the late wheel is refused by its own time; the old one is served.
    status = get(gw, reg, late.url_path)
    assert status.http_code == 403 and status.sluice_reason == "package_too_new"
    assert b"this file was uploaded 1 hours ago" in status.body, status.body
    assert get(gw, reg, old.url_path).http_code == 200


def npm_ci(gw, reg, scratch, project_from):
    """`npm ci` of the project `project_from` made (its package.json and lockfile), in a new
    project directory with an empty cache: tarballs only, no packument."""
    ci_scratch = os.path.join(scratch, "ci")
    os.makedirs(ci_scratch, exist_ok=True)
    argv, project = rc.npm_install_argv(reg.npm.registry_url, [], ci_scratch)
    for name in ("package.json", "package-lock.json"):
        with open(os.path.join(project_from, name)) as src, \
                open(os.path.join(project, name), "w") as dst:
            dst.write(src.read())
    argv[argv.index("install")] = "ci"
    return rc.run(argv, ci_scratch, env_lines=clients.env_lines(gw)), project


def test_a_lockfile_install_is_held_to_the_age(firewall, reg, scratch):
    """`npm ci` fetches tarballs only: sluice fetches each package's packument itself to learn
    the publish time (docs/packages.md#the-age-rule). A lockfile pinning a version old enough
    installs; one pinning a version too new fails with package_too_new."""
    locking = firewall({"deny": ["nothing-here"]})
    for pins, expect_ok in ((["app-a@1.0.0", "lib-b@1.1.0"], True),
                            (["app-a@1.0.0", "lib-b@1.2.0"], False)):
        lock_scratch = os.path.join(scratch, "lock-" + pins[1].replace("@", "-"))
        os.makedirs(lock_scratch)
        r, locked = rc.npm_through(locking, reg, lock_scratch, pins)
        assert r.returncode == 0, r.stdout + r.stderr
        gw = firewall({"min_age": "7d"})  # a new sluice: it learned no times yet
        mark = len(reg.access())
        r, project = npm_ci(gw, reg, lock_scratch, locked)
        out = r.stdout + r.stderr
        if expect_ok:
            assert r.returncode == 0, out
            assert rc.npm_installed(project) == {"app-a": "1.0.0", "lib-b": "1.1.0"}
        else:
            assert r.returncode != 0 and "package_too_new" in out, out
            refused = [rec for rec in gw.audit.since(0) if rec["reason"] == "package_too_new"]
            assert [rec["package"]["version"] for rec in refused] == ["1.2.0"], refused
            assert b"1 hours ago" in b"".join(
                l.encode() for l in gw.sluice.stderr().splitlines() if "package_too_new" in l)
        # sluice asked for the packuments itself (npm ci asks for none), in their full form.
        asked = [e for e in reg.access()[mark:] if e["uri"] == reg.npm.packument_path("lib-b")]
        assert asked and all(e["accept"] == "application/json" for e in asked), asked
        # The records are the files' only: sluice's own requests have none.
        kinds = {rec["package"]["kind"] for rec in gw.audit.since(0) if rec.get("package")}
        assert kinds == {"file"}, kinds


def test_a_document_with_nothing_removed_is_sent_as_the_origin_coded_it(firewall, reg, scratch):
    """Filtered and found whole: a client that takes gzip gets the origin's gzip'd bytes (they
    decode to exactly the document sluice judged), not several times as many; one that does not
    gets identity (docs/packages.md#metadata)."""
    directory = os.path.join(scratch, "osv-none")
    osv(directory, "MAL-2026-399", "npm", "lib-b", ["9.9.9"])  # names lib-b, no version of it
    gw = firewall({"advisories": [directory]})
    full, _ = reg.npm.documents("lib-b")
    r = get(gw, reg, reg.npm.packument_path("lib-b"), "Accept-Encoding: gzip")
    assert r.http_code == 200 and r.final.header("Sluice-Removed") == "0"
    if reg.server.compression == "static":
        assert r.final.header("Content-Encoding") == "gzip"
        assert int(r.final.header("Content-Length")) == len(r.body)
        assert json.loads(gzip.decompress(r.body)) == full
    else:
        assert r.final.header("Content-Encoding") is None and json.loads(r.body) == full
    r = get(gw, reg, reg.npm.packument_path("lib-b"))  # no Accept-Encoding: identity
    assert r.http_code == 200 and r.final.header("Content-Encoding") is None
    assert json.loads(r.body) == full
    record = metadata_records(gw, "lib-b")[0]
    assert record["package"]["removed"] == {"count": 0, "versions": []}
