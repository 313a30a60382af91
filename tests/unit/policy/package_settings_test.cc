// A rule's `registry` and a policy's `packages` (docs/packages.md#settings), loaded and refused
// at file:line:col; and the package decision (docs/packages.md#the-decision).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
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
)" + packages + R"(    rules:
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
  ASSERT_THAT(errorsOf(withPolicy("", "        registry: {ecosystem: pypi, path: /api/pypi/}\n"),
                       &config),
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
  EXPECT_THAT(errorsOf(withPolicy("    packages:\n      advisories: [a]\n      block: some\n",
                                  npm)),
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

}  // namespace
}  // namespace sluice::policy
