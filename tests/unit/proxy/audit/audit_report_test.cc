// The HTML page of `sluice audit report` (docs/cli.md#sluice-audit-summary-sluice-audit-report):
// self-contained, every number also in a data- attribute, and nothing from a log can become
// markup.
#include "proxy/audit/audit_report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::proxy::audit {
namespace {

TEST(AuditReport, NothingFromALogBecomesMarkup) {
  Summary s;
  s.add(R"({"ts":"2026-12-03T06:00:00.000Z","sandbox":"a<b","url":"https://x\"><script>alert(1)</script>/","decision":"deny","reason":"not_allowed_host"})");
  s.add(R"({"ts":"2026-12-03T06:00:01.000Z","sandbox":"a<b","kind":"dns","name":"n'\u0007<i>","answer":"nxdomain","count":2})");
  const std::string page = summaryReport(s, {"/tmp/a&b.jsonl"});
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<i>"), std::string::npos);
  EXPECT_EQ(page.find('\a'), std::string::npos);
  // (the host is the url up to its first "/")
  EXPECT_NE(page.find("data-host=\"x&quot;&gt;&lt;script&gt;alert(1)&lt;\""), std::string::npos);
  EXPECT_NE(page.find("/tmp/a&amp;b.jsonl"), std::string::npos);
  EXPECT_NE(page.find("data-sandbox=\"a&lt;b\""), std::string::npos);
  EXPECT_NE(page.find("data-name=\"n&#39;?&lt;i&gt;\" data-queries=\"2\""), std::string::npos);
}

TEST(AuditReport, SelfContainedWithTheNumbersInAttributes) {
  Summary s;
  for (int i = 0; i < 300; ++i) {  // 300 minutes: merged into at most 120 bars
    char ts[64];
    std::snprintf(ts, sizeof(ts), "2026-12-03T%02d:%02d:00.000Z", i / 60, i % 60);
    s.add(std::string(R"({"ts":")") + ts +
          R"(","sandbox":"a","url":"https://pypi.org/","decision":"allow","resp_bytes":10})");
  }
  const std::string page = summaryReport(s, {"log"});
  EXPECT_EQ(page.find("src="), std::string::npos);
  EXPECT_EQ(page.find("href="), std::string::npos);
  EXPECT_NE(page.find("data-records=\"300\""), std::string::npos);
  EXPECT_NE(page.find("<tr data-host=\"pypi.org\" data-requests=\"300\" data-allowed=\"300\" "
                      "data-denied=\"0\" data-reported=\"0\" data-req-bytes=\"0\" "
                      "data-resp-bytes=\"3000\">"),
            std::string::npos);
  std::size_t bars = 0;
  std::uint64_t allowed = 0;
  for (std::size_t at = page.find("<g class=\"bar\""); at != std::string::npos;
       at = page.find("<g class=\"bar\"", at + 1)) {
    ++bars;
    const std::size_t value = page.find("data-allowed=\"", at) + 14;
    allowed += std::stoull(page.substr(value, page.find('"', value) - value));
  }
  EXPECT_LE(bars, 120u);
  EXPECT_GE(bars, 100u);
  EXPECT_EQ(allowed, 300u);
  EXPECT_NE(page.find("<svg id=\"top-bytes\""), std::string::npos);
  EXPECT_NE(page.find("None."), std::string::npos);  // no denials: no denial chart
}

// Quiet minutes are gaps in the chart: records at 06:00 and 06:10 are eleven bars, nine of them
// empty; a ts that is no time is counted beside the chart, not dropped.
TEST(AuditReport, TheTimelineKeepsTheGapsBetweenMinutes) {
  Summary s;
  s.add(R"({"ts":"2026-12-03T06:00:59.000Z","sandbox":"a","url":"https://a/","decision":"allow"})");
  s.add(R"({"ts":"2026-12-03T06:10:00.000Z","sandbox":"a","url":"https://a/","decision":"deny"})");
  s.add(R"({"ts":"yesterday","sandbox":"a","url":"https://a/","decision":"deny"})");
  const std::string page = summaryReport(s, {"log"});
  std::vector<std::string> bars;
  for (std::size_t at = page.find("<g class=\"bar\""); at != std::string::npos;
       at = page.find("<g class=\"bar\"", at + 1)) {
    bars.push_back(page.substr(at, page.find("><title>", at) - at));
  }
  ASSERT_EQ(bars.size(), 11u);
  EXPECT_EQ(bars[0], R"(<g class="bar" data-from="2026-12-03T06:00" data-allowed="1" )"
                     R"(data-denied="0" data-reported="0")");
  EXPECT_EQ(bars[5], R"(<g class="bar" data-from="2026-12-03T06:05" data-allowed="0" )"
                     R"(data-denied="0" data-reported="0")");
  EXPECT_EQ(bars[10], R"(<g class="bar" data-from="2026-12-03T06:10" data-allowed="0" )"
                      R"(data-denied="1" data-reported="0")");
  EXPECT_NE(page.find(R"(<p class="meta" id="undated" data-allowed="0" data-denied="1" )"
                      R"(data-reported="0">1 request whose ts is no time not in the timeline)"),
            std::string::npos);
}

// Two records a year apart: the bars stay at most 120, each as many minutes wide.
TEST(AuditReport, ALongSpanIsAtMost120Bars) {
  Summary s;
  s.add(R"({"ts":"2025-12-03T06:00:00.000Z","sandbox":"a","url":"https://a/","decision":"allow"})");
  s.add(R"({"ts":"2026-12-03T06:00:00.000Z","sandbox":"a","url":"https://a/","decision":"allow"})");
  const std::string page = summaryReport(s, {"log"});
  std::size_t bars = 0;
  for (std::size_t at = page.find("<g class=\"bar\""); at != std::string::npos;
       at = page.find("<g class=\"bar\"", at + 1)) {
    ++bars;
  }
  EXPECT_LE(bars, 120u);
  EXPECT_GE(bars, 100u);
  EXPECT_NE(page.find("data-minutes-per-bar=\"4381\""), std::string::npos);  // 525,601 / 120
}

}  // namespace
}  // namespace sluice::proxy::audit
