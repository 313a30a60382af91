"""`sluice audit sbom` (docs/packages.md#sbom) over the audit log of real npm and pip installs
through sluice (audit.hash_bodies: true) from the local registries of registry_server.py:

  - one component per package file served, with the purl of purl-spec's PURL-TYPES (a scoped
    npm name's scope percent-encoded, in `group`), the version installed, and as its SHA-256
    the digest of the very bytes the registry serves;
  - the sandbox and the first URL as properties; --sandbox of another sandbox: no components;
  - `sluice audit summary` lists the same files for the sandbox;
  - the document is valid against CycloneDX's published JSON schema 1.5 (bom-1.5 with the spdx
    and jsf schemas beside it, from the npm package @cyclonedx/cyclonedx-library, fetched once
    into a cache directory; python3-jsonschema, scripts/install-deps --test).
"""
import hashlib
import json
import os
import re
import subprocess
import tarfile

import jsonschema
import pytest

import clients
from gateway import Gateway, Runner
import registry_clients as rc
from registry_server import (STANDARD_NPM_NEWEST, STANDARD_PYPI_NEWEST, publish_standard,
                             registry_rules, serve)

HOST = "allowed.test"
SCHEMA_PACKAGE = "@cyclonedx/cyclonedx-library@10.3.0"
SCHEMAS = {"bom-1.5.schema.json": "bom-1.5.SNAPSHOT.schema.json",
           "spdx.schema.json": "spdx.SNAPSHOT.schema.json",
           "jsf-0.82.schema.json": "jsf-0.82.SNAPSHOT.schema.json"}


@pytest.fixture(scope="module")
def reg(bed):
    with serve(bed, host=HOST) as served:
        publish_standard(served)
        yield served


@pytest.fixture
def gw(sluice_binary, bed, reg):
    runner = Runner(sluice_binary, bed)
    yield Gateway(runner.start(rules=registry_rules(reg)), bed)
    runner.stop_all()


def schema_validator():
    """A Draft 7 validator of CycloneDX 1.5 JSON, from the npm package's res/schema (fetched
    with npm pack once into the cache directory; a failed fetch fails the test)."""
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                         "sluice-tests", "cyclonedx-schema")
    os.makedirs(cache, exist_ok=True)
    tgz = [f for f in os.listdir(cache) if f.endswith(".tgz")]
    if not tgz:
        r = subprocess.run(["npm", "pack", SCHEMA_PACKAGE, "--pack-destination", cache,
                            "--cache", os.path.join(cache, "npm-cache"), "--no-update-notifier"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, "npm pack %s: %s" % (SCHEMA_PACKAGE, r.stderr)
        tgz = [f for f in os.listdir(cache) if f.endswith(".tgz")]
    docs = {}
    with tarfile.open(os.path.join(cache, tgz[0])) as archive:
        for canonical, snapshot in SCHEMAS.items():
            doc = json.load(archive.extractfile("package/res/schema/" + snapshot))
            # The schemas name each other by their SNAPSHOT file names (relative to bom's $id)
            # and by their own $id: both resolve.
            docs["http://cyclonedx.org/schema/" + canonical] = doc
            docs["http://cyclonedx.org/schema/" + snapshot] = doc
    schema = docs["http://cyclonedx.org/schema/bom-1.5.schema.json"]
    try:
        from referencing import Registry, Resource  # jsonschema >= 4.18
        registry = Registry().with_resources(
            (uri, Resource.from_contents(doc)) for uri, doc in docs.items())
        return jsonschema.Draft7Validator(schema, registry=registry,
                                          format_checker=jsonschema.FormatChecker())
    except ImportError:  # Debian 12's 4.10
        resolver = jsonschema.RefResolver.from_schema(schema, store=docs)
        return jsonschema.Draft7Validator(schema, resolver=resolver,
                                          format_checker=jsonschema.FormatChecker())


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def props(component, name):
    return [p["value"] for p in component.get("properties", []) if p["name"] == name]


def test_the_sbom_of_npm_and_pip_installs(gw, reg, scratch):
    mark = gw.audit.mark()
    r, project = rc.npm_through(gw, reg, scratch, ["app-a"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.npm_installed(project) == STANDARD_NPM_NEWEST
    r, target = rc.pip_through(gw, reg, scratch, ["app-a"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.pip_installed(target) == STANDARD_PYPI_NEWEST
    files = len(STANDARD_NPM_NEWEST) + len(STANDARD_PYPI_NEWEST)
    gw.audit.wait(mark, lambda rec: (rec.get("package") or {}).get("kind") == "file", files)

    out = os.path.join(scratch, "sbom.json")
    r = clients.sluice_cli(gw, "audit", "sbom", gw.audit.path, "-o", out)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    with open(out) as f:
        bom = json.load(f)
    schema_validator().validate(bom)
    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.5"
    assert re.fullmatch(r"urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                        r"[0-9a-f]{12}", bom["serialNumber"])
    tool = bom["metadata"]["tools"]["components"][0]
    assert tool["name"] == "sluice"
    assert clients.sluice_cli(gw, "version").stdout.startswith("sluice %s\n" % tool["version"])

    expected = {}
    for name, version in STANDARD_NPM_NEWEST.items():
        purl = "pkg:npm/%s@%s" % (name.replace("@", "%40"), version)
        expected[purl] = (name, version, [sha256(reg.npm.tarball(name, version))])
    for name, version in STANDARD_PYPI_NEWEST.items():
        purl = "pkg:pypi/%s@%s" % (name, version)
        expected[purl] = (name, version, [sha256(reg.pypi.file(name, version, kind).data)
                                          for kind in ("wheel", "sdist")])
    components = bom["components"]
    assert [c["purl"] for c in components] == sorted(expected)
    for c in components:
        name, version, digests = expected[c["purl"]]
        assert c["type"] == "library" and c["bom-ref"] == c["purl"]
        assert c["version"] == version
        if name.startswith("@"):
            assert (c["group"], c["name"]) == tuple(name.split("/")), c
        else:
            assert "group" not in c and c["name"] == name, c
        assert len(c["hashes"]) == 1 and c["hashes"][0]["alg"] == "SHA-256", c
        assert c["hashes"][0]["content"] in digests, c  # the bytes the registry serves
        assert props(c, "sluice:sandbox") == ["sbx1"]
        [url] = props(c, "sluice:url")
        assert url.startswith("https://%s:%d/" % (HOST, reg.port)), url
        if c["purl"].startswith("pkg:npm/"):
            assert url.endswith(reg.npm.tarball_path(name, version)), url
        assert not props(c, "sluice:hashes_differ")

    # audit summary lists the same files per sandbox
    # (docs/cli.md#sluice-audit-summary-sluice-audit-report).
    r = clients.sluice_cli(gw, "audit", "summary", gw.audit.path, "--json")
    assert r.returncode == 0, r.stderr
    [sandbox] = json.loads(r.stdout)["sandboxes"]
    assert [p["purl"] for p in sandbox["packages"]] == sorted(expected)
    assert all(p["fetches"] == 1 for p in sandbox["packages"]), sandbox["packages"]
    r = clients.sluice_cli(gw, "audit", "summary", gw.audit.path)
    assert "@myorg/util" in r.stdout and "1.0.1" in r.stdout, r.stdout

    # To standard output; another sandbox's view is empty, and still a valid SBOM.
    r = clients.sluice_cli(gw, "audit", "sbom", gw.audit.path, "--sandbox", "nobody")
    assert r.returncode == 0, r.stderr
    other = json.loads(r.stdout)
    assert other["components"] == [] and other["serialNumber"] != bom["serialNumber"]
    schema_validator().validate(other)


def test_lines_that_are_no_records_are_counted_on_stderr(gw, scratch):
    log = os.path.join(scratch, "mixed.jsonl")
    with open(log, "w") as f:
        f.write('not json\n{"sandbox":"a","kind":"http","package":"x"}\n')
    r = clients.sluice_cli(gw, "audit", "sbom", log)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["components"] == []
    assert "2 lines skipped" in r.stderr, r.stderr
    r = clients.sluice_cli(gw, "audit", "sbom", os.path.join(scratch, "absent.jsonl"))
    assert r.returncode == 2 and "absent.jsonl" in r.stderr
