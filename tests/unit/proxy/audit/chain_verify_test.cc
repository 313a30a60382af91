// The audit chain verifier against logs built here the way AuditSink writes them, and every
// kind of tampering docs/audit.md names: an edited byte, a dropped record, two records swapped, a
// truncated last line, and lines that are not records at all.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proxy/audit/audit_log.h"
#include "proxy/audit/chain_verify.h"

namespace sluice::proxy::audit {
namespace {

// Lines as AuditSink writes them: body, then ,"chain":"<sha256(previous + body)>"}.
std::vector<std::string> chainedLog(int n) {
  std::vector<std::string> lines;
  std::string previous(kGenesisChain);
  for (int i = 0; i < n; ++i) {
    std::string body = "{\"ts\":\"2026-11-30T00:00:0" + std::to_string(i) +
                       ".000Z\",\"sandbox\":\"s\",\"conn\":" + std::to_string(i);
    previous = chainOf(previous, body);
    lines.push_back(body + ",\"chain\":\"" + previous + "\"}");
  }
  return lines;
}

struct Outcome {
  bool ok;
  std::uint64_t records;
  std::uint64_t bad_line;
};

Outcome verify(const std::vector<std::string>& lines, bool last_complete = true) {
  ChainVerifier v;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!v.feed(lines[i], i + 1 < lines.size() || last_complete)) {
      break;
    }
  }
  return {v.ok(), v.records(), v.badLine()};
}

// The chain is docs/audit.md's: lower-case hex SHA-256 of the previous chain and the body, as
// any reader computes it (these values are Python's hashlib.sha256(...).hexdigest()).
TEST(ChainOf, IsTheHexSha256OfThePreviousChainAndTheBody) {
  const std::string first =
      chainOf(kGenesisChain, "{\"ts\":\"2026-11-30T00:00:00.000Z\",\"sandbox\":\"s\",\"conn\":0");
  EXPECT_EQ(first, "9d2665d759ae66aa91884c90cc3d0d4236e9897fb5db132de296b31e27994260");
  EXPECT_EQ(chainOf(first, "{\"x\":\"\\u00ff\""),
            "5d0daefa0c22ae88a4fcab2b17d23cb818dcc112faacbacac8b9caf547e6920b");
}

TEST(ChainVerifier, AnEmptyLogIsIntact) {
  Outcome o = verify({});
  EXPECT_TRUE(o.ok);
  EXPECT_EQ(o.records, 0u);
}

TEST(ChainVerifier, AnIntactLogVerifiesEveryRecord) {
  Outcome o = verify(chainedLog(5));
  EXPECT_TRUE(o.ok);
  EXPECT_EQ(o.records, 5u);
  EXPECT_EQ(o.bad_line, 0u);
}

struct Tampering {
  const char* name;
  void (*apply)(std::vector<std::string>&);
  std::uint64_t bad_line;
};

const Tampering kTamperings[] = {
    {"one byte of a body edited", [](auto& l) { l[2][10] = '9'; }, 3},
    {"the chain value edited", [](auto& l) { l[3][l[3].size() - 5] ^= 1; }, 4},
    {"the first record removed", [](auto& l) { l.erase(l.begin()); }, 1},
    {"a middle record removed", [](auto& l) { l.erase(l.begin() + 2); }, 3},
    {"two records swapped", [](auto& l) { std::swap(l[1], l[2]); }, 2},
    {"a record inserted", [](auto& l) { l.insert(l.begin() + 1, l[3]); }, 2},
    {"a blank line", [](auto& l) { l.insert(l.begin() + 4, ""); }, 5},
    {"a line that is not a record", [](auto& l) { l[0] = "hello"; }, 1},
    {"the chain member not last", [](auto& l) { l[1] += " "; }, 2},
    {"upper-case hex", [](auto& l) {
       for (char& c : l[0]) {
         if (c >= 'a' && c <= 'f') {
           c = static_cast<char>(c - 'a' + 'A');
         }
       }
     }, 1},
};

TEST(ChainVerifier, EveryTamperingIsFoundAtItsLine) {
  for (const Tampering& t : kTamperings) {
    std::vector<std::string> lines = chainedLog(6);
    t.apply(lines);
    Outcome o = verify(lines);
    EXPECT_FALSE(o.ok) << t.name;
    EXPECT_EQ(o.bad_line, t.bad_line) << t.name;
    EXPECT_EQ(o.records, t.bad_line - 1) << t.name;
  }
}

TEST(ChainVerifier, ALastLineCutMidRecordIsBroken) {
  std::vector<std::string> lines = chainedLog(3);
  lines.back().resize(lines.back().size() / 2);
  Outcome o = verify(lines, /*last_complete=*/false);
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.bad_line, 3u);
}

TEST(ChainVerifier, AWholeLastLineWithoutItsNewlineIsStillBroken) {
  // The newline is part of the record's write: a record without it was cut.
  Outcome o = verify(chainedLog(2), /*last_complete=*/false);
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.bad_line, 2u);
}

TEST(ChainVerifier, NothingIsAcceptedAfterTheFirstBadLine) {
  std::vector<std::string> lines = chainedLog(3);
  ChainVerifier v;
  EXPECT_TRUE(v.feed(lines[0]));
  EXPECT_FALSE(v.feed("junk"));
  EXPECT_FALSE(v.feed(lines[1]));
  EXPECT_EQ(v.badLine(), 2u);
  EXPECT_EQ(v.records(), 1u);
}

}  // namespace
}  // namespace sluice::proxy::audit
