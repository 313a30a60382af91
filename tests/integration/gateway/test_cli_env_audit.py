"""`sluice env` and `sluice audit verify` (docs/cli.md, docs/audit.md) against a running sluice:

  - a fresh shell that evaluates `sluice env` reaches allowed hosts with curl and pip and no
    other proxy or CA flags (pip is told only which index to use);
  - the audit log a real run wrote verifies, and every kind of tampering (a byte edited, a line
    deleted, two lines swapped, the file cut mid-line) is found at its line.
"""
import hashlib
import json
import os
import shlex
import shutil
import subprocess

import pytest

import content as C
from clients import env_lines, sluice_cli
from netutil import clean_env
from oracles import get, marker


def in_fresh_shell(gw, command, cwd):
    """`command` in sh after `eval "$(sluice env ...)"`, with no proxy or CA variables of ours."""
    script = 'eval "$SLUICE_ENV_LINES"\n' + command
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=clean_env(SLUICE_ENV_LINES=env_lines(gw),
                                                 PIP_CONFIG_FILE=os.devnull))


def test_env_reaches_gnutls_wget_and_names_what_other_clients_need(gw, scratch):
    """GnuTLS wget reads no CA variable (docs/cli.md#clients-the-variables-do-not-reach): `sluice
    env` points WGETRC at the wgetrc sluice wrote beside ca.pem (and APT_CONFIG at its apt.conf),
    so a real wget through sluice gets the page with no flag, where it fails without WGETRC. The
    last line names what the clients no variable reaches need; Node's own fetch is told to read
    the proxy variables."""
    text = env_lines(gw)
    ca_dir = os.path.dirname(gw.sluice.ca_pem)
    assert "export NODE_USE_ENV_PROXY='1'\n" in text, text
    assert "export WGETRC='%s/wgetrc'\n" % ca_dir in text, text
    assert "export APT_CONFIG='%s/apt.conf'\n" % ca_dir in text, text
    with open(os.path.join(ca_dir, "apt.conf")) as f:
        assert 'Acquire::https::CaInfo "%s";' % gw.sluice.ca_pem in f.read()
    ca = "'%s'" % gw.sluice.ca_pem  # (as every line quotes it)
    assert text.splitlines()[-1] == (
        "# sluice: clients these variables do not reach: Chromium and Firefox (an NSS database) "
        "certutil -d sql:$HOME/.pki/nssdb -A -t C,, -n sluice -i %s; apt run through sudo, "
        "which drops APT_CONFIG: -o Acquire::https::CaInfo=%s" % (ca, ca)), text
    url = shlex.quote(gw.url("allowed.test", "/whoami.txt?m=" + marker()))
    wget = "wget -q -O - --tries=1 --timeout=20 "
    without = in_fresh_shell(gw, "unset WGETRC; " + wget + url, scratch)
    assert without.returncode != 0, "GnuTLS wget trusted sluice without its wgetrc"
    r = in_fresh_shell(gw, wget + url, scratch)
    assert (r.returncode, r.stdout) == (0, "allowed.test\n"), r.stderr


def test_env_names_the_proxy_and_the_ca_in_every_variable(gw):
    text = env_lines(gw)
    exports = dict(line[len("export "):].split("=", 1) for line in text.splitlines()
                   if line.startswith("export "))
    proxy = "'http://%s:%d'" % gw.sluice.address
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        assert exports.get(name) == proxy, (name, text)
    ca = "'%s'" % gw.sluice.ca_pem
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE",
                 "NODE_EXTRA_CA_CERTS", "npm_config_cafile", "GIT_SSL_CAINFO",
                 "CARGO_HTTP_CAINFO", "AWS_CA_BUNDLE", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
                 "DENO_CERT", "BUNDLE_SSL_CA_CERT", "HEX_CACERTS_PATH"):
        assert exports.get(name) == ca, (name, text)
    assert "NO_PROXY" in exports and "no_proxy" in exports


def test_env_refuses_an_unknown_sandbox(gw):
    r = sluice_cli(gw, "env", "-c", gw.sluice.config_path, "--sandbox", "nosuch")
    assert r.returncode == 2 and "nosuch" in r.stderr and r.stdout == ""


def test_a_shell_that_evaluates_env_can_curl(gw):
    m = marker()
    url = gw.url("allowed.test", "/whoami.txt?m=" + m)
    r = in_fresh_shell(gw, "curl -sS --max-time 30 %s" % url, gw.sluice.workdir)
    assert r.returncode == 0 and r.stdout == "allowed.test\n", r.stderr


def test_a_shell_that_evaluates_env_can_pip_download(gw, bed, scratch):
    index = gw.url("allowed.test", "/simple/")
    r = in_fresh_shell(gw, "/usr/bin/python3 -m pip download --no-deps --no-cache-dir "
                           "--disable-pip-version-check --no-input --retries 0 --timeout 30 "
                           "--index-url %s -d %s %s" % (index, scratch, C.PKG), scratch)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(scratch, C.WHEEL), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == bed.content.wheel_sha256


@pytest.fixture
def npm_registry(gw, bed):
    """A packument for sluicetestpkg at allowed.test/npm/: what `npm view` asks a registry for."""
    path = bed.content.path("allowed.test", "/npm/sluicetestpkg")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tarball = gw.url("allowed.test", "/npm/sluicetestpkg/-/sluicetestpkg-1.0.0.tgz")
    with open(path, "w") as f:
        json.dump({"name": "sluicetestpkg", "dist-tags": {"latest": "1.0.0"},
                   "versions": {"1.0.0": {"name": "sluicetestpkg", "version": "1.0.0",
                                          "dist": {"tarball": tarball}}}}, f)
    yield gw.url("allowed.test", "/npm/")
    os.remove(path)


def npm_view(gw, registry, scratch, before=""):
    """`npm view` in a fresh shell after sluice env (and `before`): npm's own config only (a
    user config of its own, a cache in scratch), no retries."""
    userconfig = os.path.join(scratch, "npmrc")
    open(userconfig, "w").close()
    return in_fresh_shell(
        gw, "%s npm view sluicetestpkg version --registry %s --userconfig %s --cache %s "
            "--fetch-retries 0 --fetch-timeout 30000 --no-update-notifier"
            % (before, registry, userconfig, os.path.join(scratch, "npm-cache")), scratch)


def test_a_shell_that_evaluates_env_can_npm_view(gw, npm_registry, scratch):
    """Debian's npm reads a global npmrc whose cafile is the system bundle, which replaces Node's
    trust list: NODE_EXTRA_CA_CERTS alone leaves npm refusing sluice's certificate (the control,
    with npm_config_cafile unset); with everything sluice env prints, npm trusts the sandbox CA
    and reads the packument through sluice."""
    control = npm_view(gw, npm_registry, scratch, before="unset npm_config_cafile;")
    assert control.returncode != 0, control.stdout
    assert "certificate" in (control.stdout + control.stderr).lower(), control.stderr
    r = npm_view(gw, npm_registry, scratch)
    assert (r.returncode, r.stdout.strip()) == (0, "1.0.0"), r.stdout + r.stderr


# Fetches its argument with the JDK's own HTTPS client and prints the status and the body: no
# option of its own, so the trust store and the proxy are whatever JAVA_TOOL_OPTIONS says.
FETCH_JAVA = """
import java.io.InputStream;
import java.net.URL;
import javax.net.ssl.HttpsURLConnection;

public class Fetch {
    public static void main(String[] args) throws Exception {
        HttpsURLConnection c = (HttpsURLConnection) new URL(args[0]).openConnection();
        c.setConnectTimeout(30000);
        c.setReadTimeout(30000);
        int status = c.getResponseCode();
        try (InputStream in = c.getInputStream()) {
            System.out.print(status + " " + new String(in.readAllBytes(), "UTF-8"));
        }
    }
}
"""


def java_fetch(gw, url, scratch, before=""):
    source = os.path.join(scratch, "Fetch.java")
    with open(source, "w") as f:
        f.write(FETCH_JAVA)
    return in_fresh_shell(gw, "%s java %s %s" % (before, source, url), scratch)


@pytest.mark.skipif(shutil.which("java") is None, reason="no java (scripts/install-deps --test "
                    "installs openjdk-17-jre-headless)")
def test_a_shell_that_evaluates_env_can_fetch_with_java(gw, scratch):
    """Java reads no CA variable and no HTTPS_PROXY: sluice env's JAVA_TOOL_OPTIONS gives it the
    PKCS#12 trust store sluice wrote beside ca.pem (keytool lists the CA as a trustedCertEntry)
    and the proxy. The control keeps the proxy options and drops the trust store's: Java then
    refuses sluice's certificate (PKIX)."""
    store = os.path.join(os.path.dirname(gw.sluice.ca_pem), "ca.p12")
    listed = subprocess.run(["keytool", "-list", "-keystore", store, "-storepass", "changeit",
                             "-storetype", "PKCS12"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "trustedCertEntry" in listed.stdout, listed.stdout
    m = marker()
    url = gw.url("allowed.test", "/whoami.txt?m=" + m)
    control = java_fetch(gw, url, scratch, before='JAVA_TOOL_OPTIONS=$(echo "$JAVA_TOOL_OPTIONS"'
                         " | sed 's/-Djavax[^ ]*//g');")
    assert control.returncode != 0, control.stdout
    assert "PKIX" in control.stderr, control.stderr
    mark = gw.audit.mark()
    r = java_fetch(gw, url, scratch)
    assert (r.returncode, r.stdout) == (0, "200 allowed.test\n"), r.stdout + r.stderr
    rec = gw.audit.one(mark, lambda rec: m in (rec.get("url") or ""))
    assert (rec["decision"], rec["status"]) == ("allow", 200), rec


# --- audit verify ---------------------------------------------------------------------------

def written_log(gw, scratch, n=6):
    """A copy of the audit log after `n` more requests (allowed and denied)."""
    mark = gw.audit.mark()
    for i in range(n):
        host = "allowed.test" if i % 2 == 0 else "evil.test"
        gw.tunnel(host, [get("/whoami.txt?m=" + marker(), host=host)])
    gw.audit.wait(mark, count=n)
    copy = os.path.join(scratch, "audit.jsonl")
    lines = gw.audit.lines()
    with open(copy, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    return copy, len(lines)


def verify(gw, path):
    return sluice_cli(gw, "audit", "verify", path)


def rewrite(path, lines, tail=""):
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines) + tail)


def test_audit_verify_passes_on_the_log_of_a_real_run(gw, scratch):
    path, n = written_log(gw, scratch)
    r = verify(gw, path)
    assert (r.returncode, r.stdout) == (0, "ok %d records\n" % n), r.stderr


def test_audit_verify_finds_every_tampering_at_its_line(gw, scratch):
    path, n = written_log(gw, scratch)
    with open(path) as f:
        original = f.read().split("\n")[:-1]
    assert n >= 6

    def edited_byte(lines):
        line = lines[3]
        at = line.index('"conn":') + len('"conn":')
        digit = line[at]
        lines[3] = line[:at] + ("1" if digit != "1" else "2") + line[at + 1:]
        return lines, "", 4

    def deleted(lines):
        del lines[2]
        return lines, "", 3

    def swapped(lines):
        lines[1], lines[2] = lines[2], lines[1]
        return lines, "", 2

    def cut_mid_line(lines):
        last = lines.pop()
        return lines, last[:len(last) // 2], n

    for tamper in (edited_byte, deleted, swapped, cut_mid_line):
        lines, tail, bad = tamper(list(original))
        rewrite(path, lines, tail)
        r = verify(gw, path)
        assert r.returncode == 1, (tamper.__name__, r.stdout, r.stderr)
        assert r.stdout.startswith("line %d: " % bad), (tamper.__name__, r.stdout)


def test_audit_verify_of_a_missing_file_is_bad_input(gw, scratch):
    r = verify(gw, os.path.join(scratch, "nothing-here.jsonl"))
    assert r.returncode == 2 and "nothing-here" in r.stderr
