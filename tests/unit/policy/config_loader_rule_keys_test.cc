// A rule's `websocket` key (docs/configuration.md#policies-and-rules, docs/wire.md#websocket):
// a plain boolean, false when absent; anything else is an error at its file:line:col.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "policy/config_loader.h"
#include "tests/unit/policy/config_errors.h"

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

std::vector<std::string> errorsOf(const std::string& yaml,
                                  std::shared_ptr<const Config>* loaded = nullptr) {
  return test::errorsOf(yaml, test::defaultLoadOptions(), "test.yaml", loaded);
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
