"""What the origins serve: per-name document roots, a 200 MiB file, a page nginx sends chunked,
a PyPI-style simple index with a real (tiny) wheel. Expected bytes and hashes are kept here so
tests compare what arrived with what was served.
"""
import base64
import hashlib
import io
import os
import zipfile

BIG_SIZE = 200 * 1024 * 1024
PKG = "sluicetestpkg"
PKG_VERSION = "1.0"
WHEEL = "%s-%s-py3-none-any.whl" % (PKG, PKG_VERSION)

# sub_filter replaces every MARK in /chunked.html; the result has no known length, so nginx
# sends it with Transfer-Encoding: chunked.
CHUNK_MARK = "SLUICE-MARK"
CHUNK_REPLACEMENT = "replaced-by-nginx"


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def build_wheel():
    """A valid pure-Python wheel, written by hand (a zip with METADATA, WHEEL and RECORD)."""
    dist = "%s-%s.dist-info" % (PKG, PKG_VERSION)
    files = {
        PKG + "/__init__.py": b"VALUE = 42\n",
        dist + "/METADATA": ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: sluice "
                             "gateway test package\n" % (PKG, PKG_VERSION)).encode(),
        dist + "/WHEEL": b"Wheel-Version: 1.0\nGenerator: sluice-tests\n"
                         b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append(dist + "/RECORD,,")
    files[dist + "/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


class Content:
    """Builds the document roots under `root` and remembers what it wrote."""

    def __init__(self, root):
        self.root = root
        self.files = {}  # (docroot name, url path) -> bytes, for everything but the big file
        for name in ("allowed.test", "api.allowed.test", "other.test", "evil.test",
                     "a.wild.test", "mixed.wild.test", "mixed6.wild.test", "second.test",
                     "expired.wild.test",
                     "wrongname.wild.test", "h2.test"):
            self._file(name, "/whoami.txt", name + "\n")
            self._file(name, "/index.html", "<h1>%s</h1>\n" % name)
        self._file("attacker", "/whoami.txt", "ATTACKER\n")
        self._file("internal", "/whoami.txt", "INTERNAL\n")
        self._file("api.allowed.test", "/v1/public/hello.txt", "public hello\n")
        self._file("api.allowed.test", "/v1/private/secret.txt", "private secret\n")
        self.small = os.urandom(64 * 1024)
        self._file("allowed.test", "/small.bin", self.small)
        self._file("allowed.test", "/head.txt", "a file for HEAD requests\n" * 40)
        chunk_src = "".join("line %05d %s\n" % (i, CHUNK_MARK if i % 7 == 0 else "plain")
                            for i in range(20000))
        self._file("allowed.test", "/chunked.html", chunk_src)
        self.chunked_expected = chunk_src.replace(CHUNK_MARK, CHUNK_REPLACEMENT).encode()
        # The HTTP/2 origin serves the same chunked page and HEAD file, and a file behind its
        # trailer location.
        self._file("h2.test", "/chunked.html", chunk_src)
        self._file("h2.test", "/head.txt", "a file for HEAD requests\n" * 40)
        self._file("h2.test", "/trailer/data.txt", "a body before trailers\n")
        self._file("h2.test", "/trailer/page.html", "<p>%s before trailers</p>\n" % CHUNK_MARK)
        self._pypi()
        self._apt_repository()
        self._big()

    def path(self, docroot, url_path=""):
        return os.path.join(self.root, docroot, url_path.lstrip("/"))

    def _file(self, docroot, url_path, data):
        data = data if isinstance(data, bytes) else data.encode()
        _write(self.path(docroot, url_path), data)
        self.files[(docroot, url_path)] = data

    def _apt_repository(self):
        """A flat apt repository with no package (`deb [trusted=yes] https://H/debian ./`), for
        apt over https through sluice: its Release names its one Packages file's digest."""
        packages = b""
        self._file("allowed.test", "/debian/Packages", packages)
        self._file("allowed.test", "/debian/Release",
                   "Origin: sluice-test\nLabel: sluice-test\nSuite: test\nCodename: test\n"
                   "Date: Mon, 07 Dec 2026 00:00:00 UTC\nArchitectures: amd64 arm64 all\n"
                   "SHA256:\n %s %d Packages\n" % (sha256_bytes(packages), len(packages)))

    def _pypi(self):
        wheel = build_wheel()
        self.wheel_sha256 = sha256_bytes(wheel)
        self._file("allowed.test", "/packages/" + WHEEL, wheel)
        self._file("allowed.test", "/simple/index.html",
                   '<!DOCTYPE html><html><body><a href="/simple/%s/">%s</a></body></html>\n'
                   % (PKG, PKG))
        self._file("allowed.test", "/simple/%s/index.html" % PKG,
                   '<!DOCTYPE html><html><body>\n<a href="/packages/%s#sha256=%s">%s</a>\n'
                   "</body></html>\n" % (WHEEL, self.wheel_sha256, WHEEL))

    def _big(self):
        """200 MiB, mostly a hole: random head and tail so truncation or reordering shows."""
        path = self.path("allowed.test", "/big.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(64 * 1024))
            f.truncate(BIG_SIZE - 64 * 1024)
            f.seek(BIG_SIZE - 64 * 1024)
            f.write(os.urandom(64 * 1024))
        self.big_path = path
        self.big_sha256 = sha256_file(path)
