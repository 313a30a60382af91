"""How sluice ends an HTTP/2 connection to an origin that did nothing wrong
(docs/wire.md#http2-toward-origins): a session idle past its bound, or open when sluice stops, is
closed with GOAWAY(NO_ERROR) before the close (RFC 9113 §6.8), so the origin can tell a goodbye
from a lost connection.

The origin is trailer_origin.py (grpc.test on 127.0.0.26, its h2 port, python3-h2), which keeps,
per HTTP/2 connection, the requests it carried and the code of the GOAWAY the client sent, if
any. The gateway's idle_timeout is 1 s, so an idle session ends within about 2 s (the sweep runs
every second). Oracles: the origin's connection records."""
import pytest

from gateway import Gateway, Runner
from h2client import H2Tunnel
from oracles import marker
from sluice_proc import bed_rules
from trailer_origin import ADDRESS, NAME, TrailerOrigin

NO_ERROR = 0


@pytest.fixture(scope="module")
def origin(bed):
    server = TrailerOrigin(bed.pki)
    yield server
    server.stop()


def start_gateway(sluice_binary, bed, origin):
    rule = {"name": "goodbye", "hosts": [NAME], "ports": [origin.h2_port],
            "ips": [ADDRESS + "/32"]}

    def edit(config, workdir):
        config["limits"]["idle_timeout"] = "1s"

    runner = Runner(sluice_binary, bed)
    sluice = runner.start(rules=bed_rules(bed.tls_port, bed.plain_port) + [rule], edit=edit)
    return runner, Gateway(sluice, bed)


def one_get(gw, origin, m):
    with H2Tunnel(gw.sluice.address, "%s:%d" % (NAME, origin.h2_port),
                  gw.sluice.ca_pem).start() as t:
        s = t.wait(t.request("GET", "/goodbye?m=" + m))[0]
    assert s.status == 200, s.describe()


def test_an_idle_upstream_session_says_goaway_before_it_closes(sluice_binary, bed, origin):
    runner, gw = start_gateway(sluice_binary, bed, origin)
    try:
        m = marker()
        one_get(gw, origin, m)
        connection = origin.connection_of(m, timeout=10)
        assert connection is not None, "the idle upstream session was never closed"
        assert connection["goaway"] == NO_ERROR, connection
    finally:
        runner.stop_all()


def test_a_session_open_when_sluice_stops_says_goaway(sluice_binary, bed, origin):
    runner, gw = start_gateway(sluice_binary, bed, origin)
    try:
        m = marker()
        one_get(gw, origin, m)
        assert origin.connection_of(m, timeout=0.2) is None  # still pooled
        gw.sluice.stop()
        connection = origin.connection_of(m, timeout=10)
        assert connection is not None, "the upstream session outlived sluice"
        assert connection["goaway"] == NO_ERROR, connection
    finally:
        runner.stop_all()
