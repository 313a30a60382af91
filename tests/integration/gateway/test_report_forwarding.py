"""Report mode forwards what only the rules would deny
(docs/policy.md#report-mode), end to end.

The loopback bed cannot show this half (test_report_mode.py): without a matching rule's `ips`
only globally reachable addresses may be dialled (docs/policy.md#addresses), and all its origins are
on 127/8. Here the origin is 11.22.33.44, an address no special-purpose range holds, put on `lo`
of a network namespace of our own that has no other interface: nothing sent in it can leave
it (global_bed.py). Sluice, nginx, dnsmasq and curl all run in that namespace.

The policy of the one sandbox (mode: report):
  mirror  mirror.rpt.test, https, GET/HEAD, /simple/ only    -> 11.22.33.44 (no `ips`)
  inner   inner.rpt.test, https, /simple/ only, ips 127.0.0.1 -> 127.0.0.1
and stray.rpt.test (11.22.33.44) and loop.rpt.test (127.0.0.1) match no rule.

Each forwarded request is proven twice: the body curl got is the file nginx serves (with a
token of this run), and the origin's access log holds the request's marker. A sluice that
denied instead (enforce mode, or report mode that only records) fails both. Needs root
(namespaces); skips with the reason otherwise.
"""
import pytest

import expect
import global_bed
from global_bed import INNER, LOOP, MIRROR, ORIGIN, STRAY, marker


@pytest.fixture(scope="module")
def env(sluice_binary):
    reason = global_bed.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with global_bed.global_env(sluice_binary, mode="report") as e:
        yield e


def forwarded(env, r, docroot, path, m, role="origin", method="GET", status=200):
    """curl got nginx's answer for `docroot` `path`, and nginx logged the request (`m`)."""
    assert r.rc == 0, (r.rc, r.stderr, global_bed.sluice_log(env))
    assert r.sluice_reason is None, (r.final, r.body)
    assert r.http_code == status, (r.http_code, r.body, global_bed.sluice_log(env))
    if status == 200:
        assert r.body == env.files.body(docroot, path), r.body
    hits = env.nginx.hits(role, m)
    assert [(e["method"], e["status"]) for e in hits] == [(method, str(status))], hits
    return hits[0]


def test_a_path_the_rules_would_deny_is_forwarded_and_reported(env):
    m = marker()
    mark = env.audit.mark()
    r = env.curl("https://%s/private/data.txt?m=%s" % (MIRROR, m))
    hit = forwarded(env, r, MIRROR, "/private/data.txt", m=m)
    assert (hit["server_addr"], hit["server_port"], hit["ssl_server_name"]) == \
        (ORIGIN, "443", MIRROR), hit
    rec = env.record_for(mark, m)
    expect.record(rec, sandbox="rpt", mode="connect", method="GET", decision="report",
                  reason="not_allowed_path", rule=None, status=200,
                  upstream="%s:443" % ORIGIN, sni=MIRROR,
                  url="https://%s/private/data.txt?m=%s" % (MIRROR, m))
    assert rec["addrs"] in ([ORIGIN], []), rec  # [] when a pooled connection served it
    assert rec["resp_bytes"] == len(env.files.body(MIRROR, "/private/data.txt")), rec


def test_a_host_no_rule_matches_is_forwarded_and_reported(env):
    """A name of its own under stray.rpt.test (dnsmasq answers the whole tree; nginx's
    certificate covers it), so the DNS oracle is exact and no pooled connection is involved.
    Forwarding means resolving: in report mode sluice asks its resolver about a name no rule
    matches: point 7 of docs/wire.md#the-invariant cannot hold in report mode, as
    docs/policy.md#report-mode says."""
    m = marker()
    name = "%s.%s" % (m, STRAY)
    mark = env.audit.mark()
    r = env.curl("https://%s/whoami.txt?m=%s" % (name, m))
    hit = forwarded(env, r, STRAY, "/whoami.txt", m=m)
    assert (hit["server_addr"], hit["ssl_server_name"], hit["host"]) == (ORIGIN, name, name), hit
    rec = env.record_for(mark, m)
    expect.record(rec, mode="connect", decision="report", reason="not_allowed_host", rule=None,
                  status=200, upstream="%s:443" % ORIGIN, sni=name, addrs=[ORIGIN],
                  url="https://%s/whoami.txt?m=%s" % (name, m))
    assert env.dns.asked(name) >= 1


def test_plain_http_to_an_https_only_rule_is_forwarded_and_reported(env):
    """The mirror rule allows https only (the default `schemes`), so absolute-form
    http://mirror.rpt.test/ is not_allowed_scheme (checked before port, method and path),
    which report mode forwards, to port 80."""
    m = marker()
    mark = env.audit.mark()
    r = env.curl("http://%s/simple/index.html?m=%s" % (MIRROR, m))
    hit = forwarded(env, r, MIRROR, "/simple/index.html", m=m)
    assert (hit["server_addr"], hit["server_port"]) == (ORIGIN, "80"), hit
    rec = env.record_for(mark, m)
    expect.record(rec, mode="forward", decision="report", reason="not_allowed_scheme",
                  rule=None, status=200, upstream="%s:80" % ORIGIN, sni=None,
                  url="http://%s/simple/index.html?m=%s" % (MIRROR, m))


def test_a_method_the_rules_would_deny_is_forwarded_and_reported(env):
    """DELETE is not among the mirror rule's methods; nginx (static files) answers it 405, and
    that 405 is what the sandbox gets and the record says."""
    m = marker()
    mark = env.audit.mark()
    r = env.curl("https://%s/simple/index.html?m=%s" % (MIRROR, m), "-X", "DELETE")
    forwarded(env, r, MIRROR, "/simple/index.html", m=m, method="DELETE", status=405)
    rec = env.record_for(mark, m)
    expect.record(rec, method="DELETE", decision="report", reason="not_allowed_method",
                  rule=None, status=405, upstream="%s:443" % ORIGIN)


def test_an_allowed_request_is_allow_with_its_rule(env):
    m = marker()
    mark = env.audit.mark()
    r = env.curl("https://%s/simple/index.html?m=%s" % (MIRROR, m))
    forwarded(env, r, MIRROR, "/simple/index.html", m=m)
    rec = env.record_for(mark, m)
    expect.record(rec, decision="allow", reason=None, rule="mirror", status=200,
                  upstream="%s:443" % ORIGIN)


def test_a_non_global_address_is_still_ip_denied(env):
    """loop.rpt.test matches no rule, so report mode would forward it, but it resolves to
    127.0.0.1, where nginx listens with a certificate sluice would accept: the address checks
    hold (403 ip_denied), and nginx there sees no connection at all."""
    m = marker()
    mark = env.audit.mark()
    canary = env.nginx.canary_mark("internal")
    r = env.curl("https://%s/whoami.txt?m=%s" % (LOOP, m))
    assert (r.final and r.final.status, r.sluice_reason) == (403, "ip_denied"), \
        (r.rc, r.blocks, r.body, global_bed.sluice_log(env))
    expect.denial(r.final, 403, "ip_denied")
    expect.record(env.record_for(mark, m), decision="deny", reason="ip_denied", status=403,
                  upstream=None, rule=None)
    env.nginx.barrier()
    assert env.nginx.canary_hits_since("internal", canary) == []


def test_a_rules_ips_do_not_open_what_it_would_deny(env):
    """inner.rpt.test's rule opens 127.0.0.1 with `ips` for /simple/. /private/ matches no
    rule, so no `ips` apply to it: report mode must not carry the rule's addresses over to a
    request that rule does not allow (ip_denied), not even through the pooled upstream
    connection the allowed /simple/ request just left, while /simple/ works."""
    m = marker()
    mark = env.audit.mark()
    r = env.curl("https://%s/simple/index.html?m=%s" % (INNER, m))
    forwarded(env, r, "internal", "/simple/index.html", role="internal", m=m)
    expect.record(env.record_for(mark, m), decision="allow", rule="inner", status=200,
                  upstream="%s:443" % global_bed.LOOPBACK)

    m = marker()
    mark = env.audit.mark()
    r = env.curl("https://%s/private/data.txt?m=%s" % (INNER, m))
    assert (r.final and r.final.status, r.sluice_reason) == (403, "ip_denied"), \
        (r.rc, r.blocks, r.body, global_bed.sluice_log(env))
    expect.denial(r.final, 403, "ip_denied")
    expect.record(env.record_for(mark, m), decision="deny", reason="ip_denied", status=403,
                  rule=None, upstream=None)
    assert env.nginx.hits("internal", m) == []
