// A rule's `websocket` key (docs/config.md#rules, docs/wire.md#websocket): a plain boolean,
// false when absent; anything else is an error at its file:line:col.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "policy/config_loader.h"

namespace sluice::policy {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::string withRule(const std::string& rule_keys) {
  return R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
    rules:
      - hosts: [stream.example.com]
)" + rule_keys;
}

// The errors of loading `yaml` as test.yaml, as `sluice check` prints them; `loaded` gets the
// configuration when there are none.
std::vector<std::string> errorsOf(const std::string& yaml,
                                  std::shared_ptr<const Config>* loaded = nullptr) {
  LoadOptions options;
  options.default_ca_base = "/var/lib/sluice";
  ConfigResult result = loadConfig(ConfigText{"test.yaml", yaml}, options);
  std::vector<std::string> lines;
  if (!result.ok()) {
    for (const ConfigError& e : result.error()) {
      lines.push_back(e.toString());
    }
  } else if (loaded != nullptr) {
    *loaded = std::move(result).value();
  }
  return lines;
}

TEST(RuleWebSocket, AbsentIsFalse) {
  std::shared_ptr<const Config> config;
  ASSERT_THAT(errorsOf(withRule(""), &config), IsEmpty());
  EXPECT_FALSE(config->findSandbox("a")->policy->rules[0].websocket);
}

TEST(RuleWebSocket, TrueAndFalse) {
  std::shared_ptr<const Config> config;
  ASSERT_THAT(errorsOf(withRule("        websocket: true\n"), &config), IsEmpty());
  EXPECT_TRUE(config->findSandbox("a")->policy->rules[0].websocket);
  ASSERT_THAT(errorsOf(withRule("        websocket: false\n"), &config), IsEmpty());
  EXPECT_FALSE(config->findSandbox("a")->policy->rules[0].websocket);
}

TEST(RuleWebSocket, NotABooleanSaysWhere) {
  EXPECT_THAT(errorsOf(withRule("        websocket: yes\n")),
              ElementsAre("test.yaml:10:20: policies.p.rules[0].websocket: yes/no/on/off are not "
                          "booleans here; write true or false"));
  EXPECT_THAT(errorsOf(withRule("        websocket: [true]\n")),
              ElementsAre(testing::StartsWith("test.yaml:10:20: policies.p.rules[0].websocket: ")));
  EXPECT_THAT(errorsOf(withRule("        web_socket: true\n")),
              ElementsAre(testing::HasSubstr("web_socket")));
}

}  // namespace
}  // namespace sluice::policy
