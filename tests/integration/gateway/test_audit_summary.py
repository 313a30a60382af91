"""`sluice audit summary` on the log of a real run
(docs/cli.md#sluice-audit-summary-sluice-audit-report): per sandbox and host, requests by
decision and reason and bytes each way, the same numbers the records say; `--since` and
`--sandbox` leave records out; a file that cannot be read is exit 2."""
import json
import os
import subprocess

from audit import mixed_traffic_log
from netutil import clean_env


def summary(gw, *args):
    r = subprocess.run([gw.sluice.binary, "audit", "summary"] + list(args), capture_output=True,
                       text=True, timeout=60, env=clean_env())
    return r.returncode, r.stdout, r.stderr


def expected(records):
    """What the summary must say, from the records themselves."""
    hosts = {}
    for r in records:
        url = r["url"] or ""
        host = url.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0] if "://" in url else \
            (r["sni"] or r["host"] or "-")
        h = hosts.setdefault((r["sandbox"], host), {"requests": 0, "allowed": 0, "denied": 0,
                                                   "reported": 0, "reasons": {},
                                                   "req_bytes": 0, "resp_bytes": 0,
                                                   "first_seen": r["ts"], "last_seen": r["ts"]})
        h["requests"] += 1
        h[{"allow": "allowed", "report": "reported"}.get(r["decision"], "denied")] += 1
        if r["reason"]:
            h["reasons"][r["reason"]] = h["reasons"].get(r["reason"], 0) + 1
        h["req_bytes"] += r["req_bytes"] or 0
        h["resp_bytes"] += r["resp_bytes"] or 0
        h["first_seen"] = min(h["first_seen"], r["ts"])
        h["last_seen"] = max(h["last_seen"], r["ts"])
    return hosts


def test_the_summary_says_what_the_log_says(gw, scratch):
    path = os.path.join(scratch, "audit.jsonl")
    mixed_traffic_log(gw, path, 9, ["a line that is no record"])

    code, out, err = summary(gw, path, "--json")
    assert code == 0, err
    got = json.loads(out)
    records = gw.audit.records()
    assert (got["records"], got["skipped"]) == (len(records), 1), got
    want = expected(records)
    seen = {}
    for s in got["sandboxes"]:
        for h in s["hosts"]:
            seen[(s["sandbox"], h["host"])] = {k: h[k] for k in want[(s["sandbox"], h["host"])]}
    assert seen == want
    assert want[("sbx1", "evil.test:%d" % gw.t)]["denied"] >= 3

    code, table, err = summary(gw, path)
    assert code == 0, err
    assert "sandbox sbx1: %d requests" % len(records) in table, table
    assert "not_allowed_host" in table, table

    # --since in the future leaves everything out; --sandbox of another name too.
    code, out, _ = summary(gw, path, "--json", "--since", "2999-01-01")
    assert code == 0 and json.loads(out)["records"] == 0 and \
        json.loads(out)["filtered"] == len(records)
    code, out, _ = summary(gw, path, "--json", "--since", "1h", "--sandbox", "nobody")
    assert code == 0 and json.loads(out)["sandboxes"] == []
    code, out, _ = summary(gw, path, "--json", "--since", "1h", "--sandbox", "sbx1")
    assert json.loads(out)["records"] == len(records), out


def test_bad_arguments_and_unreadable_files_are_exit_2(gw, scratch):
    for args in ([], ["--since", "yesterday", "x"], ["--bogus", "x"],
                 [os.path.join(scratch, "missing.jsonl")]):
        code, out, err = summary(gw, *args)
        assert code == 2 and out == "" and err, (args, code, out, err)
