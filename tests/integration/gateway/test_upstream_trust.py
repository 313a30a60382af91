"""upstream.extra_ca_files (docs/configuration.md#upstream): a private origin's CA trusted beside
the default trust store, without a hand-made bundle, where `ca_file` replaces the default.

The bed's origins are signed by the test CA, atk.wild.test's by the attacker's CA. The "system"
store is OpenSSL's default, which reads SSL_CERT_FILE: here sluice runs with it naming the
attacker's CA, a stand-in for a public root. With the test CA in `extra_ca_files`, both a
private-CA origin and a "system-trusted" one are reached; with the test CA as `ca_file`, the
"system-trusted" one fails `upstream_cert` (replace, as before)."""
import expect
from oracles import get, marker


def without_ca_file(extra=None):
    def edit(config, workdir):
        del config["upstream"]["ca_file"]
        if extra is not None:
            config["upstream"]["extra_ca_files"] = extra(config, workdir)
    return edit


def test_the_default_store_alone_does_not_trust_the_private_origin(make_gw):
    g = make_gw(edit=without_ca_file())
    expect.denial(g.tunnel("allowed.test", [get("/whoami.txt?m=" + marker())]), 502,
                  "upstream_cert")


def answer(g, host):
    ex = g.tunnel(host, [get("/whoami.txt?m=" + marker(), host, keep_alive=False)])
    assert ex.final is not None, ex
    return ex.final


def test_an_extra_ca_file_is_trusted_beside_the_default_store(make_gw, bed):
    g = make_gw(edit=without_ca_file(lambda config, workdir: [bed.pki.test_ca.cert]),
                env={"SSL_CERT_FILE": bed.pki.attacker_ca.cert})
    private = answer(g, "allowed.test")
    assert (private.status, private.body) == (200, b"allowed.test\n"), private
    public = answer(g, "atk.wild.test")
    assert (public.status, public.body) == (200, b"ATTACKER\n"), public


def test_ca_file_still_replaces_the_default_store(make_gw, bed):
    g = make_gw(env={"SSL_CERT_FILE": bed.pki.attacker_ca.cert})  # ca_file: the test CA
    assert answer(g, "allowed.test").status == 200
    expect.denial(answer(g, "atk.wild.test"), 502, "upstream_cert")
