// The records of the sandbox's resolver (docs/audit.md#dns-records): their fields, and the table
// that turns a flood of queries into one record per distinct (name, qtype, answer).
#include "proxy/audit/dns_record.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "proxy/audit/dns_query_log.h"

namespace sluice::proxy::audit {
namespace {

const auto kWhen = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764607425123));

policy::Endpoint endpoint(const char* text) { return *policy::Endpoint::parse(text); }

std::string body(const DnsRecord& r) {
  std::string out;
  appendDnsRecordBody(out, r);
  return out;
}

TEST(DnsRecord, FieldsInOrderKindDnsAfterTheSandbox) {
  DnsRecord r;
  r.ts = kWhen;
  r.sandbox = "agent-1";
  r.client = endpoint("10.200.0.2:40112");
  r.name = "c2VjcmV0.attacker.example";
  r.qtype = 1;
  r.answer = DnsAnswer::NxDomain;
  r.count = 3;
  EXPECT_EQ(body(r),
            "{\"ts\":\"2025-12-01T16:43:45.123Z\",\"sandbox\":\"agent-1\",\"kind\":\"dns\","
            "\"client\":\"10.200.0.2:40112\",\"name\":\"c2VjcmV0.attacker.example\","
            "\"qtype\":\"A\",\"answer\":\"nxdomain\",\"count\":3");
}

// A QNAME holds anything (parseQuery writes odd bytes as \DDD): escaped, never cut, one line.
TEST(DnsRecord, AnyNameIsEscapedAndWhole) {
  DnsRecord r;
  r.ts = kWhen;
  r.sandbox = "s";
  r.client = endpoint("[::1]:53");
  std::string worst;
  for (int label = 0; label < 4; ++label) {
    for (int i = 0; i < 63; ++i) {
      worst += "\\034";  // a '"' byte, as parseQuery writes it
    }
    worst += '.';
  }
  r.name = worst;
  r.qtype = 65280;
  r.answer = DnsAnswer::Refused;
  const std::string text = body(r);
  EXPECT_NE(text.find("\"client\":\"[::1]:53\""), std::string::npos) << text;
  std::string escaped;
  for (char c : worst) {
    escaped += c == '\\' ? std::string("\\\\") : std::string(1, c);
  }
  EXPECT_NE(text.find("\"name\":\"" + escaped + "\""), std::string::npos);
  EXPECT_NE(text.find("\"qtype\":\"TYPE65280\",\"answer\":\"refused\""), std::string::npos);
  EXPECT_EQ(text.find('\n'), std::string::npos);
}

TEST(DnsRecord, QtypeNames) {
  EXPECT_EQ(qtypeName(28), "AAAA");
  EXPECT_EQ(qtypeName(16), "TXT");
  EXPECT_EQ(qtypeName(65), "HTTPS");
  EXPECT_EQ(qtypeName(255), "ANY");
  EXPECT_EQ(qtypeName(0), "TYPE0");
  EXPECT_EQ(toString(DnsAnswer::Answered), "answered");
  EXPECT_EQ(toString(DnsAnswer::NoData), "nodata");
}

std::vector<DnsRecord> drained(DnsQueryLog& log, std::vector<std::string>& names) {
  std::vector<DnsRecord> out;
  log.drain("sbx", [&](const DnsRecord& r) {
    out.push_back(r);
    names.emplace_back(r.name);  // (the view dies with the drain)
  });
  return out;
}

// One record per distinct (name, qtype, answer), in the order first seen, with the first
// query's time and client and the count of all.
TEST(DnsQueryLog, AFloodOfOneNameIsOneRecordWithItsCount) {
  DnsQueryLog log;
  const auto a = endpoint("10.0.0.2:1000");
  const auto b = endpoint("10.0.0.2:1001");
  for (int i = 0; i < 500; ++i) {
    EXPECT_FALSE(log.note("x.attacker.test", 1, DnsAnswer::NxDomain, i == 0 ? a : b,
                          kWhen + std::chrono::milliseconds(i)));
  }
  EXPECT_FALSE(log.note("x.attacker.test", 28, DnsAnswer::NxDomain, b, kWhen));
  EXPECT_FALSE(log.note("x.attacker.test", 1, DnsAnswer::Refused, b, kWhen));
  EXPECT_FALSE(log.note("y.attacker.test", 1, DnsAnswer::NxDomain, b, kWhen));
  EXPECT_EQ(log.size(), 4u);
  std::vector<std::string> names;
  std::vector<DnsRecord> records = drained(log, names);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(names[0], "x.attacker.test");
  EXPECT_EQ(records[0].qtype, 1);
  EXPECT_EQ(records[0].count, 500u);
  EXPECT_EQ(records[0].client, a);
  EXPECT_EQ(records[0].ts, kWhen);
  EXPECT_EQ(records[0].sandbox, "sbx");
  EXPECT_EQ(records[1].qtype, 28);
  EXPECT_EQ(records[2].answer, DnsAnswer::Refused);
  EXPECT_EQ(names[3], "y.attacker.test");
  for (std::size_t i = 1; i < records.size(); ++i) {
    EXPECT_EQ(records[i].count, 1u);
  }
  EXPECT_TRUE(log.empty());
  // Drained: the next interval starts counting again.
  EXPECT_FALSE(log.note("x.attacker.test", 1, DnsAnswer::NxDomain, a, kWhen));
  names.clear();
  EXPECT_EQ(drained(log, names).at(0).count, 1u);
}

// Over its rate, a sandbox cannot make a record per name: the refused queries of an interval are
// one record, the first name and type standing for them all.
TEST(DnsQueryLog, QueriesRefusedForTheRateAreOneEntry) {
  DnsQueryLog log;
  for (int i = 0; i < 5000; ++i) {
    EXPECT_FALSE(log.note("chunk" + std::to_string(i) + ".attacker.test", i % 2 ? 16 : 1,
                          DnsAnswer::Refused, endpoint("10.0.0.2:1"), kWhen));
  }
  EXPECT_FALSE(
      log.note("chunk0.attacker.test", 1, DnsAnswer::NxDomain, endpoint("10.0.0.2:1"), kWhen));
  std::vector<std::string> names;
  std::vector<DnsRecord> records = drained(log, names);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(names[0], "chunk0.attacker.test");
  EXPECT_EQ(records[0].qtype, 1);
  EXPECT_EQ(records[0].answer, DnsAnswer::Refused);
  EXPECT_EQ(records[0].count, 5000u);
  EXPECT_EQ(records[1].answer, DnsAnswer::NxDomain);
}

// Distinct names (one per exfiltrated chunk): the table says when it is full, so the owner writes
// it out and memory stays bounded.
TEST(DnsQueryLog, DistinctNamesFillTheTableAtItsBound) {
  DnsQueryLog log;
  for (std::size_t i = 0; i + 1 < DnsQueryLog::kMaxEntries; ++i) {
    ASSERT_FALSE(log.note("n" + std::to_string(i) + ".attacker.test", 1, DnsAnswer::NxDomain,
                          endpoint("10.0.0.2:1"), kWhen));
  }
  EXPECT_TRUE(
      log.note("last.attacker.test", 1, DnsAnswer::NxDomain, endpoint("10.0.0.2:1"), kWhen));
  std::vector<std::string> names;
  EXPECT_EQ(drained(log, names).size(), DnsQueryLog::kMaxEntries);
}

}  // namespace
}  // namespace sluice::proxy::audit
