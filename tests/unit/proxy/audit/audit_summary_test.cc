// What `sluice audit summary` makes of audit logs (docs/audit.md#summaries): per sandbox and
// host, requests by decision and reason, bytes each way, first and last seen; DNS records per
// name; lines that are not records counted, never fatal.
#include "proxy/audit/audit_summary.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::proxy::audit {
namespace {

std::string request(std::string_view ts, std::string_view sandbox, std::string_view url,
                    std::string_view decision, std::string_view reason, std::string_view req,
                    std::string_view resp) {
  return std::string(R"({"ts":")") + std::string(ts) + R"(","sandbox":")" + std::string(sandbox) +
         R"(","kind":"http","conn":1,"sni":null,"host":null,"url":)" +
         (url.empty() ? std::string("null") : "\"" + std::string(url) + "\"") + R"(,"decision":")" +
         std::string(decision) + R"(","reason":)" +
         (reason.empty() ? std::string("null") : "\"" + std::string(reason) + "\"") +
         R"(,"req_bytes":)" + std::string(req) + R"(,"resp_bytes":)" + std::string(resp) +
         R"(,"chain":"00"})";
}

const std::string kLog[] = {
    request("2026-12-03T06:00:00.000Z", "a", "https://pypi.org/simple/", "allow", "", "0", "1000"),
    request("2026-12-03T06:00:05.000Z", "a", "https://pypi.org/x", "allow", "", "10", "24"),
    request("2026-12-03T06:00:01.000Z", "a", "https://pypi.org/admin", "deny", "not_allowed_path",
            "null", "null"),
    request("2026-12-03T06:00:02.000Z", "a", "https://evil.test:8443/", "deny", "not_allowed_host",
            "null", "null"),
    request("2026-12-03T06:00:03.000Z", "b", "http://mirror.test/p", "report", "not_allowed_path",
            "0", "5"),
    // A record written before `kind` existed is a request record.
    R"({"ts":"2026-12-03T06:00:04.000Z","sandbox":"b","url":"http://mirror.test/q","decision":"allow","req_bytes":0,"resp_bytes":7})",
    R"({"ts":"2026-12-03T06:00:06.000Z","sandbox":"a","kind":"dns","client":"10.0.0.2:5","name":"x.attacker.test","qtype":"A","answer":"nxdomain","count":3,"chain":"00"})",
    R"({"ts":"2026-12-03T06:00:09.000Z","sandbox":"a","kind":"dns","client":"10.0.0.2:5","name":"x.attacker.test","qtype":"TXT","answer":"refused","count":2,"chain":"00"})",
    // Not records: not JSON, no sandbox, a kind it does not know.
    "not json at all",
    R"({"ts":"2026-12-03T06:00:00.000Z"})",
    R"({"ts":"2026-12-03T06:00:00.000Z","sandbox":"a","kind":"future"})",
};

Summary summarise(SummaryFilter filter = {}) {
  Summary s(std::move(filter));
  for (const std::string& line : kLog) {
    s.add(line);
  }
  return s;
}

TEST(AuditSummary, PerSandboxAndHost) {
  Summary s = summarise();
  EXPECT_EQ(s.records(), 8u);
  EXPECT_EQ(s.skipped(), 3u);
  ASSERT_EQ(s.sandboxes().size(), 2u);
  const SandboxSummary& a = s.sandboxes().at("a");
  ASSERT_EQ(a.hosts.size(), 2u);
  const HostSummary& pypi = a.hosts.at("pypi.org");
  EXPECT_EQ(pypi.requests, 3u);
  EXPECT_EQ(pypi.allowed, 2u);
  EXPECT_EQ(pypi.denied, 1u);
  EXPECT_EQ(pypi.reasons, (std::map<std::string, std::uint64_t>{{"not_allowed_path", 1}}));
  EXPECT_EQ(pypi.req_bytes, 10u);
  EXPECT_EQ(pypi.resp_bytes, 1024u);
  EXPECT_EQ(pypi.first_seen, "2026-12-03T06:00:00.000Z");
  EXPECT_EQ(pypi.last_seen, "2026-12-03T06:00:05.000Z");
  EXPECT_EQ(a.hosts.at("evil.test:8443").denied, 1u);
  const NameSummary& name = a.names.at("x.attacker.test");
  EXPECT_EQ(name.queries, 5u);
  EXPECT_EQ(name.answers, (std::map<std::string, std::uint64_t>{{"nxdomain", 3}, {"refused", 2}}));
  EXPECT_EQ(name.last_seen, "2026-12-03T06:00:09.000Z");
  const HostSummary& mirror = s.sandboxes().at("b").hosts.at("mirror.test");
  EXPECT_EQ(mirror.requests, 2u);
  EXPECT_EQ(mirror.reported, 1u);
  EXPECT_EQ(mirror.resp_bytes, 12u);
}

TEST(AuditSummary, SinceAndSandboxLeaveRecordsOut) {
  Summary s = summarise({.since = "2026-12-03T06:00:03.000Z", .sandbox = "a"});
  EXPECT_EQ(s.records(), 3u);  // pypi.org/x and both DNS records
  EXPECT_EQ(s.filtered(), 5u);
  EXPECT_EQ(s.sandboxes().at("a").hosts.at("pypi.org").requests, 1u);
  EXPECT_EQ(s.sandboxes().count("b"), 0u);
}

// --since WHEN in the canonical form of a record's ts, so the text comparison is a time one:
// "...T06:00:03Z" as given would sort after a record of 06:00:03.5 ('Z' > '.').
TEST(AuditSummary, SinceIsCanonicalUtc) {
  using namespace std::chrono;
  const auto now =
      system_clock::time_point(sys_days(year(2026) / 12 / 3).time_since_epoch() + hours(6));
  struct Case {
    std::string_view when;
    std::optional<std::string> since;
  } cases[] = {
      {"2026-12-03", "2026-12-03T00:00:00.000Z"},
      {"2026-12-03T06:00", "2026-12-03T06:00:00.000Z"},
      {"2026-12-03T06:00:03Z", "2026-12-03T06:00:03.000Z"},
      {"2026-12-03t06:00:03.25z", "2026-12-03T06:00:03.250Z"},
      {"2026-12-03 06:00:03.123456", "2026-12-03T06:00:03.123Z"},
      {"2026-12-03T07:30:00+01:30", "2026-12-03T06:00:00.000Z"},
      {"2026-12-02T23:00-07:00", "2026-12-03T06:00:00.000Z"},
      {"0001-01-01", "0001-01-01T00:00:00.000Z"},
      {"2999-01-01", "2999-01-01T00:00:00.000Z"},                     // past system_clock's 2262
      {"9999-12-31T23:59:59.999-23:59", "9999-12-31T23:59:59.999Z"},  // clamped
      {"0000-01-01T00:00+23:59", "0000-01-01T00:00:00.000Z"},
      {"90s", "2026-12-03T05:58:30.000Z"},
      {"30m", "2026-12-03T05:30:00.000Z"},
      {"2h", "2026-12-03T04:00:00.000Z"},
      {"7d", "2026-11-26T06:00:00.000Z"},
      {"yesterday", std::nullopt},
      {"2026-02-30", std::nullopt},
      {"2026-12-03T24:00", std::nullopt},
      {"2026-12-03T06", std::nullopt},
      {"2026-12-03T06:00:03.", std::nullopt},
      {"2026-12-03T06:00+1", std::nullopt},
      {"2026-12-03-01:00", std::nullopt},  // an offset needs a time
      {"2026-12-03T06:00Zjunk", std::nullopt},
      {"h", std::nullopt},
      {"-2h", std::nullopt},
      {"1234567890h", std::nullopt},
      {"2w", std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(sinceTimestamp(c.when, now), c.since) << c.when;
  }
}

TEST(AuditSummary, TheTableAndTheJsonSayTheSame) {
  Summary s = summarise();
  std::string table = summaryTable(s);
  EXPECT_NE(table.find("sandbox a: 4 requests (2 allowed, 2 denied, 0 reported), 10 B up, "
                       "1.0 KiB down, 2026-12-03T06:00:00.000Z .. 2026-12-03T06:00:05.000Z"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("not_allowed_host 1"), std::string::npos) << table;
  EXPECT_NE(table.find("nxdomain 3, refused 2"), std::string::npos) << table;
  EXPECT_NE(table.find("8 records, 3 lines skipped (not records)"), std::string::npos);
  std::string json = summaryJson(s);
  EXPECT_NE(json.find(R"({"host":"pypi.org","requests":3,"allowed":2,"denied":1,"reported":0,)"
                      R"("reasons":{"not_allowed_path":1},"req_bytes":10,"resp_bytes":1024,)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("dns":[{"name":"x.attacker.test","queries":5,)"), std::string::npos);
}

// A name or host may hold anything a sandbox sent: the table shows it printable and cut.
TEST(AuditSummary, TheTableIsNotTheSandboxsToShape) {
  Summary s;
  s.add(R"({"ts":"t","sandbox":"a","kind":"dns","name":"evil\u001b[31m\nname)" +
        std::string(300, 'x') + R"(","answer":"nxdomain","count":1})");
  // A ts is whatever the line says (fuzz_audit_summary found one of DEL bytes).
  s.add(R"({"ts":"2026-12-03T06:0\u007f\u001b]0;x\u0007","sandbox":"a\u007f","url":"https://h/",)"
        R"("decision":"allow"})");
  std::string table = summaryTable(s);
  for (char c : table) {
    const unsigned char u = static_cast<unsigned char>(c);
    EXPECT_FALSE((u < 0x20 && c != '\n') || u == 0x7f) << static_cast<int>(u) << table;
  }
  EXPECT_EQ(table.find('\x1b'), std::string::npos);
  EXPECT_NE(table.find("evil?[31m?name"), std::string::npos) << table;
  EXPECT_EQ(table.find(std::string(300, 'x')), std::string::npos);
}

// The package files each sandbox was served (docs/packages.md#sbom), in the table and the JSON.
TEST(AuditSummary, ThePackagesEachSandboxFetched) {
  auto file = [](std::string_view sandbox, std::string_view decision, std::string_view status,
                 std::string_view package) {
    return std::string(R"({"ts":"2026-12-03T06:00:00.000Z","sandbox":")") + std::string(sandbox) +
           R"(","kind":"http","url":"https://r.test/f","decision":")" + std::string(decision) +
           R"(","status":)" + std::string(status) + R"(,"package":)" + std::string(package) + "}";
  };
  const std::string util =
      R"({"ecosystem":"npm","kind":"file","name":"@myorg/util","version":"1.0.1"})";
  const std::string wheel =
      R"({"ecosystem":"pypi","kind":"file","name":"Zope_Interface","version":"5.4"})";
  Summary s;
  s.add(file("a", "allow", "200", util));
  s.add(file("a", "allow", "200", util));
  s.add(file("a", "report", "200", wheel));
  s.add(file("b", "deny", "403", util));
  s.add(file("b", "allow", "404", wheel));
  s.add(file("b", "allow", "200",
             R"({"ecosystem":"npm","kind":"metadata","name":"x","version":null})"));
  s.add(file("b", "allow", "200", R"("not an object")"));  // a request still
  EXPECT_EQ(s.records(), 7u);
  EXPECT_EQ(s.sandboxes().at("a").packages.size(), 2u);
  EXPECT_TRUE(s.sandboxes().at("b").packages.empty());
  const std::string table = summaryTable(s);
  EXPECT_NE(
      table.find(
          "  package                                  version                   "
          "fetches  registry\n"
          "  @myorg/util                              1.0.1                           2  npm\n"
          "  zope-interface                           5.4                             1  pypi\n"),
      std::string::npos)
      << table;
  const std::string json = summaryJson(s);
  EXPECT_NE(json.find(R"("packages":[{"ecosystem":"npm","name":"@myorg/util","version":"1.0.1",)"
                      R"("purl":"pkg:npm/%40myorg/util@1.0.1","fetches":2},{"ecosystem":"pypi",)"
                      R"("name":"zope-interface","version":"5.4","purl":"pkg:pypi/)"
                      R"(zope-interface@5.4","fetches":1}])"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("sandbox":"b","hosts":)"), std::string::npos);
  EXPECT_NE(json.find(R"("packages":[]})"), std::string::npos) << json;
}

TEST(AuditSummary, TheHostOfARecord) {
  EXPECT_EQ(hostOfRecord("https://pypi.org/simple/", std::nullopt, std::nullopt), "pypi.org");
  EXPECT_EQ(hostOfRecord("https://[::1]:8443?q", std::nullopt, std::nullopt), "[::1]:8443");
  EXPECT_EQ(hostOfRecord("", std::string_view("sni.test"), std::string_view("h")), "sni.test");
  EXPECT_EQ(hostOfRecord("", std::nullopt, std::string_view("h.test:80")), "h.test:80");
  EXPECT_EQ(hostOfRecord("https://", std::nullopt, std::nullopt), "-");
}

}  // namespace
}  // namespace sluice::proxy::audit
