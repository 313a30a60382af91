// The built-in default (docs/configuration.md#the-built-in-default) is
// examples/package-mirrors.yaml compiled in.
#include "proxy/config/builtin_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "proxy/config/config_files.h"

namespace sluice::proxy {
namespace {

TEST(BuiltinConfig, IsTheExampleFileVerbatim) {
  std::ifstream in(std::string(SLUICE_SOURCE_DIR) + "/examples/package-mirrors.yaml");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(builtinConfigText(), text.str());
}

TEST(BuiltinConfig, ServesOneReadOnlyMirrorSandbox) {
  auto config = loadBuiltinConfig();
  ASSERT_TRUE(config) << config.error().front().toString();
  const auto& c = *config.value();
  ASSERT_EQ(c.sandboxes.size(), 1u);
  const policy::Sandbox& s = c.sandboxes.front();
  EXPECT_EQ(s.name, "default");
  ASSERT_TRUE(s.listen);
  EXPECT_EQ(s.listen->toString(), "127.0.0.1:3128");
  EXPECT_EQ(s.mode, policy::SandboxMode::Enforce);
  EXPECT_TRUE(s.ca_dir.ends_with("/sluice/default")) << s.ca_dir;
  EXPECT_EQ(c.audit.path, "-");
  EXPECT_TRUE(c.dns.servers.empty()) << "DNS comes from /etc/resolv.conf";
  for (const policy::Rule& rule : s.policy->rules) {
    EXPECT_EQ(rule.methods, (std::vector<std::string>{"GET", "HEAD"})) << rule.name;
  }
  std::vector<std::string> names;
  for (const policy::Rule& rule : s.policy->rules) {
    names.push_back(rule.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"pypi", "npm", "crates", "go-modules", "debian",
                                             "ubuntu"}));
}

TEST(DefaultCaBase, FollowsXdgStateHome) {
  ::setenv("XDG_STATE_HOME", "/var/lib/x", 1);
  EXPECT_EQ(defaultCaBase(), "/var/lib/x/sluice");
  ::setenv("XDG_STATE_HOME", "relative", 1);  // the spec says absolute; ignore otherwise
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(defaultCaBase(), "/home/u/.local/state/sluice");
  ::unsetenv("XDG_STATE_HOME");
  EXPECT_EQ(defaultCaBase(), "/home/u/.local/state/sluice");
}

}  // namespace
}  // namespace sluice::proxy
