// JSON out of hostile bytes: always valid JSON, nothing lost.
#include "base/json_writer.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace sluice {
namespace {

std::string quoted(std::string_view text) {
  std::string out;
  appendJsonString(out, text);
  return out;
}

TEST(AppendJsonString, EscapesWhatJsonRequires) {
  EXPECT_EQ(quoted("plain"), "\"plain\"");
  EXPECT_EQ(quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(quoted("\r\n\t"), "\"\\r\\n\\t\"");
  EXPECT_EQ(quoted(std::string_view("a\0b", 3)), "\"a\\u0000b\"");
  EXPECT_EQ(quoted("\x01\x1f\x7f"), "\"\\u0001\\u001f\\u007f\"");
}

TEST(AppendJsonString, KeepsValidUtf8AndEscapesInvalidBytes) {
  EXPECT_EQ(quoted("b\xc3\xbc" "cher"), "\"b\xc3\xbc" "cher\"");
  EXPECT_EQ(quoted("\xf0\x9f\x98\x80"), "\"\xf0\x9f\x98\x80\"");
  EXPECT_EQ(quoted("\xff"), "\"\\u00ff\"");
  EXPECT_EQ(quoted("\xc3"), "\"\\u00c3\"");                 // truncated sequence
  EXPECT_EQ(quoted("\xc0\xaf"), "\"\\u00c0\\u00af\"");      // overlong '/'
  EXPECT_EQ(quoted("\xed\xa0\x80"), "\"\\u00ed\\u00a0\\u0080\"");  // surrogate
  EXPECT_EQ(quoted("\xf4\x90\x80\x80"), "\"\\u00f4\\u0090\\u0080\\u0080\"");  // > U+10FFFF
}

TEST(JsonWriter, WritesCommasWhereTheyBelong) {
  std::string out;
  JsonWriter json(out);
  json.beginObject()
      .field("a", std::string_view("x"))
      .field("n", std::int64_t{-42})
      .fieldBool("t", true)
      .fieldNull("z")
      .fieldOrNull("e", "");
  json.key("list").beginArray().number(1).number(2).beginObject().endObject().endArray();
  json.endObject();
  EXPECT_EQ(out, R"({"a":"x","n":-42,"t":true,"z":null,"e":null,"list":[1,2,{}]})");
}

// Short plain strings take a shortcut (one append, quotes included); anything else the escaping
// loop. Both write the same: each string below, alone (the shortcut when short and plain) and
// after 200 plain bytes (always the loop), gives the same escaped text.
TEST(AppendJsonString, ShortcutWritesWhatTheEscapingLoopWrites) {
  std::vector<std::string> texts = {
      "", "a", "host.test", std::string(127, 'x'), std::string(128, 'x'), std::string(129, 'x')};
  for (int c = 0; c < 256; ++c) {
    std::string one(1, static_cast<char>(c));
    texts.push_back(one);
    texts.push_back("ab" + one + "cd");
    texts.push_back(std::string(127, 'y') + one);  // at the shortcut's length limit
    texts.push_back(std::string(128, 'y') + one);  // one past it
  }
  texts.emplace_back(
      "b\xc3\xbc"
      "cher");
  texts.emplace_back("\xc3");
  const std::string pad(200, 'p');
  for (const std::string& text : texts) {
    const std::string alone = quoted(std::string_view(text));
    EXPECT_EQ(quoted(std::string_view(pad + text)), "\"" + pad + alone.substr(1)) << alone;
  }
}

// key() and string() write the comma, the quotes and the colon themselves for a short plain
// name or value, and leave the rest to separate() and appendJsonString: the same text.
TEST(JsonWriter, ShortcutAndEscapingAgreeOnCommas) {
  const std::string long_name(130, 'k');
  std::string out;
  JsonWriter json(out);
  json.beginObject().field("a", std::string_view("x")).field("q\"", std::string_view("v\n"));
  json.field(long_name, std::string_view("\xff")).field("b", std::string_view(""));
  json.key("list").beginArray().string("s").string("t\\").null().number(-7).null().endArray();
  json.key("n").number(std::numeric_limits<std::int64_t>::min()).fieldNull("z");
  json.endObject();
  EXPECT_EQ(out, R"({"a":"x","q\"":"v\n",")" + long_name +
                     R"(":"\u00ff","b":"","list":["s","t\\",null,-7,null],)" +
                     R"("n":-9223372036854775808,"z":null})");
}

}  // namespace
}  // namespace sluice
