"""Transparent mode with `mode: report` (docs/policy.md#report-mode, #addresses;
docs/wire.md#the-sandboxs-resolver).

In report mode the sandbox's resolver answers every valid name with the gateway address (the
sandbox must be able to reach what the rules would deny, so that it is reported), still never
forwards a query, and still answers NXDOMAIN for names that are not valid. Requests the rules
alone would deny are forwarded and recorded as "report", but everything else holds: binding
(SNI = Host), and the address checks. On this loopback-only bed a name no rule matches has no
rule `ips`, so its loopback address is refused: ip_denied, and the canaries hear nothing.
Needs root (namespaces, nftables); skips with the reason otherwise.
"""
import pytest

from audit import check_dns_shape
from dnswire import A, AAAA, TXT
from netutil import wait_until
from expect import closed, denial
from transparent_bed import DOC4, check_record, get, transparent_env


@pytest.fixture(scope="module")
def env(bed, sluice_binary):
    with transparent_env(bed, sluice_binary, mode="report") as e:
        yield e


def test_every_valid_name_resolves_to_the_gateway_and_nothing_is_forwarded(env):
    m = env.mark()
    unknown = "%s.attacker.test" % m.marker
    for name in ("attacker.test", "evil.test", unknown):
        answer = env.query(name, A)
        assert (answer.rcode, answer.addresses) == ("NOERROR", [env.gw]), (name, answer)
        assert env.query(name, TXT).types == [], name
        assert env.query(name, AAAA).types == [], name
    for name in ("in_valid.test", "10.0.0.1", "x" * 64 + ".test"):
        answer = env.query(name, A)
        assert answer.rcode != "NOERROR" and answer.addresses == [], (name, answer)
    assert m.dns.names() == [], "sluice's resolver forwarded: %r" % m.dns.names()
    # docs/audit.md#dns-records: in report mode what was answered is on record too, beside what
    # was refused (written when the 10 s interval ends).
    wait_until(lambda: [r for r in env.audit.dns_records(m.audit) if r["name"] == unknown],
               25, "the DNS records")
    wait_until(lambda: len([r for r in env.audit.dns_records(m.audit)
                            if r["name"] == unknown]) >= 3, 5, "all three of them")
    records = env.audit.dns_records(m.audit)
    for r in records:
        check_dns_shape(r)
    mine = sorted((r["qtype"], r["answer"], r["count"]) for r in records if r["name"] == unknown)
    assert mine == [("A", "answered", 1), ("AAAA", "nodata", 1), ("TXT", "nodata", 1)], records
    refused = {r["name"]: r["answer"] for r in records if r["qtype"] == "A" and
               r["answer"] == "nxdomain"}
    assert {"in_valid.test", "10.0.0.1"} <= set(refused), records


@pytest.mark.parametrize("name, role", [("attacker.test", "attacker"), ("other.test", "cdn")])
def test_a_name_no_rule_matches_is_still_refused_an_address_it_may_not_use(env, name, role):
    """The sandbox reaches sluice for attacker.test by name (report mode answers it); sluice
    resolves it, and its loopback address is refused whatever the mode."""
    m = env.mark()
    r = env.curl("https://%s/whoami.txt?m=%s" % (name, m.marker))
    assert r.rc == 0 and r.http_code == 403, (r.rc, r.stderr)
    denial(r.final, 403, "ip_denied")
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % env.gw, "deny", "ip_denied", name, name, 403,
                 upstream=None, rule=None)
    assert env.cdn_hits(m.marker) == []
    m.canaries.assert_untouched()


def test_binding_still_holds_in_report_mode(env):
    """S1 in report mode: SNI allowed.test, Host other.test is host_mismatch, not reported."""
    m = env.mark()
    ex = env.exchange(DOC4, 443, [get("/whoami.txt?m=%s" % m.marker, host="other.test")],
                      sni="allowed.test")
    denial(ex, 403, "host_mismatch")
    closed(ex)
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "deny", "host_mismatch", "allowed.test",
                 "other.test", 403, client=ex.client)
    assert env.cdn_hits(m.marker) == []
    env.assert_nothing_dialled_outside(m)


def test_allowed_names_work_as_in_enforce_mode(env):
    m = env.mark()
    r = env.curl("https://allowed.test/whoami.txt?m=%s" % m.marker, "--resolve",
                 "allowed.test:443:%s" % DOC4)
    assert (r.rc, r.http_code, r.body) == (0, 200, b"allowed.test\n"), r.stderr
    rec = env.audit.one(m.audit)
    check_record(env, rec, "%s:443" % DOC4, "allow", None, "allowed.test", "allowed.test", 200,
                 rule="cdn", upstream="%s:443" % env.addrs.cdn)
    env.assert_nothing_dialled_outside(m)
