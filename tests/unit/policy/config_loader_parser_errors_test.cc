// Errors yaml-cpp raises, as the loader reports them: inside the file (yaml-cpp reads a sentinel
// past the end of the text and can point there), and printable (its message may quote a byte of
// the text). Found by the long fuzz_config campaign (a file ending in a backslash inside a
// double-quoted string pointed one column past the line's end); the input is in
// tests/fuzz/corpus/fuzz_config.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/config_loader.h"
#include "tests/unit/policy/config_errors.h"

namespace sluice::policy {
namespace {

using test::errorsOf;

TEST(ParserErrors, TheEndOfTheTextInsideAnEscapeIsAtTheEndOfTheLine) {
  const std::string message = "the text ends inside a double-quoted string, after a backslash";
  EXPECT_THAT(errorsOf("a: \"x\\"), testing::ElementsAre("test.yaml:1:7: " + message));
  EXPECT_THAT(errorsOf("version: 1\na: \"x\n  y\\"),
              testing::ElementsAre("test.yaml:3:5: " + message));
}

TEST(ParserErrors, AControlCharacterInAMessageIsEscaped) {
  EXPECT_THAT(errorsOf(std::string("a: \"\\\x01\"")),
              testing::ElementsAre("test.yaml:1:7: unknown escape character: \\x01"));
}

}  // namespace
}  // namespace sluice::policy
