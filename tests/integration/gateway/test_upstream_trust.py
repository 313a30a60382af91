"""upstream.extra_ca_files (docs/configuration.md#upstream): a private origin's CA trusted beside
the default trust store, without a hand-made bundle, where `ca_file` replaces the default.

The bed's origins are signed by the test CA. With no `ca_file` (OpenSSL's default store, Debian's
public roots) they fail `upstream_cert`; with the test CA in `extra_ca_files` they are reached,
and the default store is still read (tests/unit/proxy/tls/tls_session_test.cc counts it)."""
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


def test_an_extra_ca_file_is_trusted_beside_the_default_store(make_gw, bed):
    g = make_gw(edit=without_ca_file(lambda config, workdir: [bed.pki.test_ca.cert]))
    ex = g.tunnel("allowed.test", [get("/whoami.txt?m=" + marker(), keep_alive=False)])
    assert ex.final is not None and (ex.final.status, ex.final.body) == \
        (200, b"allowed.test\n"), ex
