// policy::misusedSecret: which placeholder, in which text, under which rule, is secret_misuse.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/secret_use.h"

namespace sluice::policy {
namespace {

std::vector<Secret> twoSecrets() {
  Secret a;
  a.name = "anthropic";
  a.placeholder = "sk-sluice-anthropic";
  Secret b;
  b.name = "github";
  b.placeholder = "ghp-sluice-github";
  return {a, b};
}

Rule injecting(std::vector<std::string> secrets) {
  Rule rule;
  rule.name = "r";
  for (auto& s : secrets) {
    rule.inject.push_back({"x-api-key", s});
  }
  return rule;
}

struct Case {
  const char* name;
  std::vector<std::string> rule_injects;  // {"-"}: no rule at all
  const char* text;
  const char* misused;  // nullptr: none
};

const Case kCases[] = {
    {"no placeholder", {}, "Bearer abc", nullptr},
    {"placeholder, rule injects it", {"anthropic"}, "sk-sluice-anthropic", nullptr},
    {"placeholder, rule injects another", {"github"}, "sk-sluice-anthropic", "anthropic"},
    {"placeholder, rule injects nothing", {}, "x sk-sluice-anthropic y", "anthropic"},
    {"placeholder, no rule (report mode)", {"-"}, "sk-sluice-anthropic", "anthropic"},
    {"inside a query string", {}, "/v1?key=sk-sluice-anthropic&x=1", "anthropic"},
    {"second secret misused, first injected", {"anthropic"},
     "sk-sluice-anthropic ghp-sluice-github", "github"},
    {"both injected", {"anthropic", "github"}, "sk-sluice-anthropic ghp-sluice-github",
     nullptr},
    {"a prefix of the placeholder only", {}, "sk-sluice-anthropi", nullptr},
    {"case differs: not the placeholder", {}, "SK-SLUICE-ANTHROPIC", nullptr},
    {"empty text", {}, "", nullptr},
};

TEST(MisusedSecret, Table) {
  std::vector<Secret> secrets = twoSecrets();
  for (const Case& c : kCases) {
    bool no_rule = c.rule_injects.size() == 1 && c.rule_injects[0] == "-";
    Rule rule = injecting(no_rule ? std::vector<std::string>{} : c.rule_injects);
    const Secret* got = misusedSecret(secrets, no_rule ? nullptr : &rule, c.text);
    if (c.misused == nullptr) {
      EXPECT_EQ(got, nullptr) << c.name;
    } else {
      ASSERT_NE(got, nullptr) << c.name;
      EXPECT_EQ(got->name, c.misused) << c.name;
    }
  }
}

TEST(MisusedSecret, NoSecretsNoMisuse) {
  Rule rule = injecting({});
  EXPECT_EQ(misusedSecret({}, &rule, "sk-sluice-anthropic"), nullptr);
}

}  // namespace
}  // namespace sluice::policy
