"""What an ip_denied tells the user (docs/wire.md#denials, docs/audit.md#the-fields) and how to
see it before a sandbox does: `sluice explain --resolve` (docs/cli.md#sluice-explain) asks the
resolver `run` asks, the bed's dnsmasq, and decides on its answer."""
import json
import subprocess

import expect
from netutil import clean_env
from oracles import DnsMark, get, marker


def rand():
    return marker()


def test_ip_denied_names_each_address_and_class(gw, bed):
    """docs/wire.md#denials: an allowed name whose resolver answers only a documentation-range
    address (what a captive or sinkholing resolver does) is refused with the address and its
    class in the body, `denied_addrs` on record, and `sluice explain --resolve` says the same
    before any sandbox asks."""
    name = "doc.pub.test"
    mark = gw.audit.mark()
    ex = gw.tunnel(name, [get("/whoami.txt", host=name)])
    expect.denial(ex, 403, "ip_denied")
    address = bed.dns.ZONE[name][0]
    body = ex.final.body.decode()
    assert body == ("sluice: ip_denied: %s resolves only to addresses sluice does not connect "
                    "to: %s (documentation, not globally reachable)\n" % (name, address)), body
    rec = gw.audit.one(mark, lambda r: r["client"] == ex.client)
    assert rec["denied_addrs"] == [{"ip": address, "class": "documentation",
                                    "refused": "not_global"}], rec

    url = gw.url(name, "/whoami.txt")
    r = subprocess.run([gw.sluice.binary, "explain", "-c", gw.sluice.config_path, "--sandbox",
                        "sbx1", "--url", url, "--resolve"], capture_output=True, text=True,
                       timeout=30, env=clean_env())
    verdict = json.loads(r.stdout)
    assert (r.returncode, verdict["decision"], verdict["reason"]) == (1, "deny", "ip_denied"), \
        (verdict, r.stderr)
    assert verdict["ip_checked"] is True and verdict["dns_error"] is None, verdict
    assert verdict["addresses"] == [{"ip": address, "usable": False, "class": "documentation",
                                     "refused": "not_global"}], verdict


def test_explain_resolve_asks_the_configured_resolver(gw, bed):
    """docs/cli.md#sluice-explain: --resolve asks the resolver `run` asks (the bed's dnsmasq,
    never /etc/hosts) and decides on its answer: an allowed name with a public-looking answer
    inside the rule's `ips` is allowed; a name the resolver does not know is dns_failed; a name
    the policy refuses is never looked up; --resolve with --ip is bad input."""
    def explain(url, *extra):
        r = subprocess.run([gw.sluice.binary, "explain", "-c", gw.sluice.config_path,
                            "--sandbox", "sbx1", "--url", url] + list(extra),
                           capture_output=True, text=True, timeout=30, env=clean_env())
        return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None), r.stderr

    code, verdict, err = explain(gw.url("allowed.test", "/"), "--resolve")
    assert (code, verdict["decision"]) == (0, "allow"), (verdict, err)
    assert [a["ip"] for a in verdict["addresses"]] == bed.dns.ZONE["allowed.test"], verdict
    assert all(a["usable"] and a["refused"] is None for a in verdict["addresses"]), verdict

    dns = DnsMark(bed)
    code, verdict, err = explain(gw.url("nowhere-%s.wild.test" % rand(), "/"), "--resolve")
    assert (code, verdict["decision"], verdict["reason"]) == (1, "deny", "dns_failed"), verdict
    assert verdict["dns_error"] == "not_found", verdict

    refused = "exfil-%s.attacker.test" % rand()
    code, verdict, err = explain("https://%s/" % refused, "--resolve")
    assert (code, verdict["reason"]) == (1, "not_allowed_host"), verdict
    assert "dns_error" not in verdict and verdict["ip_checked"] is False, verdict
    assert dns.asked(refused) == [], dns.names()

    code, verdict, err = explain(gw.url("allowed.test", "/"), "--resolve", "--ip", "1.1.1.1")
    assert code == 2 and verdict is None and "--resolve" in err, (code, err)
