"""Test certificates, made with the `openssl` command line (EC P-256).

Two CAs: the test CA, which sluice trusts through `upstream.ca_file`, and the attacker's CA,
which nothing trusts. Leaves are issued with `openssl ca` so that validity dates can be set
(the expired certificate) and extensions are exactly what we write.
"""
from dataclasses import dataclass
import os
import subprocess
import time

_CA_CNF = """\
[ca]
default_ca = bed
[bed]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = anything
unique_subject = no
copy_extensions = none
[anything]
commonName = supplied
"""


@dataclass
class Pair:
    cert: str
    key: str


def _openssl(args, cwd):
    subprocess.run(["openssl"] + args, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE, timeout=60)


def _utc(offset_seconds):
    return time.strftime("%Y%m%d%H%M%SZ", time.gmtime(time.time() + offset_seconds))


class CA:
    def __init__(self, directory, cn):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self.cert = os.path.join(directory, "ca.pem")
        self.key = os.path.join(directory, "ca.key")
        _openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                  "-nodes", "-keyout", self.key, "-out", self.cert, "-days", "30",
                  "-subj", "/CN=" + cn,
                  "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign"], directory)
        with open(os.path.join(directory, "ca.cnf"), "w") as f:
            f.write(_CA_CNF)
        open(os.path.join(directory, "index.txt"), "w").close()
        with open(os.path.join(directory, "serial"), "w") as f:
            f.write("1000\n")

    def issue(self, stem, cn, dns=(), ips=(), expired=False):
        """A leaf for `cn` with SANs `dns` and `ips`, signed by this CA."""
        key = os.path.join(self.dir, stem + ".key")
        csr = os.path.join(self.dir, stem + ".csr")
        cert = os.path.join(self.dir, stem + ".pem")
        ext = os.path.join(self.dir, stem + ".ext")
        sans = ["DNS:" + d for d in dns] + ["IP:" + i for i in ips]
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                    "extendedKeyUsage=serverAuth\nsubjectAltName=%s\n" % ",".join(sans))
        _openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                  "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=" + cn], self.dir)
        if expired:
            dates = ["-startdate", "20200101000000Z", "-enddate", "20200201000000Z"]
        else:
            dates = ["-startdate", _utc(-86400), "-enddate", _utc(20 * 86400)]
        _openssl(["ca", "-batch", "-config", "ca.cnf", "-cert", self.cert, "-keyfile", self.key,
                  "-in", csr, "-out", cert, "-extfile", ext, "-notext"] + dates, self.dir)
        return Pair(cert, key)


class BedPKI:
    """Every certificate the bed uses, by role."""

    CDN_NAMES = ("allowed.test", "api.allowed.test", "other.test", "evil.test", "a.wild.test",
                 "mixed.wild.test", "mixed6.wild.test")

    def __init__(self, directory):
        self.test_ca = CA(os.path.join(directory, "testca"), "sluice bed test CA")
        self.attacker_ca = CA(os.path.join(directory, "attackerca"), "attacker CA")
        ca = self.test_ca
        self.cdn = {n: ca.issue(n, n, dns=[n]) for n in self.CDN_NAMES}
        self.cdn["second.test"] = ca.issue("second.test", "second.test", dns=["second.test"])
        # The origin that speaks HTTP/2 (nginx `listen ... ssl http2` on 127.0.0.25).
        self.h2 = ca.issue("h2.test", "h2.test", dns=["h2.test"])
        # The default server of the CDN address: a certificate for the IP, for clients that
        # connect by address (pip's direct self-test), and for "no SNI".
        self.cdn_ip = ca.issue("cdn-ip", "127.0.0.20", ips=["127.0.0.20"])
        self.expired = ca.issue("expired", "expired.wild.test", dns=["expired.wild.test"],
                                expired=True)
        # Trusted issuer, valid dates, but for another name than the one it is served for.
        self.wrong_name = ca.issue("wrongname", "not-this-name.test", dns=["not-this-name.test"])
        # The internal canary presents a certificate sluice would accept, so that a sluice
        # that wrongly dials it completes TLS and the request shows in the canary's log.
        self.internal = ca.issue("internal", "allowed.test",
                                 dns=["allowed.test", "*.wild.test", "*.pub.test"],
                                 ips=["127.0.0.1"])
        atk = self.attacker_ca
        self.attacker = {n: atk.issue("atk-" + n, n, dns=[n])
                         for n in ("allowed.test", "attacker.test", "atk.wild.test")}
