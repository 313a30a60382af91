"""Reading sluice's audit log (docs/audit.md): one JSON object per line, hash-chained."""
import hashlib
import json
import re

from netutil import read_text, wait_until
from oracles import get, marker

FIELDS = ("ts", "sandbox", "kind", "conn", "client", "mode", "sni", "host", "method", "url",
          "orig_dst", "addrs", "upstream", "decision", "rule", "reason", "status",
          "req_bytes", "resp_bytes", "req_sha256", "resp_sha256", "proto", "upstream_proto",
          "upgrade", "error", "denied_addrs", "package", "duration_ms", "chain")
# The `error` tokens of docs/audit.md#errors.
ERRORS = {"h2_rapid_reset", "h2_empty_data_flood", "h2_control_frame_flood", "h2_settings_flood",
          "h2_continuation_flood", "h2_compression_error", "h2_protocol_error", "client_reset",
          "tls_unknown_ca", "tls_bad_certificate", "tls_failed", "client_closed", "timeout",
          "closed_by_sluice"}
REASONS = {"not_allowed_host", "not_allowed_port", "not_allowed_scheme", "not_allowed_method",
           "not_allowed_path", "bad_host", "ip_literal", "ip_denied", "sni_missing",
           "sni_mismatch", "host_missing", "host_duplicate", "host_mismatch", "dns_failed",
           "dns_mismatch", "not_tls", "bad_request", "header_too_large", "upstream_connect",
           "upstream_cert", "upstream_timeout", "secret_misuse", "rate_limited",
           "too_many_connections", "upgrade_not_allowed", "audit_unavailable"}
_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


_CLIENT = re.compile(r"^127\.0\.0\.\d+:\d+$")
# A url in its one form: never the scheme's default port (docs/audit.md#the-fields).
_DEFAULT_PORT_URL = re.compile(r"^(https://[^/?#]+:443|http://[^/?#]+:80)(?:[/?#]|$)")
# Reasons decided before any upstream was asked: the origin's body was never read.
_BEFORE_UPSTREAM = REASONS - {"upstream_connect", "upstream_cert", "upstream_timeout",
                              "rate_limited", "audit_unavailable", "bad_request", "secret_misuse"}


def check_shape(rec, hash_bodies=True, client_re=None):
    """Assert that one record has every field of docs/audit.md with a plausible value; `chain` last.
    `client_re`: the pattern of the client field (default: a bed client on 127.0.0.x)."""
    missing = [f for f in FIELDS if f not in rec]
    assert not missing, "audit record lacks %s: %r" % (missing, rec)
    assert list(rec)[-1] == "chain", "chain must be the last member: %r" % rec
    assert _TS.match(rec["ts"]), rec["ts"]
    assert rec["mode"] in ("connect", "transparent", "forward"), rec
    assert rec["decision"] in ("allow", "deny", "report"), rec
    assert rec["reason"] is None or rec["reason"] in REASONS, rec
    # An allow has no reason, but an upstream that failed once the answer began
    # (docs/audit.md#the-fields: `reason`).
    assert rec["decision"] != "allow" or rec["reason"] in (None, "upstream_connect"), rec
    assert (client_re or _CLIENT).match(rec["client"]), rec
    assert isinstance(rec["addrs"], list) or rec["addrs"] is None, rec
    assert rec["status"] is None or isinstance(rec["status"], int), rec
    assert rec["proto"] in (None, "http/1.1", "h2"), rec
    assert rec["upstream_proto"] in (None, "http/1.1", "h2"), rec
    assert rec["upstream_proto"] is None or rec["upstream"] is not None, rec
    assert rec["upgrade"] in (None, "websocket"), rec
    assert rec["error"] is None or rec["error"] in ERRORS, rec
    assert rec["kind"] == "http", rec
    assert rec["url"] is None or not _DEFAULT_PORT_URL.match(rec["url"]), rec
    denied = rec["denied_addrs"]
    assert isinstance(denied, list), rec
    assert bool(denied) == (rec["reason"] == "ip_denied" and rec["decision"] == "deny"), rec
    for entry in denied:
        assert list(entry) == ["ip", "class", "refused"], rec
        assert entry["refused"] in ("sluice_listener", "outside_rule_ips", "not_global"), rec
        assert entry["class"], rec
    for key in ("req_bytes", "resp_bytes", "duration_ms"):
        assert rec[key] is None or isinstance(rec[key], (int, float)), rec
    # A body sluice never read is null, not 0 (nor the digest of nothing).
    if rec["reason"] in _BEFORE_UPSTREAM and rec["decision"] == "deny":
        assert rec["resp_bytes"] is None, rec
    if hash_bodies:
        for key in ("req_sha256", "resp_sha256"):
            assert rec[key] is None or _HEX64.match(rec[key]), rec
        for side in ("req", "resp"):
            assert (rec[side + "_bytes"] is None) == (rec[side + "_sha256"] is None), rec
    else:
        assert rec["req_sha256"] is None and rec["resp_sha256"] is None, rec
    assert _HEX64.match(rec["chain"]), rec


DNS_FIELDS = ("ts", "sandbox", "kind", "client", "name", "qtype", "answer", "count", "chain")


def check_dns_shape(rec):
    """A record of the sandbox's resolver (docs/audit.md#dns-records): exactly its fields, in
    order."""
    assert list(rec) == list(DNS_FIELDS), "DNS record fields: %r" % rec
    assert _TS.match(rec["ts"]), rec
    assert rec["kind"] == "dns", rec
    assert rec["answer"] in ("nxdomain", "refused", "nodata", "answered"), rec
    assert isinstance(rec["count"], int) and rec["count"] >= 1, rec
    assert re.match(r"^([A-Z0-9]+|TYPE\d+)$", rec["qtype"]), rec
    assert _HEX64.match(rec["chain"]), rec


def verify_chain(lines):
    """Recompute the chain of docs/audit.md; return the 1-based number of the first bad line, or
    0."""
    prev = "0" * 64
    for number, line in enumerate(lines, 1):
        cut = line.rfind(',"chain"')
        if cut < 0:
            return number
        expected = hashlib.sha256(prev.encode() + line[:cut].encode()).hexdigest()
        if json.loads(line).get("chain") != expected:
            return number
        prev = expected
    return 0


class AuditLog:
    def __init__(self, path, hash_bodies=True, client_re=None):
        self.path = path
        self.hash_bodies = hash_bodies
        self.client_re = re.compile(client_re) if isinstance(client_re, str) else client_re

    def lines(self):
        text = read_text(self.path)
        # Only whole lines: a record being written may not have its newline yet.
        return text.split("\n")[:-1] if text else []

    def _parsed(self, start=0):
        out = []
        for number, line in enumerate(self.lines()[start:], start + 1):
            try:
                out.append(json.loads(line))
            except ValueError as e:
                raise AssertionError("audit line %d is not JSON (%s): %r" % (number, e, line))
        return out

    def records(self):
        """The request records (docs/audit.md#the-fields): `kind` "http", or no `kind`."""
        return [r for r in self._parsed() if r.get("kind", "http") == "http"]

    def dns_records(self, mark=0):
        """The records of the sandbox's resolver (docs/audit.md#dns-records), after `mark`."""
        return [r for r in self._parsed(mark) if r.get("kind") == "dns"]

    def mark(self):
        """A point in the log (a line count, whatever the records' kinds)."""
        return len(self.lines())

    def since(self, mark):
        return [r for r in self._parsed(mark) if r.get("kind", "http") == "http"]

    def wait(self, mark, predicate=lambda r: True, count=1, timeout=20):
        """Wait until at least `count` records after `mark` satisfy `predicate`; return them
        (each checked against the shape of docs/audit.md)."""
        def enough():
            hits = [r for r in self.since(mark) if predicate(r)]
            return hits if len(hits) >= count else None
        try:
            hits = wait_until(enough, timeout, "%d audit record(s)" % count)
        except TimeoutError:
            raise AssertionError("expected %d audit record(s) after line %d, got:\n%s"
                                 % (count, mark, "\n".join(map(json.dumps, self.since(mark)))))
        for rec in hits:
            check_shape(rec, self.hash_bodies, self.client_re)
        return hits

    def one(self, mark, predicate=lambda r: True, timeout=20):
        """The single record after `mark` that matches; fails if there are more."""
        hits = self.wait(mark, predicate, 1, timeout)
        assert len(hits) == 1, "expected exactly one audit record, got %d: %r" % (len(hits), hits)
        return hits[0]


def mixed_traffic_log(gw, path, count, extra_lines=()):
    """`count` requests through sluice, in turn to an allowed host and two refused ones; once
    their records are written, the whole log copied to `path` (with `extra_lines` after it), for
    `sluice audit summary` and `report` to read."""
    mark = gw.audit.mark()
    for i in range(count):
        host = ("allowed.test", "evil.test", "attacker.test")[i % 3]
        gw.tunnel(host, [get("/whoami.txt?m=" + marker(), host=host)])
    # A refused name's tunnel is refused in band: its record and its request's.
    gw.audit.wait(mark, count=count + sum(1 for i in range(count) if i % 3))
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in list(gw.audit.lines()) + list(extra_lines)))
