#!/usr/bin/python3
"""The log behind docs/images/audit-report.png: two sandboxes over 40 minutes with a quiet gap,
made up (seeded, so the same each time), in the shape of request records (docs/audit.md).
    docs/images/audit-report-sample.py > sample.jsonl
    sluice audit report sample.jsonl -o report.html
    chromium --headless --screenshot=shot.png --window-size=1300,1180 file://$PWD/report.html"""
import json
import random

random.seed(7)
HOSTS = {
    "agent-1": [("registry.npmjs.org", "allow", None), ("pypi.org", "allow", None),
                ("files.pythonhosted.org", "allow", None),
                ("c2VjcmV0.attacker.example", "deny", "not_allowed_host"),
                ("pypi.org", "deny", "not_allowed_path")],
    "agent-2": [("deb.debian.org", "allow", None), ("github.com", "deny", "not_allowed_host"),
                ("169.254.169.254", "deny", "ip_literal")],
}
records = []
for minute in list(range(0, 14)) + list(range(22, 40)):
    for sandbox, hosts in HOSTS.items():
        for _ in range(random.randint(0, 9)):
            host, decision, reason = random.choice(hosts)
            if decision == "allow" and random.random() < 0.1:
                decision, reason = "report", "not_allowed_path"
            records.append({
                "ts": "2026-12-03T06:%02d:%02d.%03dZ" % (minute, random.randint(0, 59),
                                                         random.randint(0, 999)),
                "sandbox": sandbox, "kind": "http", "url": "https://%s/x" % host,
                "decision": decision, "reason": reason,
                "req_bytes": random.randint(0, 900) if decision != "deny" else None,
                "resp_bytes": random.randint(1000, 3000000) if decision != "deny" else None})
for record in sorted(records, key=lambda r: r["ts"]):
    print(json.dumps(record))
