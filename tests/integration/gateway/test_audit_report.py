"""`sluice audit report FILE... -o OUT.html` (docs/cli.md#sluice-audit-summary-sluice-audit-report)
on the log of a real run, opened in headless Chromium (Debian's `chromium`) with no network: the
page renders, its numbers are those of `sluice audit summary --json` (and so of the records), and
a screenshot is kept as a test artifact (build-logs/audit-report.png, or $SLUICE_ARTIFACTS)."""
import json
import os
import re
import subprocess

from audit import mixed_traffic_log
from clients import chromium
from netutil import clean_env


def run_chromium(binary, scratch, *args):
    # No network at all: the page must need none. A profile of its own, no sandbox (root).
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-extensions", "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
         "--user-data-dir=" + os.path.join(scratch, "chromium-profile")] + list(args),
        capture_output=True, text=True, timeout=120, env=clean_env())


def test_the_report_renders_and_says_what_the_log_says(gw, scratch):
    binary = chromium()
    log = os.path.join(scratch, "audit.jsonl")
    mixed_traffic_log(gw, log, 12)
    page = os.path.join(scratch, "report.html")
    r = subprocess.run([gw.sluice.binary, "audit", "report", log, "-o", page],
                       capture_output=True, text=True, timeout=60, env=clean_env())
    assert r.returncode == 0, r.stderr
    html = open(page, encoding="utf-8").read()
    # Self-contained: nothing it would fetch.
    assert not re.search(r"(src|href)\s*=", html), "the page links to something"
    assert "<script" not in html

    summary = json.loads(subprocess.run(
        [gw.sluice.binary, "audit", "summary", log, "--json"], capture_output=True, text=True,
        timeout=60, env=clean_env()).stdout)

    dom = run_chromium(binary, scratch, "--dump-dom", "file://" + page)
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = dom.stdout
    assert 'data-records="%d"' % summary["records"] in text
    for s in summary["sandboxes"]:
        for h in s["hosts"]:
            row = re.search(r'<tr data-host="%s" data-requests="(\d+)" data-allowed="(\d+)" '
                            r'data-denied="(\d+)" data-reported="(\d+)" data-req-bytes="(\d+)" '
                            r'data-resp-bytes="(\d+)"' % re.escape(h["host"]), text)
            assert row, h["host"]
            assert [int(x) for x in row.groups()] == [
                h["requests"], h["allowed"], h["denied"], h["reported"], h["req_bytes"],
                h["resp_bytes"]], (h, row.groups())
    bars = re.findall(r'<g class="bar"[^>]* data-allowed="(\d+)" data-denied="(\d+)" '
                      r'data-reported="(\d+)"', text)
    assert sum(sum(int(x) for x in b) for b in bars) == \
        sum(h["requests"] for s in summary["sandboxes"] for h in s["hosts"]), bars
    assert 'id="top-denials"' in text and 'id="top-bytes"' in text

    artifacts = os.environ.get("SLUICE_ARTIFACTS") or os.path.join(
        os.path.dirname(__file__), "..", "..", "..", "build-logs")
    os.makedirs(artifacts, exist_ok=True)
    shot = os.path.join(artifacts, "audit-report.png")
    r = run_chromium(binary, scratch, "--screenshot=" + shot, "--window-size=1280,1400",
                     "--hide-scrollbars", "file://" + page)
    assert r.returncode == 0 and os.path.getsize(shot) > 10000, r.stderr[-2000:]
