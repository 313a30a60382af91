"""The local registries of the package-firewall tests (registries.py, registry_server.py) are
what real clients expect, checked without sluice: npm and pip install from them directly (by
address: neither can resolve the bed's names without sluice), and each document comes back in
the form and encoding its Accept and Accept-Encoding ask for.
"""
import base64
import gzip
import hashlib
import io
import json
import subprocess
import tarfile
import zipfile

import pytest

import clients
import registry_clients as rc
from registries import DAY, NPM_ABBREVIATED, NPM_ACCEPT, NPM_FULL, PIP_ACCEPT, PYPI_HTML, PYPI_JSON
from registry_server import STANDARD_NPM_NEWEST, STANDARD_PYPI_NEWEST, publish_standard, serve


@pytest.fixture(scope="module")
def reg(bed):
    with serve(bed, host="127.0.0.20") as served:
        publish_standard(served)
        yield served


@pytest.fixture(scope="module")
def cafile(bed):
    return bed.pki.test_ca.cert


def requests_since(reg, mark, fragment):
    return [e for e in reg.access()[mark:] if fragment in e["uri"]]


def test_npm_installs_the_newest_tree(reg, cafile, scratch):
    """app-a@latest pulls lib-b@^1.0.0 (1.2.0, not the `next` beta) and @myorg/util; each
    index.js reports its version and its dependencies' versions."""
    mark = len(reg.access())
    argv, project = rc.npm_install_argv(reg.npm.registry_url, ["app-a"], scratch, cafile)
    r = rc.run(argv, scratch)
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.npm_installed(project) == STANDARD_NPM_NEWEST
    node = subprocess.run(["node", "-e", 'process.stdout.write(JSON.stringify(require("app-a")))'],
                          capture_output=True, text=True, timeout=60, cwd=project)
    assert json.loads(node.stdout) == {"name": "app-a", "version": "1.1.0", "dependencies": {
        "@myorg/util": "1.0.1", "lib-b": "1.2.0"}}, node.stderr
    # Each packument in the form npm asked for: npm 11 resolves with the full form (Accept:
    # application/json, for `time`); older npm asks for the abbreviated one (NPM_ACCEPT).
    # The scoped packument's slash is encoded.
    packuments = [e for e in reg.access()[mark:] if not e["uri"].endswith(".tgz")]
    assert {e["uri"] for e in packuments} == {"/npm/app-a", "/npm/lib-b", "/npm/@myorg%2futil"}
    for e in packuments:
        asked = NPM_ABBREVIATED if e["accept"].startswith(NPM_ABBREVIATED) else NPM_FULL
        assert e["content_type"] == asked and e["status"] == "200", e
    assert len(requests_since(reg, mark, ".tgz")) == 3


def test_npm_installs_a_pinned_older_version(reg, cafile, scratch):
    argv, project = rc.npm_install_argv(reg.npm.registry_url, ["app-a@1.0.0"], scratch, cafile)
    r = rc.run(argv, scratch)
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.npm_installed(project) == {"app-a": "1.0.0", "lib-b": "1.2.0"}


def test_pip_installs_the_newest_tree(reg, cafile, scratch):
    """app-a pulls lib-b>=1.0 (Requires-Dist) as wheels; pip asks for PEP 691 JSON."""
    mark = len(reg.access())
    r = rc.run(rc.pip_install_argv(reg.pypi.index_url, ["app-a"], scratch, cafile), scratch)
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.pip_installed(scratch) == STANDARD_PYPI_NEWEST
    python = subprocess.run(["/usr/bin/python3", "-c", "import app_a, lib_b; "
                             "print(app_a.__version__, lib_b.__version__)"],
                            capture_output=True, text=True, timeout=60, cwd=scratch)
    assert python.stdout.split() == ["1.1.0", "1.2.0"], python.stderr
    pages = requests_since(reg, mark, "/simple/")
    assert [e["uri"] for e in pages] == ["/pypi/simple/app-a/", "/pypi/simple/lib-b/"]
    for e in pages:
        assert e["accept"] == PIP_ACCEPT and e["content_type"] == PYPI_JSON, e
    assert [e["uri"].rsplit("/", 1)[1] for e in requests_since(reg, mark, "/packages/")] == \
        ["app_a-1.1.0-py3-none-any.whl", "lib_b-1.2.0-py3-none-any.whl"]


def test_pip_builds_an_sdist(reg, cafile, scratch):
    """An sdist installs (setuptools.build_meta, build isolation off): the files are real."""
    argv = rc.pip_install_argv(reg.pypi.index_url, ["lib-b==1.1.0"], scratch, cafile,
                               extra=["--no-binary", "lib-b"])
    r = rc.run(argv, scratch)
    assert r.returncode == 0, r.stdout + r.stderr
    assert rc.pip_installed(scratch) == {"lib-b": "1.1.0"}


NPM_FORMS = [(None, NPM_FULL), ("application/json", NPM_FULL), (NPM_ACCEPT, NPM_ABBREVIATED),
             (NPM_ABBREVIATED, NPM_ABBREVIATED), (NPM_ABBREVIATED + ";q=0, */*", NPM_FULL)]


@pytest.mark.parametrize("accept,content_type", NPM_FORMS)
@pytest.mark.parametrize("compressed", [False, True], ids=["identity", "gzip"])
@pytest.mark.parametrize("name", ["lib-b", "@myorg/util"])
def test_npm_packument_by_accept(reg, cafile, name, accept, content_type, compressed):
    status, headers, body = rc.get(reg.npm.packument_url(name), cafile, accept, compressed)
    assert status == 200 and headers["content-type"] == content_type, headers
    assert "Accept" in headers["vary"], headers
    if compressed:
        assert headers["content-encoding"] == "gzip" and body[:2] == b"\x1f\x8b", headers
        body = gzip.decompress(body)
    else:
        assert "content-encoding" not in headers, headers
    doc = json.loads(body)
    full, abbreviated = reg.npm.documents(name)
    assert doc == (full if content_type == NPM_FULL else abbreviated)
    assert doc["name"] == name and doc["dist-tags"]["latest"] == STANDARD_NPM_NEWEST[name]
    for version, manifest in doc["versions"].items():
        data = reg.npm.tarball(name, version)
        assert manifest["dist"]["tarball"] == reg.npm.tarball_url(name, version)
        assert manifest["dist"]["shasum"] == hashlib.sha1(data).hexdigest()
        assert manifest["dist"]["integrity"] == \
            "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    if content_type == NPM_FULL:
        assert set(doc["time"]) == {"created", "modified"} | set(doc["versions"])
        assert doc["time"]["modified"] == max(doc["time"].values())
    else:
        assert "time" not in doc and doc["modified"] == full["time"]["modified"]


def test_npm_tags_and_times(reg):
    full, _ = reg.npm.documents("lib-b")
    assert full["dist-tags"] == {"latest": "1.2.0", "next": "2.0.0-beta.1"}
    assert list(full["versions"]) == ["1.0.0", "1.1.0", "2.0.0-beta.1", "1.2.0"]
    assert full["time"]["1.0.0"] == full["time"]["created"] == reg.npm.published("lib-b", "1.0.0")
    assert full["time"]["1.2.0"] == full["time"]["modified"]


def test_npm_tarball_is_a_package(reg, cafile):
    status, headers, body = rc.get(reg.npm.tarball_url("@myorg/util", "1.0.1"), cafile,
                                   gzip=True)
    assert status == 200 and headers["content-type"] == "application/octet-stream", headers
    assert "content-encoding" not in headers and body == reg.npm.tarball("@myorg/util", "1.0.1")
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        manifest = json.load(tar.extractfile("package/package.json"))
    assert (manifest["name"], manifest["version"]) == ("@myorg/util", "1.0.1")


PYPI_FORMS = [(None, "text/html"), ("text/html", "text/html"), (PIP_ACCEPT, PYPI_JSON),
              (PYPI_JSON, PYPI_JSON), ("application/vnd.pypi.simple.latest+json", PYPI_JSON),
              (PYPI_HTML, PYPI_HTML), (PYPI_JSON + "; q=0, text/html", "text/html")]


@pytest.mark.parametrize("accept,content_type", PYPI_FORMS)
@pytest.mark.parametrize("compressed", [False, True], ids=["identity", "gzip"])
def test_pypi_page_by_accept(reg, cafile, accept, content_type, compressed):
    status, headers, body = rc.get(reg.pypi.project_url("lib-b"), cafile, accept, compressed)
    assert status == 200 and headers["content-type"] == content_type, headers
    assert "Accept" in headers["vary"], headers
    if compressed:
        assert headers["content-encoding"] == "gzip", headers
        body = gzip.decompress(body)
    else:
        assert "content-encoding" not in headers, headers
    if content_type == PYPI_JSON:
        doc = json.loads(body)
        assert doc["meta"] == {"api-version": "1.1"} and doc["name"] == "lib-b"
        assert doc["versions"] == ["1.0.0", "1.1.0", "1.2.0"]
        for f in doc["files"]:
            version = f["filename"].split("-")[1].removesuffix(".tar.gz")
            assert f["upload-time"] == reg.pypi.uploaded("lib-b", version)
            assert f["requires-python"] == ">=3.7" and f["size"] > 0
        hashes = {f["url"]: f["hashes"]["sha256"] for f in doc["files"]}
    else:
        text = body.decode()
        assert text.count('data-requires-python="&gt;=3.7"') == 6, text
        hashes = dict(a.split("#sha256=") for a in
                      (part.split('"')[0] for part in text.split('href="')[1:]))
    assert len(hashes) == 6
    for url, sha256 in hashes.items():
        status, _, data = rc.get(url, cafile)
        assert status == 200 and hashlib.sha256(data).hexdigest() == sha256, url


def test_pypi_root_and_redirect(reg, cafile):
    status, headers, body = rc.get(reg.pypi.index_url, cafile, PIP_ACCEPT)
    assert status == 200 and json.loads(body)["projects"] == [{"name": "app-a"}, {"name": "lib-b"}]
    status, headers, body = rc.get(reg.pypi.index_url, cafile, "text/html")
    assert status == 200 and 'href="%sapp-a/"' % reg.pypi.index_url in body.decode()
    status, headers, _ = rc.get(reg.pypi.project_url("lib-b").rstrip("/"), cafile)
    assert status == 301 and headers["location"] == reg.pypi.project_url("lib-b")


def test_pypi_wheel_record_and_json_api(reg, cafile):
    wheel = reg.pypi.file("app-a", "1.0.0")
    with zipfile.ZipFile(io.BytesIO(wheel.data)) as z:
        record = z.read("app_a-1.0.0.dist-info/RECORD").decode().splitlines()
        for line in record[:-1]:
            path, digest, size = line.split(",")
            data = z.read(path)
            assert digest == "sha256=" + base64.urlsafe_b64encode(
                hashlib.sha256(data).digest()).rstrip(b"=").decode() and int(size) == len(data)
        assert "Requires-Dist: lib-b>=1.0" in z.read("app_a-1.0.0.dist-info/METADATA").decode()
    status, headers, body = rc.get(reg.pypi.json_api_url("app-a"), cafile)
    doc = json.loads(body)
    assert status == 200 and headers["content-type"] == "application/json"
    assert doc["info"]["version"] == "1.1.0" and set(doc["releases"]) == {"1.0.0", "1.1.0"}
    assert doc["releases"]["1.0.0"][0]["upload_time_iso_8601"] == reg.pypi.uploaded("app-a",
                                                                                    "1.0.0")
    status, _, body = rc.get(reg.pypi.json_api_url("app-a", "1.0.0"), cafile)
    assert status == 200 and json.loads(body)["info"]["version"] == "1.0.0"


@pytest.mark.parametrize("compression", ["dynamic", "off"])
def test_other_compressions(bed, cafile, compression):
    """"dynamic": gzip'd on the fly, chunked; "off": identity even when gzip is offered."""
    with serve(bed, host="127.0.0.20", compression=compression) as other:
        other.npm.publish("lib-b", "1.0.0", age=DAY)
        other.pypi.publish("lib-b", "1.0.0", age=DAY)
        for url, accept in ((other.npm.packument_url("lib-b"), NPM_ACCEPT),
                            (other.pypi.project_url("lib-b"), PIP_ACCEPT)):
            status, headers, body = rc.get(url, cafile, accept, gzip=True)
            assert status == 200, headers
            if compression == "dynamic":
                assert headers["content-encoding"] == "gzip", headers
                assert headers["transfer-encoding"] == "chunked" and "content-length" not in headers
                body = gzip.decompress(body)
            else:
                assert "content-encoding" not in headers, headers
            assert json.loads(body)["name"] == "lib-b"


def test_bed_names_and_a_files_host(bed, cafile):
    """Documents for allowed.test, PyPI files on api.allowed.test: each name has the bed's
    certificate for it (as sluice will verify), and the documents name those hosts."""
    with serve(bed, host="allowed.test", files_host="api.allowed.test") as named:
        named.npm.publish("@myorg/util", "1.0.0", age=DAY)
        named.pypi.publish("lib-b", "1.0.0", age=DAY)
        resolve = []
        for name in ("allowed.test", "api.allowed.test"):
            resolve += ["--resolve", "%s:%d:127.0.0.20" % (name, named.port)]
        urls = [named.npm.packument_url("@myorg/util"),
                named.npm.tarball_url("@myorg/util", "1.0.0"),
                named.pypi.project_url("lib-b"), named.pypi.file_url("lib-b", "1.0.0")]
        assert [u.split("/")[2] for u in urls] == ["allowed.test:%d" % named.port] * 3 + \
            ["api.allowed.test:%d" % named.port]
        for url in urls:
            r = clients.curl(url, *resolve, cacert=cafile)
            assert r.rc == 0 and r.http_code == 200, (url, r.stderr)
        assert {e["sni"] for e in named.access()} == {"allowed.test", "api.allowed.test"}


def test_replace_document(reg, cafile):
    """An origin that misbehaves: the bytes given, in both forms and encodings, until
    rewrite()."""
    reg.npm.replace_document("lib-b", b'{"name":"lib-b","versions":{')
    try:
        for accept in (NPM_ACCEPT, None):
            for compressed in (False, True):
                _, headers, body = rc.get(reg.npm.packument_url("lib-b"), cafile, accept,
                                          compressed)
                body = gzip.decompress(body) if compressed else body
                assert body == b'{"name":"lib-b","versions":{', headers
    finally:
        reg.npm.rewrite("lib-b")
    _, _, body = rc.get(reg.npm.packument_url("lib-b"), cafile)
    assert json.loads(body) == reg.npm.documents("lib-b")[0]
