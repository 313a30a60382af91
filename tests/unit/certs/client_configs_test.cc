// wgetrc and apt.conf beside ca.pem (docs/cli.md#clients-the-variables-do-not-reach): what they
// say, which paths they cannot carry, and that they are written only when missing or stale.
#include "certs/client_configs.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace sluice::certs {
namespace {

using test_support::TempDir;

std::string contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

TEST(ClientConfigs, EachNamesTheCaInItsClientsSyntax) {
  EXPECT_EQ(wgetrcFor("/var/lib/sluice/a/ca.pem").value(),
            "# written by sluice: wget trusts the sandbox's CA (WGETRC, from `sluice env`)\n"
            "ca_certificate = /var/lib/sluice/a/ca.pem\n");
  EXPECT_EQ(aptConfFor("/var/lib/sluice/a/ca.pem").value(),
            "// written by sluice: apt's https method trusts the sandbox's CA (APT_CONFIG, from "
            "`sluice env`)\nAcquire::https::CaInfo \"/var/lib/sluice/a/ca.pem\";\n");
}

TEST(ClientConfigs, APathTheyCannotCarryIsRefused) {
  for (const char* path : {"/a\"b/ca.pem", "/a\\b/ca.pem", "/a\nb/ca.pem", "/a\tb/ca.pem"}) {
    EXPECT_FALSE(wgetrcFor(path)) << path;
    EXPECT_FALSE(aptConfFor(path)) << path;
  }
  EXPECT_TRUE(aptConfFor("/with space/and'quote/ca.pem"));
}

TEST(ClientConfigs, WrittenWhenMissingOrStaleOnly) {
  TempDir tmp;
  const std::string ca = tmp.file("ca.pem");
  auto first = writeClientConfigs(tmp.path(), ca);
  ASSERT_TRUE(first) << first.error();
  EXPECT_TRUE(first.value());
  EXPECT_EQ(contents(tmp.file("wgetrc")), wgetrcFor(ca).value());
  EXPECT_EQ(contents(tmp.file("apt.conf")), aptConfFor(ca).value());
  struct stat st {};
  ASSERT_EQ(::stat(tmp.file("apt.conf").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);

  EXPECT_FALSE(writeClientConfigs(tmp.path(), ca).value()) << "current: not written again";
  auto moved = writeClientConfigs(tmp.path(), tmp.file("elsewhere/ca.pem"));
  ASSERT_TRUE(moved);
  EXPECT_TRUE(moved.value());
  EXPECT_EQ(contents(tmp.file("wgetrc")), wgetrcFor(tmp.file("elsewhere/ca.pem")).value());

  EXPECT_FALSE(writeClientConfigs("/nonexistent/sluice-ca", ca));
}

}  // namespace
}  // namespace sluice::certs
