// The fields a head's Connection fields name (hop-by-hop, dropped by head_writer): which ones,
// what finding them costs (comparisons counted, never timed), and that writing a head of the
// parsers' size allocates nothing once the output buffer has grown.

#include "proxy/http/nominated_fields.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "proxy/http/head_writer.h"
#include "proxy/http/request_parser.h"

// Counts the allocations made while `g_counting` is set (this test executable only). malloc and
// free stay behind calls the compiler does not see through, so it does not take the pairs
// below for a `new` released with free().
namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::size_t> g_allocations{0};

[[gnu::noinline]] void* allocateBytes(std::size_t size) {
  return std::malloc(size == 0 ? 1 : size);
}
[[gnu::noinline]] void releaseBytes(void* p) { std::free(p); }
}  // namespace

void* operator new(std::size_t size) {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  }
  if (void* p = allocateBytes(size)) {
    return p;
  }
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { releaseBytes(p); }
void operator delete(void* p, std::size_t) noexcept { releaseBytes(p); }

namespace sluice::proxy::http::detail {
namespace {

HeaderBlock block(std::vector<std::pair<std::string, std::string>> fields) {
  HeaderBlock b;
  for (const auto& [name, value] : fields) {
    b.add(name, value);
  }
  return b;
}

std::vector<bool> nominatedOf(const HeaderBlock& b) {
  const NominatedFields nominated(b);
  std::vector<bool> out;
  for (std::size_t i = 0; i < b.size(); ++i) {
    out.push_back(nominated.contains(i));
  }
  return out;
}

TEST(NominatedFields, WhichFieldsAConnectionFieldNames) {
  struct Row {
    const char* edge_case;
    std::vector<std::pair<std::string, std::string>> fields;
    std::vector<bool> nominated;
  };
  const Row rows[] = {
      {"NoConnectionField", {{"X-A", "1"}, {"X-B", "2"}}, {false, false}},
      {"OneToken", {{"Connection", "x-a"}, {"X-A", "1"}, {"X-B", "2"}}, {false, true, false}},
      {"CaseAndOws",
       {{"X-Foo", "1"}, {"connection", " close ,\tX-FOO ,keep-alive"}, {"x-foo", "2"}},
       {true, false, true}},
      {"EveryFieldOfTheNameAndOnlyThatName",
       {{"X-A", "1"}, {"X-AB", "2"}, {"X-A", "3"}, {"Connection", "X-A"}, {"X", "4"}},
       {true, false, true, false, false}},
      {"EmptyTokensAndEmptyValue",
       {{"Connection", ",, ,"}, {"Connection", ""}, {"X-A", "1"}},
       {false, false, false}},
      {"TokensSpreadOverManyFields",
       {{"Connection", "a"},
        {"Connection", "b"},
        {"Connection", "c"},
        {"Connection", "d"},
        {"Connection", "e"},
        {"A", "1"},
        {"C", "2"},
        {"E", "3"},
        {"F", "4"}},
       {false, false, false, false, false, true, true, true, false}},
      {"TokenRepeated",
       {{"Connection", "x-a, X-A, x-a"}, {"X-A", "1"}, {"X-B", "2"}},
       {false, true, false}},
      {"TokenNamingAnAbsentField", {{"Connection", "x-gone"}, {"X-A", "1"}}, {false, false}},
      // Connection is hop-by-hop by name: never reported, whatever names it.
      {"ConnectionNamesItself", {{"Connection", "connection"}, {"X-A", "1"}}, {false, false}},
      {"PrefixIsNotTheName",
       {{"Connection", "x-a"}, {"X-A-B", "1"}, {"X", "2"}, {"X-", "3"}},
       {false, false, false, false}},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(nominatedOf(block(row.fields)), row.nominated) << row.edge_case;
  }
}

// A head like the hostile one: `fields` fields, half of them Connection fields whose `tokens`
// tokens (all distinct, most naming no field) are spread over them.
HeaderBlock connectionHeavy(std::size_t fields, std::size_t tokens) {
  HeaderBlock b;
  const std::size_t connection_fields = fields / 2;
  std::vector<std::string> values(connection_fields);
  for (std::size_t t = 0; t < tokens; ++t) {
    values[t % connection_fields] += "tok-" + std::to_string(t) + ",";
  }
  for (std::size_t i = 0; i < fields; ++i) {
    if (i % 2 == 0) {
      b.add("Connection", values[i / 2]);
    } else {
      b.add("X-Plain-" + std::to_string(i), "v");
    }
  }
  return b;
}

std::size_t comparisonsFor(std::size_t fields, std::size_t tokens) {
  const HeaderBlock b = connectionHeavy(fields, tokens);
  return NominatedFields(b).comparisons();
}

// Each token is one binary search (log2 n comparisons); sorting is n log2 n. Walking every
// field per token, as a quadratic matcher does, would be fields * tokens.
TEST(NominatedFields, WorkGrowsWithTheHeadNotWithItsSquare) {
  const std::size_t n = kDefaultMaxFields;
  const double log_n = std::log2(static_cast<double>(n));
  for (std::size_t tokens : {1000u, 4000u, 16000u}) {
    const auto work = static_cast<double>(comparisonsFor(n, tokens));
    const auto t = static_cast<double>(tokens);
    EXPECT_LE(work, 3 * static_cast<double>(n) * log_n + t * (log_n + 2)) << tokens;
    EXPECT_LT(work * 10, static_cast<double>(n) * t) << tokens;  // far below the quadratic
  }
  // Four times the tokens: about four times the work, not sixteen.
  const double ratio =
      static_cast<double>(comparisonsFor(n, 16000)) / static_cast<double>(comparisonsFor(n, 4000));
  EXPECT_LT(ratio, 4.5);
}

// With at most kFewTokens tokens in all, each field is compared with each token (length first)
// and nothing is sorted: a response's "Connection: keep-alive" costs one comparison per field.
// Past that, the sorted path and its bound above.
TEST(NominatedFields, FewTokensCostAtMostOneComparisonPerFieldAndToken) {
  const std::size_t n = kDefaultMaxFields;
  for (std::size_t tokens = 1; tokens <= NominatedFields::kFewTokens; ++tokens) {
    // Half the fields are Connection fields (never compared), the other half are.
    EXPECT_LE(comparisonsFor(n, tokens), tokens * (n / 2)) << tokens;
  }
  const HeaderBlock response = block({{"Server", "nginx"},
                                      {"Date", "Mon, 07 Dec 2026 03:00:00 GMT"},
                                      {"Content-Type", "application/octet-stream"},
                                      {"Content-Length", "100"},
                                      {"Last-Modified", "Mon, 07 Dec 2026 02:56:00 GMT"},
                                      {"Connection", "keep-alive"},
                                      {"ETag", "\"6753c2a0-64\""},
                                      {"Accept-Ranges", "bytes"}});
  EXPECT_EQ(NominatedFields(response).comparisons(), 7u);
  const auto log_n = std::log2(static_cast<double>(n));
  const std::size_t many = NominatedFields::kFewTokens + 1;
  EXPECT_LE(static_cast<double>(comparisonsFor(n, many)),
            3 * static_cast<double>(n) * log_n + static_cast<double>(many) * (log_n + 2));
}

// Both ways of finding the named fields (few tokens: each against each; more: sorted names)
// give what the definition gives, field by field: heads of 1 to 24 fields drawn from a few
// names in mixed case, with 0 to 9 tokens (some naming no field, some empty, with OWS) spread
// over 1 to 3 Connection fields.
TEST(NominatedFields, BothPathsAgreeWithTheDefinition) {
  const std::string names[] = {"X-A",     "x-a", "X-B", "Keep-Alive", "keep-alive",
                               "Upgrade", "TE",  "Te",  "X-AB"};
  const std::string tokens[] = {"x-a",    "X-B",        "keep-alive", "upgrade", "te",
                                "x-gone", "connection", "",           " x-ab\t"};
  std::uint32_t state = 20261207;
  auto next = [&state](std::uint32_t bound) {
    state = state * 1664525u + 1013904223u;
    return (state >> 8) % bound;
  };
  std::size_t few = 0;
  std::size_t sorted = 0;
  for (int round = 0; round < 4000; ++round) {
    std::vector<std::pair<std::string, std::string>> fields;
    const std::uint32_t plain = 1 + next(20);
    for (std::uint32_t i = 0; i < plain; ++i) {
      fields.emplace_back(names[next(std::size(names))], "v");
    }
    const std::uint32_t connection_fields = 1 + next(3);
    const std::uint32_t token_count = next(10);
    std::vector<std::string> values(connection_fields);
    std::vector<std::string> named;
    for (std::uint32_t t = 0; t < token_count; ++t) {
      const std::string& token = tokens[next(std::size(tokens))];
      values[next(connection_fields)] += (next(2) != 0 ? " , " : ",") + token;
      named.push_back(std::string(ascii::trimOws(token)));
    }
    for (const std::string& value : values) {
      fields.insert(fields.begin() + next(static_cast<std::uint32_t>(fields.size()) + 1),
                    {next(2) != 0 ? "Connection" : "CONNECTION", value});
    }
    std::vector<bool> expected;
    std::size_t nonempty = 0;
    for (const std::string& token : named) {
      nonempty += token.empty() ? 0 : 1;
    }
    for (const auto& [name, value] : fields) {
      bool is_named = false;
      for (const std::string& token : named) {
        is_named = is_named || (!token.empty() && ascii::iequals(name, token));
      }
      expected.push_back(is_named && !ascii::iequals(name, "Connection"));
    }
    (nonempty <= NominatedFields::kFewTokens ? few : sorted) += 1;
    EXPECT_EQ(nominatedOf(block(fields)), expected) << round;
  }
  EXPECT_GT(few, 1000u);
  EXPECT_GT(sorted, 1000u);
}

TEST(NominatedFields, MoreFieldsThanTheParsersAllowStillWork) {
  // A hand-built block past kInlineFields takes the heap path; same answers, n log n work.
  const std::size_t n = 4 * NominatedFields::kInlineFields;
  HeaderBlock b = connectionHeavy(n, 2000);
  b.add("Connection", "X-Plain-1, x-plain-1023");
  const NominatedFields nominated(b);
  EXPECT_TRUE(nominated.contains(1));
  EXPECT_TRUE(nominated.contains(1023));
  EXPECT_FALSE(nominated.contains(3));
  const auto size = static_cast<double>(n);
  EXPECT_LE(static_cast<double>(nominated.comparisons()),
            3 * size * std::log2(size) + 2002 * (std::log2(size) + 2));
}

struct NoBody : RequestBodySink {
  void onRequestBody(std::span<const char>) override {}
};

TEST(NominatedFields, WritingAHeadOfTheParsersLimitAllocatesNothing) {
  // 62 KiB, 256 fields, 100 of them Connection fields full of tokens, two of which name fields.
  std::string text = "GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\n";
  for (int i = 0; i < 100; ++i) {
    text += "Connection: ";
    for (int t = 0; t < 45; ++t) {
      text += "tok" + std::to_string(i) + "-" + std::to_string(t) + ", ";
    }
    text += i == 7 ? "x-named-1, X-NAMED-2\r\n" : "close\r\n";
  }
  for (int i = 0; i < 153; ++i) {
    text += "X-Plain-" + std::to_string(i) + ": v\r\n";
  }
  text += "X-Named-1: a\r\nx-named-2: b\r\n\r\n";
  RequestParser parser(64 * 1024, kDefaultMaxFields);
  NoBody sink;
  const ParseEvent e = parser.feed(std::string_view(text), sink);
  ASSERT_EQ(e.kind, EventKind::HeadComplete) << e.detail;
  ASSERT_EQ(parser.head().headers.size(), kDefaultMaxFields);

  std::string out;
  out.reserve(text.size());
  g_allocations = 0;
  g_counting = true;
  writeRequestHead(out, parser.head(), parser.head().origin_target, "pypi.org", {});
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0u);
  EXPECT_EQ(out.find("amed-"), std::string::npos) << out;
  EXPECT_NE(out.find("X-Plain-152: v\r\n"), std::string::npos);
}

}  // namespace
}  // namespace sluice::proxy::http::detail
