// whyOthersCannotRead(): whether a user other than sluice's can open the CA's certificate
// (docs/cli.md#sluice-env): every directory on the way searchable by others, the file readable.
#include "certs/others_can_read.h"

#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace sluice::certs {
namespace {

using test_support::TempDir;

class OthersCanReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // mkdtemp makes the directory 0700; /tmp above it is 1777.
    ASSERT_EQ(::chmod(tmp_.path().c_str(), 0755), 0);
    ASSERT_EQ(::mkdir(tmp_.file("ca").c_str(), 0755), 0);
    std::ofstream(tmp_.file("ca/ca.pem")) << "certificate";
    ASSERT_EQ(::chmod(tmp_.file("ca/ca.pem").c_str(), 0644), 0);
  }
  TempDir tmp_;
};

TEST_F(OthersCanReadTest, A0644FileUnderSearchableDirectories) {
  EXPECT_EQ(whyOthersCannotRead(tmp_.file("ca/ca.pem")), std::nullopt);
}

TEST_F(OthersCanReadTest, ADirectoryOnTheWayThatOthersCannotSearch) {
  ASSERT_EQ(::chmod(tmp_.file("ca").c_str(), 0700), 0);
  EXPECT_EQ(whyOthersCannotRead(tmp_.file("ca/ca.pem")), tmp_.file("ca") + " is mode 0700");
  ASSERT_EQ(::chmod(tmp_.file("ca").c_str(), 0750), 0);  // a group is not everyone
  EXPECT_EQ(whyOthersCannotRead(tmp_.file("ca/ca.pem")), tmp_.file("ca") + " is mode 0750");
  ASSERT_EQ(::chmod(tmp_.file("ca").c_str(), 0711), 0);  // search without listing will do
  EXPECT_EQ(whyOthersCannotRead(tmp_.file("ca/ca.pem")), std::nullopt);
}

TEST_F(OthersCanReadTest, TheFirstDirectoryThatStopsThemIsNamed) {
  ASSERT_EQ(::chmod(tmp_.path().c_str(), 0700), 0);
  ASSERT_EQ(::chmod(tmp_.file("ca").c_str(), 0700), 0);
  EXPECT_EQ(whyOthersCannotRead(tmp_.file("ca/ca.pem")), tmp_.path() + " is mode 0700");
}

TEST_F(OthersCanReadTest, AFileOthersCannotRead) {
  ASSERT_EQ(::chmod(tmp_.file("ca/ca.pem").c_str(), 0640), 0);
  EXPECT_EQ(whyOthersCannotRead(tmp_.file("ca/ca.pem")), tmp_.file("ca/ca.pem") + " is mode 0640");
}

TEST_F(OthersCanReadTest, APathThatCannotBeExaminedSaysWhy) {
  EXPECT_EQ(whyOthersCannotRead(tmp_.file("ca/none.pem")),
            tmp_.file("ca/none.pem") + ": No such file or directory");
  EXPECT_EQ(whyOthersCannotRead("ca/ca.pem"), "ca/ca.pem is not an absolute path");
}

}  // namespace
}  // namespace sluice::certs
