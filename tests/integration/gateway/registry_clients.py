"""npm and pip as the package-firewall tests run them, and what they installed; a plain GET
that shows a registry's answer as sent (no decoding).

Both clients read only what their flags say: an empty npm user and global config, a cache in
the test's scratch directory, pip with no config file and no cache; no retries, so a refusal
shows at once. `run(argv, cwd, env_lines=...)` runs them through sluice: in a shell that first
evals what `sluice env` printed (clients.env_lines), as a user's sandbox would.
"""
import glob
import http.client
import json
import os
import ssl
import subprocess
import urllib.parse

import clients
from netutil import clean_env


def npm_install_argv(registry_url, packages, scratch, cafile=None, extra=()):
    """(argv, project directory) for `npm install PACKAGES` into scratch/project."""
    project = os.path.join(scratch, "project")
    os.makedirs(project, exist_ok=True)
    configs = [os.path.join(scratch, name) for name in ("npmrc-user", "npmrc-global")]
    for path in configs:               # npm refuses one file as both
        open(path, "a").close()
    argv = ["npm", "install", *packages, "--registry", registry_url, "--userconfig", configs[0],
            "--globalconfig", configs[1], "--cache", os.path.join(scratch, "npm-cache"),
            "--prefix", project, "--prefer-online", "--no-audit", "--no-fund",
            "--no-update-notifier", "--fetch-retries", "0", "--fetch-timeout", "30000",
            "--loglevel", "http", *extra]
    if cafile:
        argv += ["--cafile", cafile]
    return argv, project


def pip_install_argv(index_url, packages, target, cert=None, extra=()):
    """argv for `pip install --target TARGET PACKAGES` from one index only. Build isolation
    is off: an sdist is built with Debian's setuptools instead of fetching it."""
    argv = ["/usr/bin/python3", "-m", "pip", "install", "--no-cache-dir",
            "--disable-pip-version-check", "--no-input", "--retries", "0", "--timeout", "30",
            "--no-build-isolation", "--index-url", index_url, "--target", target, *extra,
            *packages]
    if cert:
        argv[4:4] = ["--cert", cert]
    return argv


def run(argv, cwd, env_lines=None, timeout=180):
    """Run a client; with `env_lines` (what `sluice env` printed), after eval'ing them."""
    env = clean_env(PIP_CONFIG_FILE=os.devnull)
    if env_lines is not None:
        env["SLUICE_ENV_LINES"] = env_lines
        argv = ["sh", "-c", 'eval "$SLUICE_ENV_LINES"\nexec "$@"', "sh", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=env)


def npm_through(gw, reg, scratch, packages, extra=()):
    """`npm install PACKAGES` from reg's npm registry through gw's sluice, with only what
    `sluice env` printed: (CompletedProcess, project directory)."""
    argv, project = npm_install_argv(reg.npm.registry_url, packages, scratch, extra=extra)
    return run(argv, scratch, env_lines=clients.env_lines(gw)), project


def pip_through(gw, reg, scratch, packages):
    """`pip install --target scratch/site PACKAGES` from reg's PyPI index through gw's sluice:
    (CompletedProcess, the target directory)."""
    target = os.path.join(scratch, "site")
    argv = pip_install_argv(reg.pypi.index_url, packages, target)
    return run(argv, scratch, env_lines=clients.env_lines(gw)), target


def npm_installed(project):
    """{name: version} of the packages at the top of project/node_modules (scoped too)."""
    found = {}
    top = os.path.join(project, "node_modules")
    for pattern in ("*/package.json", "@*/*/package.json"):
        for path in glob.glob(os.path.join(top, pattern)):
            with open(path) as f:
                manifest = json.load(f)
            found[manifest["name"]] = manifest["version"]
    return found


def pip_installed(target):
    """{name: version} from the METADATA of every *.dist-info under `target`."""
    found = {}
    for path in glob.glob(os.path.join(target, "*.dist-info", "METADATA")):
        fields = dict(line.split(": ", 1) for line in open(path).read().splitlines()
                      if ": " in line and not line.startswith(" "))
        found[fields["Name"]] = fields["Version"]
    return found


def get(url, cafile, accept=None, gzip=False, timeout=30):
    """GET `url` directly (no proxy; the name must be an address or resolvable): (status,
    {lower-case header: value}, body as sent, not decoded)."""
    parts = urllib.parse.urlsplit(url)
    context = ssl.create_default_context(cafile=cafile)
    conn = http.client.HTTPSConnection(parts.hostname, parts.port, context=context,
                                       timeout=timeout)
    headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
    if accept is not None:
        headers["Accept"] = accept
    try:
        conn.request("GET", parts.path + ("?" + parts.query if parts.query else ""),
                     headers=headers)
        response = conn.getresponse()
        headers = {}
        for name, value in response.getheaders():   # repeated fields joined, as RFC 9110 5.3
            name = name.lower()
            headers[name] = headers[name] + ", " + value if name in headers else value
        return response.status, headers, response.read()
    finally:
        conn.close()
