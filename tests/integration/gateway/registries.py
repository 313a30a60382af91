"""Local npm and PyPI registries for the package-firewall tests (issue 35): documents and
files shaped as registry.npmjs.org and PyPI shape them, written under a directory that the
nginx of registry_server.py serves, with the URLs the tests use.

Why an nginx of its own and not locations in the bed's: the bed's nginx serves every test
module (test_npm_scope.py already owns its `/npm/` location) and is configured once per
session; the registries need content negotiation (`map $http_accept`), gzip and an access log
that records Accept and Content-Type, none of which other tests should see. A module-scoped
nginx costs about 50 ms, has its own port (a rule names it by `ports`), its own log (what
sluice asked the origin for), and publish times fresh for its module. It listens on
127.0.0.20, where dnsmasq resolves allowed.test and the other CDN names, with the bed's
certificates (the IP certificate for clients that connect by address: npm and pip without
sluice cannot resolve allowed.test, so the self-test makes documents that name 127.0.0.20).

  with registry_server.serve(bed, host="allowed.test") as reg:   # in a module fixture
      reg.npm.publish("lib-b", "1.0.0", age=30 * DAY)
      reg.npm.publish("app-a", "1.0.0", age=HOUR, dependencies={"lib-b": "^1.0.0"})
      reg.pypi.publish("app-a", "1.0.0", age=HOUR, requires=["lib-b>=1.0"])
      reg.npm.registry_url    # https://allowed.test:PORT/npm/          (npm --registry)
      reg.pypi.index_url      # https://allowed.test:PORT/pypi/simple/  (pip --index-url)

npm (prefix /npm): the packument at /npm/NAME and /npm/@scope%2fname (nginx decodes %2f, so
both read npm/NAME/index.*): the full form (application/json, with `time`) unless Accept names
application/vnd.npm.install-v1+json with q > 0, then the abbreviated form (that content type,
`modified`, reduced manifests, no `time`), as registry.npmjs.org does; tarballs at
/npm/NAME/-/BASENAME-VERSION.tgz (application/octet-stream), each a real package whose
index.js exports {name, version, dependencies: {dep: its installed version}}.
PyPI (prefix /pypi): PEP 503 HTML and PEP 691 JSON (api-version 1.1, PEP 700 `upload-time`,
`size`, `versions`) at /pypi/simple/ and /pypi/simple/NAME/ (without the slash: 301 to it, as
PyPI does): JSON when Accept names application/vnd.pypi.simple.v1+json (or .latest+json) with
q > 0, whatever else it names (pip's own order); application/vnd.pypi.simple.v1+html when that
is named; text/html otherwise. Files at /pypi/packages/XX/YY/REST/FILE (a blake2b-256 path as
on files.pythonhosted.org, optionally on another host): wheels and sdists, and with
`core_metadata=True` FILE.metadata for wheels (PEP 658; named as PEP 714 says: `core-metadata`
in JSON, both data- attributes in HTML; pip 23.0 ignores it). The legacy JSON API at
/pypi/pypi/NAME/json and /pypi/pypi/NAME/VERSION/json (`info`, `releases`, `urls`,
`upload_time_iso_8601`). Every document is also stored gzip'd beside itself, for nginx's
`gzip_static` (registry_server.COMPRESSIONS).

Ages are seconds before the registry's `now` (fixed when it was made): `age=30 * DAY`. A
publish writes the file(s) and rewrites the package's documents at once; publish a version
again to replace it. `replace_document` serves raw bytes in a document's place (an origin that
misbehaves: truncated or oversized JSON), until `rewrite`.
"""
import base64
import calendar
from dataclasses import dataclass
import datetime
import gzip
import hashlib
import html
import io
import json
import os
import re
import tarfile
import time
import zipfile

MINUTE, HOUR, DAY = 60, 3600, 86400   # ages, in seconds
NPM_FULL = "application/json"
NPM_ABBREVIATED = "application/vnd.npm.install-v1+json"
# What npm's pacote sends when it wants the abbreviated form (npm 11 resolves `npm install`
# with the full one, Accept: application/json, for `time`; older npm with this).
NPM_ACCEPT = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8, */*"
PYPI_JSON = "application/vnd.pypi.simple.v1+json"
PYPI_HTML = "application/vnd.pypi.simple.v1+html"
# What pip 23 sends for a simple page.
PIP_ACCEPT = PYPI_JSON + ", " + PYPI_HTML + "; q=0.1, text/html; q=0.01"
# The mtime of every file in a tarball, sdist or wheel: the same bytes (and hashes) each run.
FILE_EPOCH = (2020, 1, 1, 0, 0, 0)


def _iso(t, digits):
    """Unix time `t` as ISO 8601 UTC with `digits` of fractional seconds (0: none)."""
    stamp = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")
    return (stamp[:20 + digits] if digits else stamp[:19]) + "Z"


def _write(path, data, with_gzip=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = data if isinstance(data, bytes) else data.encode()
    with open(path, "wb") as f:
        f.write(data)
    if with_gzip:
        with open(path + ".gz", "wb") as f:
            f.write(gzip.compress(data, mtime=0))


def _json(doc):
    return json.dumps(doc, indent=None, separators=(",", ":")).encode()


def _tar_gz(files):
    """A reproducible .tar.gz of {path: bytes} (regular files, 0644, the fixed epoch)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            info.mtime = calendar.timegm(FILE_EPOCH)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(out.getvalue(), mtime=0)


# --- npm -------------------------------------------------------------------------------------

@dataclass
class NpmRelease:
    name: str
    version: str
    published: float                 # Unix time
    dependencies: dict
    tag: str
    deprecated: str
    tarball: bytes


class NpmRegistry:
    """Packuments and tarballs under `www`/npm, with URLs under `base_url` (scheme://host:port)."""

    def __init__(self, www, base_url, prefix="/npm", now=None):
        self.www, self.base_url, self.prefix = www, base_url.rstrip("/"), prefix.rstrip("/")
        self.now = time.time() if now is None else now
        self.releases = {}            # name -> {version: NpmRelease}, in publish order
        self.registry_url = self.base_url + self.prefix + "/"

    def publish(self, name, version, age, dependencies=None, tag="latest", deprecated=None):
        """Publish NAME@VERSION `age` seconds before `now` under dist-tag `tag` (npm publish
        --tag): the tag names the most recently published version that was published with it.
        `dependencies`: {name: range}; the tarball's index.js requires each of them."""
        dependencies = dict(dependencies or {})
        release = NpmRelease(name, version, self.now - age, dependencies, tag, deprecated,
                             self._tarball(name, version, dependencies))
        self.releases.setdefault(name, {})[version] = release
        self.releases[name] = dict(sorted(self.releases[name].items(),
                                          key=lambda kv: kv[1].published))
        _write(self._file(self.tarball_path(name, version)), release.tarball)
        self.rewrite(name)
        return release

    @staticmethod
    def _tarball(name, version, dependencies):
        package = {"name": name, "version": version, "description": "test package " + name,
                   "main": "index.js", "license": "MIT", "dependencies": dependencies}
        index = ("const dependencies = {};\n"
                 "for (const d of %s) dependencies[d] = require(d).version;\n"
                 "module.exports = {name: %s, version: %s, dependencies};\n"
                 % (json.dumps(sorted(dependencies)), json.dumps(name), json.dumps(version)))
        return _tar_gz({"package/package.json": json.dumps(package, indent=2).encode(),
                        "package/index.js": index.encode()})

    # -- URLs and paths --

    def packument_path(self, name):
        """/npm/NAME, /npm/@scope%2fname: the path npm requests."""
        return self.prefix + "/" + name.replace("/", "%2f")

    def packument_url(self, name):
        return self.base_url + self.packument_path(name)

    def tarball_path(self, name, version):
        return "%s/%s/-/%s-%s.tgz" % (self.prefix, name, name.rsplit("/", 1)[-1], version)

    def tarball_url(self, name, version):
        return self.base_url + self.tarball_path(name, version)

    def tarball(self, name, version):
        return self.releases[name][version].tarball

    def published(self, name, version):
        """The `time` entry of NAME@VERSION."""
        return _iso(self.releases[name][version].published, 3)

    def _file(self, url_path):
        return os.path.join(self.www, url_path.lstrip("/"))

    def _document_file(self, name, abbreviated):
        return self._file("%s/%s/index.%s" % (self.prefix, name,
                                              "install-v1" if abbreviated else "json"))

    # -- documents --

    def documents(self, name):
        """(full packument, abbreviated packument) of NAME as dicts."""
        releases = self.releases[name]
        tags = {}
        for r in releases.values():            # oldest first: the last one per tag wins
            tags[r.tag] = r.version
        full_versions, abbreviated_versions = {}, {}
        for r in releases.values():
            data = r.tarball
            dist = {"integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest())
                    .decode(), "shasum": hashlib.sha1(data).hexdigest(),
                    "tarball": self.tarball_url(name, r.version), "fileCount": 2,
                    "unpackedSize": len(gzip.decompress(data))}
            short = {"name": name, "version": r.version, "dependencies": r.dependencies,
                     "dist": dist, "_hasShrinkwrap": False}
            if r.deprecated:
                short["deprecated"] = r.deprecated
            abbreviated_versions[r.version] = short
            full_versions[r.version] = dict(
                short, description="test package " + name, main="index.js", license="MIT",
                _id="%s@%s" % (name, r.version), _npmVersion="10.8.2", _nodeVersion="20.20.2",
                _npmUser={"name": "tester", "email": "tester@example.test"},
                maintainers=[{"name": "tester", "email": "tester@example.test"}],
                directories={})
        times = [r.published for r in releases.values()]
        modified = _iso(max(times), 3)
        full = {"_id": name, "_rev": "%d-%s" % (len(releases), hashlib.md5(name.encode())
                                                 .hexdigest()),
                "name": name, "description": "test package " + name, "dist-tags": tags,
                "versions": full_versions,
                "time": dict({"created": _iso(min(times), 3), "modified": modified},
                             **{r.version: _iso(r.published, 3) for r in releases.values()}),
                "maintainers": [{"name": "tester", "email": "tester@example.test"}],
                "license": "MIT", "readme": "# %s\n" % name, "readmeFilename": "README.md"}
        abbreviated = {"name": name, "modified": modified, "dist-tags": tags,
                       "versions": abbreviated_versions}
        return full, abbreviated

    def rewrite(self, name):
        """Write NAME's two documents (and their .gz) from its releases."""
        full, abbreviated = self.documents(name)
        _write(self._document_file(name, False), _json(full), with_gzip=True)
        _write(self._document_file(name, True), _json(abbreviated), with_gzip=True)

    def replace_document(self, name, data, forms=("full", "abbreviated")):
        """Serve `data` (bytes) in place of NAME's documents of `forms`; rewrite() restores."""
        for form in forms:
            _write(self._document_file(name, form == "abbreviated"), data, with_gzip=True)


# --- PyPI ------------------------------------------------------------------------------------

def normalize(name):
    """PEP 503."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(name):
    """The distribution name in file names and the import name: runs of -_. as "_"."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _metadata(name, version, requires, requires_python):
    lines = ["Metadata-Version: 2.1", "Name: " + name, "Version: " + version,
             "Summary: test package " + name]
    if requires_python:
        lines.append("Requires-Python: " + requires_python)
    lines += ["Requires-Dist: " + r for r in requires]
    return ("\n".join(lines) + "\n").encode()


def build_wheel(name, version, metadata, tag="py3-none-any", marker=b""):
    """A pure-Python wheel (py3-none-any unless `tag` says): NAME/__init__.py with __version__
    (and `marker` after it), METADATA, WHEEL, RECORD with each file's hash."""
    module, dist = wheel_name(name), "%s-%s.dist-info" % (wheel_name(name), version)
    files = {module + "/__init__.py": ("__version__ = %r\n" % version).encode() + marker,
             dist + "/METADATA": metadata,
             dist + "/WHEEL": b"Wheel-Version: 1.0\nGenerator: sluice-tests\n"
                              b"Root-Is-Purelib: true\nTag: " + tag.encode() + b"\n",
             dist + "/top_level.txt": (module + "\n").encode()}
    record = ["%s,sha256=%s,%d" % (path, base64.urlsafe_b64encode(hashlib.sha256(data).digest())
                                   .rstrip(b"=").decode(), len(data))
              for path, data in files.items()]
    files[dist + "/RECORD"] = ("\n".join(record + [dist + "/RECORD,,"]) + "\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(zipfile.ZipInfo(path, FILE_EPOCH), data)
    return out.getvalue()


def build_sdist(name, version, metadata, requires, requires_python):
    """An sdist (PEP 625 name) that setuptools builds: PKG-INFO, pyproject.toml ([project],
    setuptools.build_meta), the package."""
    root, module = "%s-%s" % (wheel_name(name), version), wheel_name(name)
    project = ['name = "%s"' % name, 'version = "%s"' % version,
               "dependencies = %s" % json.dumps(list(requires))]
    if requires_python:
        project.append('requires-python = "%s"' % requires_python)
    pyproject = ('[build-system]\nrequires = ["setuptools>=61"]\n'
                 'build-backend = "setuptools.build_meta"\n\n[project]\n%s\n'
                 % "\n".join(project))
    return _tar_gz({root + "/PKG-INFO": metadata, root + "/pyproject.toml": pyproject.encode(),
                    "%s/%s/__init__.py" % (root, module): ("__version__ = %r\n" % version)
                    .encode()})


@dataclass
class PypiFile:
    filename: str
    kind: str                        # "wheel" or "sdist"
    data: bytes
    url_path: str
    metadata: bytes
    published: float = None          # its own upload time; None: its release's


@dataclass
class PypiRelease:
    name: str
    version: str
    published: float
    requires: list
    requires_python: str
    yanked: object                   # None, True or a reason
    files: dict                      # kind -> PypiFile


class PypiIndex:
    """A simple index (HTML and JSON), the JSON API and the files under `www`/pypi."""

    def __init__(self, www, base_url, files_base_url=None, prefix="/pypi", now=None,
                 core_metadata=False):
        self.www, self.base_url, self.prefix = www, base_url.rstrip("/"), prefix.rstrip("/")
        self.files_base_url = (files_base_url or base_url).rstrip("/")
        self.now = time.time() if now is None else now
        self.core_metadata = core_metadata
        self.projects = {}            # normalized name -> {version: PypiRelease}
        self.index_url = self.base_url + self.prefix + "/simple/"
        self._write_root()

    def publish(self, name, version, age, requires=(), requires_python=">=3.7",
                kinds=("wheel", "sdist"), yanked=None):
        """Upload NAME VERSION's files of `kinds` `age` seconds before `now`; `requires`:
        Requires-Dist lines, e.g. ["lib-b>=1.0"]."""
        requires = list(requires)
        metadata = _metadata(name, version, requires, requires_python)
        release = PypiRelease(name, version, self.now - age, requires, requires_python, yanked,
                              {})
        for kind in kinds:
            if kind == "wheel":
                filename = "%s-%s-py3-none-any.whl" % (wheel_name(name), version)
                data = build_wheel(name, version, metadata)
            else:
                filename = "%s-%s.tar.gz" % (wheel_name(name), version)
                data = build_sdist(name, version, metadata, requires, requires_python)
            blake = hashlib.blake2b(data, digest_size=32).hexdigest()
            url_path = "%s/packages/%s/%s/%s/%s" % (self.prefix, blake[:2], blake[2:4],
                                                    blake[4:], filename)
            release.files[kind] = PypiFile(filename, kind, data, url_path, metadata)
            _write(self._file(url_path), data)
            if self.core_metadata and kind == "wheel":
                _write(self._file(url_path + ".metadata"), metadata)
        project = self.projects.setdefault(normalize(name), {})
        project[version] = release
        self.projects[normalize(name)] = dict(sorted(project.items(),
                                                     key=lambda kv: kv[1].published))
        self.rewrite(name)
        self._write_root()
        return release

    def add_wheel(self, name, version, tag, age, marker=b""):
        """Upload one more wheel of NAME VERSION, tagged `tag`, `age` seconds before `now`: a
        PyPI release takes new files at any time. Its module holds `marker` too."""
        release = self.projects[normalize(name)][version]
        metadata = release.files["wheel"].metadata
        filename = "%s-%s-%s.whl" % (wheel_name(name), version, tag)
        data = build_wheel(name, version, metadata, tag=tag, marker=marker)
        blake = hashlib.blake2b(data, digest_size=32).hexdigest()
        url_path = "%s/packages/%s/%s/%s/%s" % (self.prefix, blake[:2], blake[2:4], blake[4:],
                                                filename)
        release.files[tag] = PypiFile(filename, "wheel", data, url_path, metadata,
                                      self.now - age)
        _write(self._file(url_path), data)
        self.rewrite(name)
        return release.files[tag]

    # -- URLs and paths --

    def project_path(self, name):
        return "%s/simple/%s/" % (self.prefix, normalize(name))

    def project_url(self, name):
        return self.base_url + self.project_path(name)

    def file(self, name, version, kind="wheel"):
        """The PypiFile of NAME VERSION (.filename, .data, .url_path)."""
        return self.projects[normalize(name)][version].files[kind]

    def file_url(self, name, version, kind="wheel"):
        return self.files_base_url + self.file(name, version, kind).url_path

    def json_api_url(self, name, version=None):
        return "%s%s/pypi/%s/%sjson" % (self.base_url, self.prefix, normalize(name),
                                        version + "/" if version else "")

    def uploaded(self, name, version):
        """PEP 700 `upload-time` of NAME VERSION's files."""
        return _iso(self.projects[normalize(name)][version].published, 6)

    def _file(self, url_path):
        return os.path.join(self.www, url_path.lstrip("/"))

    # -- documents --

    def _files(self, name):
        for release in self.projects[normalize(name)].values():
            for f in release.files.values():
                yield release, f

    def simple_json(self, name):
        """The PEP 691 (api-version 1.1) page of NAME as a dict."""
        files = []
        for release, f in self._files(name):
            entry = {"filename": f.filename, "url": self.files_base_url + f.url_path,
                     "hashes": {"sha256": hashlib.sha256(f.data).hexdigest()},
                     "size": len(f.data),
                     "upload-time": _iso(f.published or release.published, 6),
                     "yanked": release.yanked if release.yanked is not None else False}
            if release.requires_python:
                entry["requires-python"] = release.requires_python
            if self.core_metadata and f.kind == "wheel":
                # PEP 714's name only, as PyPI: pip 22.3-23.0 fail on the old key's dict.
                entry["core-metadata"] = {"sha256": hashlib.sha256(f.metadata).hexdigest()}
            files.append(entry)
        return {"meta": {"api-version": "1.1"}, "name": normalize(name), "files": files,
                "versions": list(self.projects[normalize(name)])}

    def simple_html(self, name):
        """The PEP 503 page of NAME (with PEP 629's repository version)."""
        anchors = []
        for release, f in self._files(name):
            attributes = ' href="%s#sha256=%s"' % (html.escape(self.files_base_url + f.url_path),
                                                   hashlib.sha256(f.data).hexdigest())
            if release.requires_python:
                attributes += ' data-requires-python="%s"' % html.escape(release.requires_python)
            if release.yanked is not None:
                reason = "" if release.yanked is True else release.yanked
                attributes += ' data-yanked="%s"' % html.escape(reason)
            if self.core_metadata and f.kind == "wheel":
                digest = "sha256=" + hashlib.sha256(f.metadata).hexdigest()
                attributes += ' data-dist-info-metadata="%s" data-core-metadata="%s"' % (digest,
                                                                                       digest)
            anchors.append("    <a%s>%s</a><br />" % (attributes, html.escape(f.filename)))
        return _page("Links for " + normalize(name), anchors)

    def json_api(self, name, version=None):
        """The legacy JSON API document: /pypi/NAME/json (`info` of the most recent upload,
        `releases`), or /pypi/NAME/VERSION/json (no `releases`)."""
        releases = self.projects[normalize(name)]
        version = version or list(releases)[-1]
        release = releases[version]

        def described(r):
            return [{"filename": f.filename, "url": self.files_base_url + f.url_path,
                     "packagetype": "bdist_wheel" if f.kind == "wheel" else "sdist",
                     "python_version": "py3" if f.kind == "wheel" else "source",
                     "digests": {"sha256": hashlib.sha256(f.data).hexdigest(),
                                 "md5": hashlib.md5(f.data).hexdigest(),
                                 "blake2b_256": hashlib.blake2b(f.data, digest_size=32)
                                 .hexdigest()},
                     "size": len(f.data), "requires_python": r.requires_python,
                     "upload_time": _iso(f.published or r.published, 0)[:-1],
                     "upload_time_iso_8601": _iso(f.published or r.published, 6),
                     "yanked": bool(r.yanked), "yanked_reason": None if r.yanked in (None, True)
                     else r.yanked} for f in r.files.values()]
        doc = {"info": {"name": release.name, "version": version, "summary": "test package " +
                        release.name, "requires_python": release.requires_python,
                        "requires_dist": release.requires or None, "yanked": bool(release.yanked)},
               "last_serial": len(releases), "urls": described(release), "vulnerabilities": []}
        if version == list(releases)[-1]:
            doc["releases"] = {v: described(r) for v, r in releases.items()}
        return doc

    def rewrite(self, name):
        """Write NAME's simple pages and JSON API documents (and their .gz)."""
        directory = self._file(self.project_path(name))
        _write(os.path.join(directory, "index.v1json"), _json(self.simple_json(name)), True)
        page = self.simple_html(name)
        _write(os.path.join(directory, "index.html"), page, True)
        _write(os.path.join(directory, "index.v1html"), page, True)
        api = self._file("%s/pypi/%s" % (self.prefix, normalize(name)))
        _write(os.path.join(api, "json"), _json(self.json_api(name)), True)
        for version in self.projects[normalize(name)]:
            _write(os.path.join(api, version, "json"), _json(self.json_api(name, version)), True)

    def _write_root(self):
        names = sorted(self.projects)
        directory = self._file(self.prefix + "/simple/")
        _write(os.path.join(directory, "index.v1json"), _json(
            {"meta": {"api-version": "1.1"}, "projects": [{"name": n} for n in names]}), True)
        page = _page("Simple index", ['    <a href="%s%s/simple/%s/">%s</a><br />'
                                      % (self.base_url, self.prefix, n, n) for n in names])
        _write(os.path.join(directory, "index.html"), page, True)
        _write(os.path.join(directory, "index.v1html"), page, True)

    def replace_document(self, name, data, forms=("json", "html")):
        """Serve `data` in place of NAME's simple pages of `forms`; rewrite() restores."""
        directory = self._file(self.project_path(name))
        for form in forms:
            for f in ("index.v1json",) if form == "json" else ("index.html", "index.v1html"):
                _write(os.path.join(directory, f), data, True)


def _page(title, lines):
    return ('<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" '
            'content="1.1">\n    <title>%s</title>\n  </head>\n  <body>\n    <h1>%s</h1>\n%s\n'
            "  </body>\n</html>\n" % (title, title, "\n".join(lines)))
