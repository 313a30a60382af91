// SecretValues::load: where a secret comes from, and every way it can be missing or unusable,
// each an error naming the secret (and never containing its value).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "proxy/runtime/secret_values.h"
#include "tests/support/temp_dir.h"

namespace sluice::proxy {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

policy::Config configWith(policy::Secret::Source source, const std::string& where) {
  policy::Config config;
  policy::Secret secret;
  secret.name = "api";
  secret.source = source;
  secret.source_value = where;
  secret.placeholder = "sk-sluice-api-0001";
  config.secrets.push_back(secret);
  return config;
}

TEST(SecretValues, FromTheEnvironment) {
  ::setenv("SLUICE_UNIT_SECRET", "s3cr3t-value", 1);
  auto loaded = SecretValues::load(configWith(policy::Secret::Source::Env, "SLUICE_UNIT_SECRET"));
  ASSERT_TRUE(loaded) << loaded.error();
  EXPECT_EQ(loaded.value().value("api"), "s3cr3t-value");
  EXPECT_EQ(loaded.value().value("other"), "");
  ::unsetenv("SLUICE_UNIT_SECRET");
}

TEST(SecretValues, FromAFileWithoutItsFinalLineBreak) {
  test_support::TempDir tmp;
  for (const char* ending : {"\n", "\r\n", ""}) {
    std::string path = tmp.write("secret", std::string("tok-123") + ending);
    auto loaded = SecretValues::load(configWith(policy::Secret::Source::File, path));
    ASSERT_TRUE(loaded) << loaded.error();
    EXPECT_EQ(loaded.value().value("api"), "tok-123");
  }
}

struct Bad {
  const char* name;
  policy::Secret::Source source;
  const char* content;  // file content, or env value; nullptr: absent
  const char* says;
};

TEST(SecretValues, EveryUnusableSecretIsAnErrorNamingIt) {
  const Bad cases[] = {
      {"unset variable", policy::Secret::Source::Env, nullptr, "is not set"},
      {"empty variable", policy::Secret::Source::Env, "", "is empty"},
      {"missing file", policy::Secret::Source::File, nullptr, "No such file"},
      {"empty file", policy::Secret::Source::File, "\n", "is empty"},
      {"a line break inside", policy::Secret::Source::File, "abc\ndef-secret\n", "line break"},
      {"a control character", policy::Secret::Source::Env, "abc\x01" "def", "control"},
      {"leading space", policy::Secret::Source::Env, " abcdef", "white space"},
      {"holds its placeholder", policy::Secret::Source::Env, "x-sk-sluice-api-0001",
       "own placeholder"},
  };
  test_support::TempDir tmp;
  for (const Bad& c : cases) {
    std::string where;
    if (c.source == policy::Secret::Source::Env) {
      where = "SLUICE_UNIT_SECRET_BAD";
      if (c.content != nullptr) {
        ::setenv(where.c_str(), c.content, 1);
      } else {
        ::unsetenv(where.c_str());
      }
    } else {
      where = tmp.file("secret");
      std::filesystem::remove(where);
      if (c.content != nullptr) {
        tmp.write("secret", c.content);
      }
    }
    auto loaded = SecretValues::load(configWith(c.source, where));
    ASSERT_FALSE(loaded) << c.name;
    EXPECT_THAT(loaded.error(), HasSubstr("secret 'api'")) << c.name;
    EXPECT_THAT(loaded.error(), HasSubstr(c.says)) << c.name;
    if (c.content != nullptr && c.content[0] != '\0' && c.content[0] != '\n') {
      EXPECT_THAT(loaded.error(), Not(HasSubstr(c.content))) << c.name;
    }
    ::unsetenv("SLUICE_UNIT_SECRET_BAD");
    std::filesystem::remove(where);
  }
}

}  // namespace
}  // namespace sluice::proxy
