"""npm's scoped packages under a scope rule (docs/policy.md#npms-scoped-packages), with real npm
against a static registry that nginx serves at allowed.test/npm/:

  - `npm install @myorg/pkg` through sluice works: the packument (`/npm/@myorg%2fpkg`) and the
    tarball (`/npm/@myorg/pkg/-/pkg-1.0.0.tgz`) are both allowed by the rule's two prefixes;
  - `npm install @other/pkg` fails at its first request, 403 not_allowed_path, on record, and
    nginx never sees it;
  - the encoded slash the rule accepts opens nothing else: paths an origin would read as
    another file (`/npm/@myorg%2f..%2fsecret.txt`, an encoded `/` past the prefix, double
    encoding) are refused, and the file is never served.
"""
import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile

import pytest

import expect
from gateway import Gateway, Runner
from netutil import clean_env
from oracles import cdn_hits, get, marker

HOST = "allowed.test"
SCOPE_PREFIXES = ["/npm/@myorg%2f", "/npm/@myorg/"]
PACKAGES = ("@myorg/pkg", "@other/pkg")


@pytest.fixture(scope="module")
def scope_gw(sluice_binary, bed):
    """allowed.test with GET and HEAD under the @myorg scope of the registry at /npm/ only."""
    runner = Runner(sluice_binary, bed)
    rules = [{"name": "npm-myorg", "hosts": [HOST], "ports": [bed.tls_port],
              "methods": ["GET", "HEAD"], "paths": SCOPE_PREFIXES,
              "ips": ["127.0.0.20/32"]}]
    try:
        yield Gateway(runner.start(rules=rules), bed)
    finally:
        runner.stop_all()


def tarball_of(name, version):
    """An npm package tarball: package/package.json and package/index.js, gzip-compressed."""
    files = {"package/package.json": json.dumps({"name": name, "version": version,
                                                 "main": "index.js"}).encode(),
             "package/index.js": ("module.exports = %s;\n" % json.dumps(name)).encode()}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


@pytest.fixture(scope="module")
def registry(scope_gw, bed):
    """Both packages published as npm's registry lays them out (the packument at
    /npm/@scope%2fname, which nginx reads as npm/@scope/name/index.json; the tarball under
    -/), and a file beside them that no scope rule allows. Yields the registry URL."""
    written = []
    for name in PACKAGES:
        data = tarball_of(name, "1.0.0")
        base = name.split("/")[1]
        tarball_path = "/npm/%s/-/%s-1.0.0.tgz" % (name, base)
        integrity = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
        packument = {"name": name, "dist-tags": {"latest": "1.0.0"},
                     "versions": {"1.0.0": {
                         "name": name, "version": "1.0.0",
                         "dist": {"tarball": scope_gw.url(HOST, tarball_path),
                                  "integrity": integrity,
                                  "shasum": hashlib.sha1(data).hexdigest()}}}}
        for url_path, body in ((tarball_path, data),
                               ("/npm/%s/index.json" % name, json.dumps(packument).encode())):
            path = bed.content.path(HOST, url_path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(body)
        written.append(bed.content.path(HOST, "/npm/" + name.split("/")[0]))
    secret = bed.content.path(HOST, "/npm/secret.txt")
    with open(secret, "w") as f:
        f.write("not for the sandbox\n")
    try:
        yield scope_gw.url(HOST, "/npm/")
    finally:
        os.remove(secret)
        for directory in written:
            shutil.rmtree(directory)


def npm_install(gw, registry, package, scratch):
    """`npm install PACKAGE` in a fresh shell after `eval "$(sluice env ...)"`: npm's own
    config only (an empty user config, a cache in scratch), no audit request, no retries."""
    env_lines = subprocess.run(
        [gw.sluice.binary, "env", "-c", gw.sluice.config_path, "--sandbox", "sbx1"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    userconfig = os.path.join(scratch, "npmrc")
    open(userconfig, "w").close()
    project = os.path.join(scratch, "project")
    os.makedirs(project, exist_ok=True)
    command = ('eval "$SLUICE_ENV_LINES"\n'
               "npm install %s --registry %s --userconfig %s --cache %s --prefix %s "
               "--no-audit --no-fund --no-update-notifier --fetch-retries 0 "
               "--fetch-timeout 30000 --loglevel http"
               % (package, registry, userconfig, os.path.join(scratch, "npm-cache"), project))
    r = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=180,
                       cwd=scratch, env=clean_env(SLUICE_ENV_LINES=env_lines))
    return r, project


def test_npm_installs_a_package_of_the_allowed_scope(scope_gw, registry, scratch):
    mark = scope_gw.audit.mark()
    r, project = npm_install(scope_gw, registry, "@myorg/pkg", scratch)
    assert r.returncode == 0, r.stdout + r.stderr
    node = subprocess.run(["node", "-e", 'process.stdout.write(require("@myorg/pkg"))'],
                          capture_output=True, text=True, timeout=60, cwd=project)
    assert node.stdout == "@myorg/pkg", node.stderr
    records = scope_gw.audit.wait(mark, count=2)
    urls = {(rec["url"], rec["decision"], rec["rule"]) for rec in records}
    assert urls == {(scope_gw.url(HOST, "/npm/@myorg%2fpkg"), "allow", "npm-myorg"),
                    (scope_gw.url(HOST, "/npm/@myorg/pkg/-/pkg-1.0.0.tgz"), "allow",
                     "npm-myorg")}, records


def test_npm_is_refused_a_package_of_another_scope(scope_gw, bed, registry, scratch):
    mark = scope_gw.audit.mark()
    r, _ = npm_install(scope_gw, registry, "@other/pkg", scratch)
    assert r.returncode != 0, r.stdout
    # npm prints the status line, whose reason phrase names sluice's reason.
    assert "403" in r.stderr and "not_allowed_path" in r.stderr, r.stderr
    rec = scope_gw.audit.one(mark)
    expect.record(rec, decision="deny", reason="not_allowed_path", status=403, upstream=None,
                  url=scope_gw.url(HOST, "/npm/@other%2fpkg"))
    bed.nginx.barrier()
    assert [e for e in bed.nginx.access("cdn") if "@other" in e["uri"]] == []


@pytest.mark.parametrize("path", [
    "/npm/@myorg%2f..%2fsecret.txt",              # a dot segment once %2f is read as '/'
    "/npm/@myorg%2f%2e%2e%2fsecret.txt",
    "/npm/@myorg%2fpkg%2f..%2f..%2fsecret.txt",   # an encoded '/' past the prefix
    "/npm/@myorg/pkg%2f..%2f..%2fsecret.txt",
    "/npm/@myorg%252f..%252fsecret.txt",          # double encoding
    "/npm/@myorg%2f%2f..%2fsecret.txt",           # an empty segment, then a dot segment
])
def test_the_encoded_slash_opens_nothing_else(scope_gw, bed, registry, path):
    """nginx (which decodes %2f, then resolves dot segments) serves /npm/secret.txt for each of
    these paths but the double-encoded one, which an origin that decodes twice reads so (checked
    with a rule without paths): 403 not_allowed_path, on record, nothing reaches nginx."""
    m, mark = marker(), scope_gw.audit.mark()
    ex = scope_gw.tunnel(HOST, [get(path + "?m=" + m, HOST)])
    expect.denial(ex, 403, "not_allowed_path")
    rec = scope_gw.audit.one(mark, lambda rec: rec["client"] == ex.client)
    expect.record(rec, decision="deny", reason="not_allowed_path", upstream=None)
    assert cdn_hits(bed, m) == []


@pytest.mark.parametrize("path", ["/npm/@myorg%2Fpkg", "/npm/@myorg/pkg"])
def test_the_packument_reaches_the_origin_under_either_prefix(scope_gw, bed, registry, path):
    """The control for the test above: what the two prefixes allow reaches nginx as sent."""
    m = marker()
    ex = scope_gw.tunnel(HOST, [get(path + "?m=" + m, HOST, keep_alive=False)])
    assert ex.final.status == 200, ex.final
    assert json.loads(ex.final.body)["name"] == "@myorg/pkg"
    assert [e["uri"] for e in cdn_hits(bed, m)] == [path + "?m=" + m]
