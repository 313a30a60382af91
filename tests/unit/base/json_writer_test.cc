// JSON out of hostile bytes: always valid JSON, nothing lost.
#include "base/json_writer.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace sluice
