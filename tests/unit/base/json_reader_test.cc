// Reading one JSON object per line (base/json_reader.h): what `sluice audit summary` reads logs
// with. Strict, bounded, and whatever the line holds, an answer.
#include "base/json_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice {
namespace {

TEST(JsonObjectLine, ReadsTheScalarMembersOfARecord) {
  auto r = JsonObjectLine::parse(
      R"({"ts":"2026-12-03T06:00:00.000Z","sandbox":"a\"b\\c\u00e9\ud83d\ude00","conn":42,)"
      R"("rule":null,"ok":true,"addrs":["1.2.3.4",{"x":[1,2]}],"req_bytes":12,"x":-1.5e3})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->string("ts"), "2026-12-03T06:00:00.000Z");
  EXPECT_EQ(r->string("sandbox"), "a\"b\\c\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(r->count("conn"), 42u);
  EXPECT_EQ(r->count("req_bytes"), 12u);
  EXPECT_EQ(r->count("rule"), std::nullopt);  // null is no count
  EXPECT_EQ(r->count("x"), std::nullopt);     // nor a negative or fractional number
  EXPECT_EQ(r->string("rule"), std::nullopt);
  ASSERT_NE(r->find("addrs"), nullptr);
  EXPECT_EQ(r->find("addrs")->kind, JsonScalar::Kind::Nested);
  EXPECT_EQ(r->find("addrs")->text, R"(["1.2.3.4",{"x":[1,2]}])");  // as written, to read again
  ASSERT_NE(r->find("ok"), nullptr);
  EXPECT_TRUE(r->find("ok")->boolean);
  EXPECT_EQ(r->find("missing"), nullptr);
  EXPECT_DOUBLE_EQ(r->find("x")->number, -1500);
}

TEST(JsonObjectLine, RefusesWhatIsNotOneObject) {
  for (std::string_view bad : {"",
                               "[]",
                               "\"x\"",
                               "{",
                               "{\"a\":}",
                               "{\"a\":1,}",
                               "{\"a\" 1}",
                               "{a:1}",
                               "{\"a\":1} {}",
                               "{\"a\":01}",
                               "{\"a\":1.}",
                               "{\"a\":\"\\x\"}",
                               "{\"a\":\"\\ud800\"}",
                               "{\"a\":\"\\udc00x\"}",
                               "{\"a\":\"tab\there\"}",
                               "{\"a\":\"\xff\"}",
                               "{\"a\":tru}",
                               "{\"a\":[1,]}",
                               "{\"a\":[1 2]}",
                               "{\"a\":{\"b\"}}",
                               "{\"a\":\"\\u12\"}",
                               "{\"a\":-}",
                               "{\"a\":1e}"}) {
    std::string why;
    EXPECT_FALSE(JsonObjectLine::parse(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  EXPECT_TRUE(JsonObjectLine::parse(" { } \r"));
}

TEST(JsonObjectLine, NestingIsBounded) {
  std::string deep = "{\"a\":" + std::string(JsonObjectLine::kMaxDepth, '[') +
                     std::string(JsonObjectLine::kMaxDepth, ']') + "}";
  EXPECT_TRUE(JsonObjectLine::parse(deep));
  std::string deeper = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  std::string why;
  EXPECT_FALSE(JsonObjectLine::parse(deeper, &why));
  EXPECT_EQ(why, "nested too deep");
}

TEST(JsonObjectLine, CountsAreWholeNumbersUpTo2To53) {
  EXPECT_EQ(JsonObjectLine::parse(R"({"n":9007199254740992})")->count("n"), 9007199254740992u);
  EXPECT_EQ(JsonObjectLine::parse(R"({"n":9007199254740993})")->count("n"), std::nullopt);
  EXPECT_EQ(JsonObjectLine::parse(R"({"n":1e3})")->count("n"), std::nullopt);
  EXPECT_EQ(JsonObjectLine::parse(R"({"n":0})")->count("n"), 0u);
  EXPECT_EQ(JsonObjectLine::parse(R"({"n":1,"n":2})")->count("n"), 2u);  // the last one
}

}  // namespace
}  // namespace sluice
