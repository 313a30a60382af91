// A rule's `registry` and a policy's `packages` (docs/packages.md#settings), loaded and refused
// at file:line:col; and the package decision (docs/packages.md#the-decision).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policy/config_loader.h"
#include "policy/package_verdict.h"
#include "tests/unit/policy/config_errors.h"

namespace sluice::policy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string withPolicy(const std::string& packages, const std::string& registry) {
  return R"(version: 1
sandboxes:
  - name: a
    listen: 127.0.0.1:3128
    policy: p
policies:
  p:
)" + packages +
         R"(    rules:
      - hosts: [registry.npmjs.org]
)" + registry;
}

std::vector<std::string> errorsOf(const std::string& yaml,
                                  std::shared_ptr<const Config>* loaded = nullptr) {
  return test::errorsOf(yaml, test::defaultLoadOptions(), "/etc/sluice/test.yaml", loaded);
}

const Policy& policyOf(const std::shared_ptr<const Config>& config) {
  return *config->findSandbox("a")->policy;
}

TEST(RegistryKey, WordOrMap) {
  std::shared_ptr<const Config> config;
  ASSERT_THAT(errorsOf(withPolicy("", "        registry: npm\n"), &config), IsEmpty());
  ASSERT_TRUE(policyOf(config).rules[0].registry);
  EXPECT_EQ(policyOf(config).rules[0].registry->ecosystem, Ecosystem::Npm);
  EXPECT_EQ(policyOf(config).rules[0].registry->path, "/");
  ASSERT_THAT(
      errorsOf(withPolicy("", "        registry: {ecosystem: pypi, path: /api/pypi/}\n"), &config),
      IsEmpty());
  EXPECT_EQ(policyOf(config).rules[0].registry->ecosystem, Ecosystem::Pypi);
  EXPECT_EQ(policyOf(config).rules[0].registry->path, "/api/pypi/");
  ASSERT_THAT(errorsOf(withPolicy("", ""), &config), IsEmpty());
  EXPECT_FALSE(policyOf(config).rules[0].registry);
  EXPECT_FALSE(policyOf(config).packages);
}

TEST(RegistryKey, RefusedSaysWhere) {
  EXPECT_THAT(errorsOf(withPolicy("", "        registry: cargo\n")),
              ElementsAre(HasSubstr("test.yaml:10:19: policies.p.rules[0].registry: 'cargo' is "
                                    "not a registry: write npm or pypi")));
  EXPECT_THAT(errorsOf(withPolicy("", "        registry: {ecosystem: npm, path: /npm}\n")),
              ElementsAre(HasSubstr("policies.p.rules[0].registry.path: '/npm': a registry path "
                                    "starts and ends with '/'")));
  EXPECT_THAT(errorsOf(withPolicy("", "        registry: {ecosystem: npm, path: /a/../b/}\n")),
              ElementsAre(HasSubstr("registry.path")));
  EXPECT_THAT(errorsOf(withPolicy("", "        registry: {ecosystem: npm, path: /a%2fb/}\n")),
              ElementsAre(HasSubstr("registry.path")));
  EXPECT_THAT(errorsOf(withPolicy("", "        registry: {path: /npm/}\n")),
              ElementsAre(HasSubstr("ecosystem")));
  EXPECT_THAT(errorsOf(withPolicy("", "        registry: {ecosystem: npm, base: /x/}\n")),
              ElementsAre(HasSubstr("base")));
}

TEST(PackagesKey, Loaded) {
  std::shared_ptr<const Config> config;
  ASSERT_THAT(errorsOf(withPolicy(R"(    packages:
      deny: [event-stream, "@evil/*"]
      allow: [lodash, "@myorg/*"]
      advisories: [osv/npm.zip, /var/lib/sluice/osv/PyPI/]
      block: all
)",
                                  "        registry: npm\n"),
                       &config),
              IsEmpty());
  const PackageSettings& settings = *policyOf(config).packages;
  ASSERT_EQ(settings.deny.size(), 2U);
  EXPECT_EQ(settings.deny[1].text(), "@evil/*");
  ASSERT_EQ(settings.allow.size(), 2U);
  EXPECT_THAT(settings.advisories,
              ElementsAre("/etc/sluice/osv/npm.zip", "/var/lib/sluice/osv/PyPI/"));
  EXPECT_EQ(settings.block, AdvisoryBlock::All);
}

TEST(PackagesKey, RefusedSaysWhere) {
  const std::string npm = "        registry: npm\n";
  EXPECT_THAT(errorsOf(withPolicy("    packages:\n      deny: []\n", npm)),
              ElementsAre(HasSubstr("test.yaml:9:13: policies.p.packages.deny: an empty list is "
                                    "no list; remove the key")));
  EXPECT_THAT(errorsOf(withPolicy("    packages:\n      deny: [a, a]\n", npm)),
              ElementsAre(HasSubstr("policies.p.packages.deny[1]: duplicate package pattern 'a'")));
  EXPECT_THAT(errorsOf(withPolicy("    packages:\n      allow: [\"sp ace\"]\n", npm)),
              ElementsAre(HasSubstr("can name no npm or PyPI package")));
  EXPECT_THAT(errorsOf(withPolicy("    packages:\n      block: all\n", npm)),
              ElementsAre(HasSubstr("block chooses among advisories; list some")));
  EXPECT_THAT(
      errorsOf(withPolicy("    packages:\n      advisories: [a]\n      block: some\n", npm)),
      ElementsAre(HasSubstr("'some' is not an advisory choice: write malicious or all")));
  EXPECT_THAT(errorsOf(withPolicy("    packages:\n      advisories: [a, a]\n", npm)),
              ElementsAre(HasSubstr("are listed twice")));
  EXPECT_THAT(errorsOf(withPolicy("    packages:\n      min_agee: 7d\n", npm)),
              ElementsAre(HasSubstr("min_agee")));
  // Settings no rule would apply are an error, not a comfort.
  EXPECT_THAT(errorsOf(withPolicy("    packages:\n      deny: [x]\n", "")),
              ElementsAre(HasSubstr("test.yaml:8:5: policies.p.packages: packages apply to the "
                                    "requests of rules with a registry")));
}

TEST(PackagesKey, AgeRuleLoaded) {
  std::shared_ptr<const Config> config;
  ASSERT_THAT(errorsOf(withPolicy(R"(    packages:
      min_age: 7d
      exempt: ["@myorg/*", My_Pkg]
)",
                                  "        registry: npm\n"),
                       &config),
              IsEmpty());
  const PackageSettings& settings = *policyOf(config).packages;
  EXPECT_EQ(settings.min_age, std::chrono::milliseconds(7LL * 24 * 60 * 60 * 1000));
  ASSERT_EQ(settings.exempt.size(), 2U);
  EXPECT_EQ(settings.exempt[0].text(), "@myorg/*");
  EXPECT_EQ(settings.exempt[1].text(), "My_Pkg");
  EXPECT_TRUE(settings.deny.empty());
  // No min_age: no age rule.
  ASSERT_THAT(
      errorsOf(withPolicy("    packages:\n      deny: [x]\n", "        registry: npm\n"), &config),
      IsEmpty());
  EXPECT_EQ(policyOf(config).packages->min_age.count(), 0);
  EXPECT_TRUE(policyOf(config).packages->exempt.empty());
}

// Accepted bounds, and each refusal as `sluice check` prints it: file:line:col of the value
// (of the key, for a key that needs another), the key path, the message.
TEST(PackagesKey, AgeRuleAndMaxMetadataBounds) {
  const std::string npm = "        registry: npm\n";
  const std::string at = "/etc/sluice/test.yaml:";
  const struct {
    std::string packages;  // the lines under `packages:`
    std::string error;     // empty: loads
  } cases[] = {
      {"      min_age: 1ms\n", ""},
      {"      min_age: 12h\n", ""},
      {"      min_age: 3650d\n", ""},
      {"      min_age: 0d\n",
       at + "9:16: policies.p.packages.min_age: must be greater than 0 and at most 3650d"},
      {"      min_age: 0ms\n",
       at + "9:16: policies.p.packages.min_age: must be greater than 0 and at most 3650d"},
      {"      min_age: 3651d\n",
       at + "9:16: policies.p.packages.min_age: must be greater than 0 and at most 3650d"},
      {"      min_age: 87601h\n",
       at + "9:16: policies.p.packages.min_age: must be greater than 0 and at most 3650d"},
      {"      min_age: [1]\n",
       at + "9:16: policies.p.packages.min_age: an age is a scalar, e.g. 7d"},
      {"      min_age: {d: 7}\n",
       at + "9:16: policies.p.packages.min_age: an age is a scalar, e.g. 7d"},
      {"      min_age: 7days\n",
       at + "9:16: policies.p.packages.min_age: '7days' is not an age: write a whole number and "
            "ms, s, m, h or d, e.g. 12h or 7d"},
      {"      min_age: 7\n",
       at + "9:16: policies.p.packages.min_age: '7' is not an age: write a whole number and ms, "
            "s, m, h or d, e.g. 12h or 7d"},
      // At the key, under the map's path (as `block` without `advisories`).
      {"      exempt: [x]\n", at + "9:7: policies.p.packages: exempt is from min_age; set one"},
      // The min_age that is refused is its error; exempt's follows from it.
      {"      min_age: 0d\n      exempt: [x]\n",
       at + "9:16: policies.p.packages.min_age: must be greater than 0 and at most 3650d"},
      {"      min_age: 7d\n      exempt: []\n",
       at + "10:15: policies.p.packages.exempt: an empty list is no list; remove the key"},
      {"      min_age: 7d\n      exempt: [a, b, a]\n",
       at + "10:22: policies.p.packages.exempt[2]: duplicate package pattern 'a'"},
      {"      min_age: 7d\n      exempt: [\"sp ace\"]\n",
       at + "10:16: policies.p.packages.exempt[0]: 'sp ace' can name no npm or PyPI package: "
            "write a name, '@scope/*' or a glob with '*'"},
      {"      max_metadata: 1MiB\n", ""},
      {"      max_metadata: 1GiB\n", ""},
      {"      max_metadata: 1048576\n", ""},
      {"      max_metadata: 512KiB\n",
       at + "9:21: policies.p.packages.max_metadata: must be between 1MiB and 1GiB"},
      {"      max_metadata: 1048575\n",
       at + "9:21: policies.p.packages.max_metadata: must be between 1MiB and 1GiB"},
      {"      max_metadata: 2GiB\n",
       at + "9:21: policies.p.packages.max_metadata: must be between 1MiB and 1GiB"},
      {"      max_metadata: 1073741825\n",
       at + "9:21: policies.p.packages.max_metadata: must be between 1MiB and 1GiB"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.packages);
    std::shared_ptr<const Config> config;
    const std::vector<std::string> errors =
        errorsOf(withPolicy("    packages:\n" + c.packages, npm), &config);
    if (c.error.empty()) {
      EXPECT_THAT(errors, IsEmpty());
    } else {
      EXPECT_THAT(errors, ElementsAre(c.error));
    }
  }
  std::shared_ptr<const Config> config;
  ASSERT_THAT(errorsOf(withPolicy("    packages:\n      max_metadata: 1GiB\n", npm), &config),
              IsEmpty());
  EXPECT_EQ(policyOf(config).packages->max_metadata, 1ULL << 30);
  ASSERT_THAT(errorsOf(withPolicy("    packages:\n      min_age: 3650d\n", npm), &config),
              IsEmpty());
  EXPECT_EQ(policyOf(config).packages->min_age, PackageSettings::kMaxMinAge);
}

PackageSettings settingsOf(std::vector<std::string> deny, std::vector<std::string> allow,
                           AdvisoryBlock block = AdvisoryBlock::Malicious) {
  PackageSettings settings;
  for (const std::string& text : deny) {
    settings.deny.push_back(PackagePattern::parse(text).value());
  }
  for (const std::string& text : allow) {
    settings.allow.push_back(PackagePattern::parse(text).value());
  }
  settings.block = block;
  return settings;
}

TEST(PackageVerdict, Names) {
  const PackageSettings lists = settingsOf({"event-stream", "@evil/*"}, {});
  EXPECT_EQ(judgePackageName(lists, Ecosystem::Npm, "event-stream").reason, Reason::PackageDenied);
  EXPECT_EQ(judgePackageName(lists, Ecosystem::Npm, "@evil/x").reason, Reason::PackageDenied);
  ASSERT_NE(judgePackageName(lists, Ecosystem::Npm, "@evil/x").denied_by, nullptr);
  EXPECT_EQ(judgePackageName(lists, Ecosystem::Npm, "@evil/x").denied_by->text(), "@evil/*");
  EXPECT_FALSE(judgePackageName(lists, Ecosystem::Npm, "lodash").refuses());
  // A non-empty allow list serves only what it names; deny wins over allow.
  const PackageSettings only = settingsOf({"@myorg/bad"}, {"@myorg/*", "lodash"});
  EXPECT_FALSE(judgePackageName(only, Ecosystem::Npm, "@myorg/util").refuses());
  EXPECT_FALSE(judgePackageName(only, Ecosystem::Npm, "lodash").refuses());
  EXPECT_EQ(judgePackageName(only, Ecosystem::Npm, "@myorg/bad").reason, Reason::PackageDenied);
  EXPECT_EQ(judgePackageName(only, Ecosystem::Npm, "left-pad").reason, Reason::PackageDenied);
  EXPECT_EQ(judgePackageName(only, Ecosystem::Npm, "left-pad").denied_by, nullptr);
  EXPECT_EQ(judgePackageName(only, Ecosystem::Pypi, "lodash").reason, Reason::None);
  EXPECT_EQ(judgePackageName(only, Ecosystem::Pypi, "requests").reason, Reason::PackageDenied);
}

TEST(PackageVerdict, Advisories) {
  const AdvisoryHit ghsa{"GHSA-aaaa-bbbb-cccc", false};
  const AdvisoryHit mal{"MAL-2025-7", true};
  const PackageSettings malicious = settingsOf({}, {});
  const PackageSettings all = settingsOf({}, {}, AdvisoryBlock::All);
  const AdvisoryHit only_ghsa[] = {ghsa};
  const AdvisoryHit both[] = {ghsa, mal};
  EXPECT_FALSE(judgePackageVersion(malicious, Ecosystem::Npm, "x", only_ghsa).refuses());
  PackageRefusal refusal = judgePackageVersion(malicious, Ecosystem::Npm, "x", both);
  EXPECT_EQ(refusal.reason, Reason::PackageMalicious);
  EXPECT_EQ(refusal.advisory, "MAL-2025-7");
  refusal = judgePackageVersion(all, Ecosystem::Npm, "x", both);
  EXPECT_EQ(refusal.reason, Reason::PackageMalicious);
  EXPECT_EQ(refusal.advisory, "GHSA-aaaa-bbbb-cccc");
  EXPECT_FALSE(judgePackageVersion(all, Ecosystem::Npm, "x", {}).refuses());
  // The name is judged first.
  const PackageSettings denied = settingsOf({"x"}, {});
  EXPECT_EQ(judgePackageVersion(denied, Ecosystem::Npm, "x", both).reason, Reason::PackageDenied);
}

constexpr std::chrono::milliseconds kWeek{7LL * 24 * 60 * 60 * 1000};

PackageSettings ageSettings(std::chrono::milliseconds min_age, std::vector<std::string> exempt) {
  PackageSettings settings;
  settings.min_age = min_age;
  for (const std::string& text : exempt) {
    settings.exempt.push_back(PackagePattern::parse(text).value());
  }
  return settings;
}

// The age rule applies to every name `exempt` does not list (docs/packages.md#the-age-rule),
// matched as PackagePattern matches: on the normal form of each ecosystem.
TEST(PackageVerdict, AgeRuleApplies) {
  const struct {
    const char* what;
    std::chrono::milliseconds min_age;
    std::vector<std::string> exempt;
    Ecosystem ecosystem;
    std::string_view name;  // in its normal form
    bool applies;
  } cases[] = {
      {"no min_age", std::chrono::milliseconds(0), {}, Ecosystem::Npm, "lodash", false},
      {"no min_age, PyPI", std::chrono::milliseconds(0), {}, Ecosystem::Pypi, "requests", false},
      {"min_age, no exempt", kWeek, {}, Ecosystem::Npm, "lodash", true},
      {"min_age, no exempt, PyPI", kWeek, {}, Ecosystem::Pypi, "requests", true},
      {"1 ms is an age", std::chrono::milliseconds(1), {}, Ecosystem::Npm, "lodash", true},
      {"exact name", kWeek, {"lodash"}, Ecosystem::Npm, "lodash", false},
      {"exact name, another package", kWeek, {"lodash"}, Ecosystem::Npm, "lodash-es", true},
      {"exact name in capitals", kWeek, {"LoDash"}, Ecosystem::Npm, "lodash", false},
      {"scope", kWeek, {"@myorg/*"}, Ecosystem::Npm, "@myorg/util", false},
      {"scope, another scope", kWeek, {"@myorg/*"}, Ecosystem::Npm, "@other/util", true},
      {"scope, the bare name", kWeek, {"@myorg/*"}, Ecosystem::Npm, "myorg", true},
      {"scope names no PyPI package", kWeek, {"@myorg/*"}, Ecosystem::Pypi, "myorg", true},
      {"glob", kWeek, {"types-*"}, Ecosystem::Npm, "types-node", false},
      {"glob, PyPI", kWeek, {"types-*"}, Ecosystem::Pypi, "types-requests", false},
      {"glob, no match", kWeek, {"types-*"}, Ecosystem::Npm, "node-types", true},
      {"glob across '/'", kWeek, {"@types*"}, Ecosystem::Npm, "@types/node", false},
      {"second entry", kWeek, {"a", "b"}, Ecosystem::Npm, "b", false},
      // PyPI names compare in PEP 503's form, so `My_Pkg` is my-pkg's entry however spelled...
      {"PyPI normal form", kWeek, {"My_Pkg"}, Ecosystem::Pypi, "my-pkg", false},
      {"PyPI normal form of a dotted entry", kWeek, {"my.pkg"}, Ecosystem::Pypi, "my-pkg", false},
      {"PyPI glob folded", kWeek, {"Zope_*"}, Ecosystem::Pypi, "zope-interface", false},
      // ... while npm keeps '_' and '-' apart.
      {"npm keeps '_'", kWeek, {"My_Pkg"}, Ecosystem::Npm, "my_pkg", false},
      {"npm's my-pkg is another", kWeek, {"My_Pkg"}, Ecosystem::Npm, "my-pkg", true},
      {"deny does not exempt", kWeek, {}, Ecosystem::Npm, "event-stream", true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    PackageSettings settings = ageSettings(c.min_age, c.exempt);
    settings.deny.push_back(PackagePattern::parse("event-stream").value());
    EXPECT_EQ(ageRuleApplies(settings, c.ecosystem, c.name), c.applies);
  }
}

// Too new: published less than min_age before now, or at an unknown time, or in the future.
// A version published exactly min_age ago is old enough.
TEST(PackageVerdict, TooNew) {
  constexpr std::int64_t kNow = 1767225600000;  // 2026-01-01T00:00:00Z
  constexpr std::int64_t kHour = 60LL * 60 * 1000;
  const std::int64_t week = kWeek.count();
  const struct {
    const char* what;
    std::chrono::milliseconds min_age;
    std::optional<std::int64_t> published;
    bool too_new;
  } cases[] = {
      {"unknown", kWeek, std::nullopt, true},
      {"exactly min_age ago", kWeek, kNow - week, false},
      {"one ms later", kWeek, kNow - week + 1, true},
      {"one ms earlier", kWeek, kNow - week - 1, false},
      {"30 days ago", kWeek, kNow - 30 * 24 * kHour, false},
      {"an hour ago", kWeek, kNow - kHour, true},
      {"now", kWeek, kNow, true},
      {"in the future", kWeek, kNow + kHour, true},
      {"the epoch", kWeek, 0, false},
      {"before the epoch", kWeek, -kHour, false},
      {"1 ms rule, 1 ms ago", std::chrono::milliseconds(1), kNow - 1, false},
      {"1 ms rule, now", std::chrono::milliseconds(1), kNow, true},
      {"largest rule", PackageSettings::kMaxMinAge, kNow - PackageSettings::kMaxMinAge.count(),
       false},
      {"largest rule, 1 ms later", PackageSettings::kMaxMinAge,
       kNow - PackageSettings::kMaxMinAge.count() + 1, true},
      {"no min_age, unknown", std::chrono::milliseconds(0), std::nullopt, false},
      {"no min_age, now", std::chrono::milliseconds(0), kNow, false},
      {"no min_age, in the future", std::chrono::milliseconds(0), kNow + kHour, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(tooNew(ageSettings(c.min_age, {}), c.published, kNow), c.too_new);
  }
  // `exempt` is ageRuleApplies's: tooNew judges the time alone.
  EXPECT_TRUE(tooNew(ageSettings(kWeek, {"*"}), kNow, kNow));
}

}  // namespace
}  // namespace sluice::policy
