"""The nginx that serves the registries of registries.py (why an nginx of its own: that
module's docstring), and the standard set of packages the package-firewall tests start from.

  @pytest.fixture(scope="module")
  def reg(bed):
      with serve(bed, host="allowed.test") as served:    # served.npm, .pypi, .port, .access()
          publish_standard(served)
          yield served

One process on 127.0.0.20:PORT (TLS only): one server block per name of BedPKI.CDN_NAMES with
that name's certificate, and a default server with the IP certificate, all serving the same
root. A rule opens it as {"hosts": ["allowed.test"], "ports": [reg.port], "ips":
["127.0.0.20/32"]}. Its access log (`access()`) records what each request asked for (Accept,
Accept-Encoding, If-None-Match, npm's npm-command) and what it got (Content-Type,
Content-Encoding, status). Compression: "static" (default: the stored .gz with a
Content-Length, when Accept-Encoding allows), "dynamic" (`gzip on`: chunked, no length), "off".
Negotiated documents carry `Vary: Accept` (and `Vary: Accept-Encoding` when compressible).
"""
import contextlib
from dataclasses import dataclass
import json
import os
import subprocess
import tempfile

from gateway import remove_dir
from netutil import DIE_WITH_US, clean_env, free_port, read_text, stop_process, wait_port
import nginx_conf
from registries import DAY, HOUR, MINUTE, NpmRegistry, PypiIndex

NGINX = "/usr/sbin/nginx"
ADDRESS = "127.0.0.20"   # the bed's CDN address: allowed.test and the other CDN names
COMPRESSIONS = ("static", "dynamic", "off")

LOG_FIELDS = [
    ("host", "$host"), ("sni", "$ssl_server_name"), ("method", "$request_method"),
    ("uri", "$request_uri"), ("status", "$status"), ("accept", "$http_accept"),
    ("accept_encoding", "$http_accept_encoding"), ("if_none_match", "$http_if_none_match"),
    ("user_agent", "$http_user_agent"), ("npm_command", "$http_npm_command"),
    ("content_type", "$sent_http_content_type"),
    ("content_encoding", "$sent_http_content_encoding"), ("bytes_sent", "$bytes_sent"),
    ("connection", "$connection"),
]

# Which stored form a request gets, by its Accept header. nginx tries a map's regexes in order:
# a type offered with q=0 is refused (RFC 9110 12.5.1), any other mention selects it. A client
# that prefers HTML by q-value but also accepts JSON gets JSON: a simplification that no real
# client (pip, uv, npm) runs into.
Q_ZERO = r"\s*;\s*q=0(\.0*)?\s*(,|$)"
NEGOTIATION = r"""
    map $http_accept $registry_npm_form {
        default json;
        "~*application/vnd\.npm\.install-v1\+json%(q0)s" json;
        "~*application/vnd\.npm\.install-v1\+json" install-v1;
    }
    map $http_accept $registry_pypi_form {
        default html;
        "~*application/vnd\.pypi\.simple\.(v1|latest)\+json%(q0)s" html;
        "~*application/vnd\.pypi\.simple\.(v1|latest)\+json" v1json;
        "~*application/vnd\.pypi\.simple\.(v1|latest)\+html%(q0)s" html;
        "~*application/vnd\.pypi\.simple\.(v1|latest)\+html" v1html;
    }""" % {"q0": Q_ZERO}

GZIP = {
    "static": "gzip_static on;\n    gzip_vary on;\n    gzip_proxied any;",
    "dynamic": "gzip on;\n    gzip_vary on;\n    gzip_proxied any;\n    gzip_min_length 0;\n"
               "    gzip_types application/json application/vnd.npm.install-v1+json "
               "application/vnd.pypi.simple.v1+json application/vnd.pypi.simple.v1+html;",
    "off": "gzip off;",
}


def locations(npm_prefix, pypi_prefix):
    """The locations of both registries (the prefixes as in NpmRegistry and PypiIndex)."""
    return """\
    location %(npm)s/ {
        types { application/json json; application/vnd.npm.install-v1+json install-v1; }
        add_header Vary Accept always;
        try_files $uri/index.$registry_npm_form =404;
    }
    location ~ ^%(npm)s/.+/-/[^/]+\\.tgz$ {
        types { application/octet-stream tgz; }
    }
    location %(pypi)s/simple/ {
        types { text/html html; application/vnd.pypi.simple.v1+html v1html;
                application/vnd.pypi.simple.v1+json v1json; }
        add_header Vary Accept always;
        location ~ [^/]$ {
            return 301 $uri/;
        }
        try_files ${uri}index.$registry_pypi_form =404;
    }
    location %(pypi)s/pypi/ {
        default_type application/json;
    }
    location %(pypi)s/packages/ {
        default_type application/octet-stream;
    }""" % {"npm": npm_prefix, "pypi": pypi_prefix}


def render(d, www, pki, port, compression, npm_prefix, pypi_prefix, as_root):
    """The whole nginx.conf; `d` is the nginx directory (logs, pid, temp)."""
    fields = ",".join('"%s":"%s"' % f for f in LOG_FIELDS)
    blocks = ["    log_format registry escape=json '{%s}';" % fields, NEGOTIATION]
    certificates = [("_", pki.cdn_ip, " default_server")] + \
        [(name, pki.cdn[name], "") for name in pki.CDN_NAMES]
    for name, cert, default in certificates:
        blocks.append("server {\n    listen %s:%d ssl%s;\n    server_name %s;\n"
                      "    ssl_certificate %s;\n    ssl_certificate_key %s;\n    root %s;\n"
                      "    access_log %s/registry.log registry;\n    %s\n%s\n}"
                      % (ADDRESS, port, default, name, cert.cert, cert.key, www, d,
                         GZIP[compression], locations(npm_prefix, pypi_prefix)))
    return nginx_conf.wrap(d, blocks, as_root)


@dataclass
class Served:
    """A running registries nginx: its port and the two registries it serves."""
    server: "RegistryServer"
    npm: NpmRegistry
    pypi: PypiIndex

    @property
    def port(self):
        return self.server.port

    def access(self):
        return self.server.access()

    def url(self, path, host=None):
        return "https://%s:%d%s" % (host or self.server.host, self.server.port, path)


class RegistryServer:
    """nginx over `directory`/www; started by start(), stopped by PID in stop()."""

    def __init__(self, directory, pki, host="allowed.test", compression="static",
                 npm_prefix="/npm", pypi_prefix="/pypi"):
        assert compression in COMPRESSIONS, compression
        self.dir, self.pki, self.host, self.compression = directory, pki, host, compression
        self.npm_prefix, self.pypi_prefix = npm_prefix, pypi_prefix
        self.www = os.path.join(directory, "www")
        self.nginx_dir = os.path.join(directory, "nginx")
        os.makedirs(os.path.join(self.nginx_dir, "tmp"), exist_ok=True)
        os.makedirs(self.www, exist_ok=True)
        self.port = None
        self.proc = None

    def start(self):
        """Bind a free port (a few tries: another process may take it between the check and
        nginx's bind) and wait until nginx accepts on it."""
        for attempt in range(3):
            self.port = free_port((ADDRESS,))
            conf = os.path.join(self.nginx_dir, "nginx.conf")
            with open(conf, "w") as f:
                f.write(render(self.nginx_dir, self.www, self.pki, self.port, self.compression,
                               self.npm_prefix, self.pypi_prefix, os.geteuid() == 0))
            err = os.path.join(self.nginx_dir, "stderr.log")
            with open(err, "wb") as stderr:
                self.proc = subprocess.Popen(
                    DIE_WITH_US + [NGINX, "-p", self.nginx_dir, "-c", conf,
                                   "-e", os.path.join(self.nginx_dir, "error.log")],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                    env=clean_env())
            try:
                wait_port(ADDRESS, self.port, timeout=20, proc=self.proc, what="nginx")
                return self
            except (RuntimeError, TimeoutError):
                self.stop()
                if attempt == 2:
                    raise RuntimeError("the registries' nginx did not start:\n" +
                                       read_text(err) + read_text(os.path.join(
                                           self.nginx_dir, "error.log"))[-3000:])

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None

    def base_url(self, host=None):
        return "https://%s:%d" % (host or self.host, self.port)

    def access(self):
        """The access log's entries, oldest first (nginx writes each line when the response
        is done, so an entry is there once the client has read its response)."""
        return [json.loads(line) for line in
                read_text(os.path.join(self.nginx_dir, "registry.log")).splitlines() if line]


@contextlib.contextmanager
def serve(bed, host="allowed.test", files_host=None, compression="static", core_metadata=False,
          npm_prefix="/npm", pypi_prefix="/pypi"):
    """A started registries nginx with empty registries whose URLs name `host` (a name of
    BedPKI.CDN_NAMES, or "127.0.0.20" for clients without sluice) and, for PyPI's files,
    `files_host` (default: `host`). Stopped and removed on exit."""
    directory = tempfile.mkdtemp(prefix="sluice-registries-")
    server = RegistryServer(directory, bed.pki, host, compression, npm_prefix, pypi_prefix)
    try:
        server.start()
        npm = NpmRegistry(server.www, server.base_url(), prefix=npm_prefix)
        pypi = PypiIndex(server.www, server.base_url(), server.base_url(files_host),
                         prefix=pypi_prefix, now=npm.now, core_metadata=core_metadata)
        yield Served(server, npm, pypi)
    finally:
        server.stop()
        remove_dir(directory)


# --- the standard set ------------------------------------------------------------------------

# What a resolver picks from the standard set: with no rule, and with a minimum age of 7 days.
# app-a's newest version also depends on @myorg/util, so the two trees differ in shape too.
STANDARD_NPM_NEWEST = {"app-a": "1.1.0", "lib-b": "1.2.0", "@myorg/util": "1.0.1"}
STANDARD_NPM_OLDER_THAN_7D = {"app-a": "1.0.0", "lib-b": "1.1.0"}
STANDARD_PYPI_NEWEST = {"app-a": "1.1.0", "lib-b": "1.2.0"}
STANDARD_PYPI_OLDER_THAN_7D = {"app-a": "1.0.0", "lib-b": "1.1.0"}


def publish_standard(reg):
    """npm: lib-b 1.0.0 (30 d), 1.1.0 (20 d), 2.0.0-beta.1 (3 h, dist-tag next), 1.2.0 (1 h,
    latest); app-a 1.0.0 (30 d, lib-b ^1.0.0), 1.1.0 (1 h, lib-b ^1.0.0 and @myorg/util
    ^1.0.0); @myorg/util 1.0.0 (10 d), 1.0.1 (30 min).
    PyPI: lib-b 1.0.0 (30 d), 1.1.0 (20 d), 1.2.0 (1 h); app-a 1.0.0 (30 d), 1.1.0 (1 h), both
    requiring lib-b>=1.0; each version a wheel and an sdist."""
    npm = reg.npm
    npm.publish("lib-b", "1.0.0", age=30 * DAY)
    npm.publish("lib-b", "1.1.0", age=20 * DAY)
    npm.publish("lib-b", "2.0.0-beta.1", age=3 * HOUR, tag="next")
    npm.publish("lib-b", "1.2.0", age=HOUR)
    npm.publish("@myorg/util", "1.0.0", age=10 * DAY)
    npm.publish("@myorg/util", "1.0.1", age=30 * MINUTE)
    npm.publish("app-a", "1.0.0", age=30 * DAY, dependencies={"lib-b": "^1.0.0"})
    npm.publish("app-a", "1.1.0", age=HOUR,
                dependencies={"lib-b": "^1.0.0", "@myorg/util": "^1.0.0"})
    for version, age in (("1.0.0", 30 * DAY), ("1.1.0", 20 * DAY), ("1.2.0", HOUR)):
        reg.pypi.publish("lib-b", version, age=age)
    for version, age in (("1.0.0", 30 * DAY), ("1.1.0", HOUR)):
        reg.pypi.publish("app-a", version, age=age, requires=["lib-b>=1.0"])


def registry_rules(reg, host="allowed.test"):
    """The sluice rules of both registries on one host, each under its path: `paths` sends each
    request to its registry's rule (first match wins), and npm's spells the scope's encoded
    slash (docs/policy.md#npms-scoped-packages)."""
    base = {"hosts": [host], "ports": [reg.port], "ips": [ADDRESS + "/32"],
            "methods": ["GET", "HEAD"]}
    return [dict(base, name="npm", paths=["/npm/", "/npm/@myorg%2f"],
                 registry={"ecosystem": "npm", "path": "/npm/"}),
            dict(base, name="pypi", paths=["/pypi/"],
                 registry={"ecosystem": "pypi", "path": "/pypi/"})]
