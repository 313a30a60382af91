#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "certs/ca.h"
#include "certs/trust_store.h"
#include "proxy/cli/cli.h"
#include "tests/support/temp_dir.h"

namespace sluice::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

using test_support::readFile;
using test_support::TempDir;
using test_support::writeFile;

struct FileClose {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string text;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) {
    text.append(buf, n);
  }
  return text;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Runs the command in-process with its streams captured.
struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

Outcome caInit(std::vector<std::string_view> args) {
  std::unique_ptr<std::FILE, FileClose> out(std::tmpfile());
  std::unique_ptr<std::FILE, FileClose> err(std::tmpfile());
  Outcome result;
  if (!out || !err) {
    ADD_FAILURE() << "tmpfile failed";
    return result;
  }
  result.code = caInitCommand(args, Streams{out.get(), err.get()});
  result.out = contents(out.get());
  result.err = contents(err.get());
  return result;
}

TEST(CaInitCommand, WritesCaAndPrintsTrustHint) {
  TempDir tmp;
  std::string dir = tmp.file("agent-1");
  Outcome result = caInit({"--dir", dir});
  ASSERT_EQ(result.code, kExitOk) << result.err;
  EXPECT_THAT(result.err, IsEmpty());
  EXPECT_THAT(result.out, StartsWith("wrote " + dir + "/ca.pem and " + dir +
                                     "/ca.key (EC P-256, key mode 0600), " + dir +
                                     "/ca.p12 (the certificate as a Java trust store, password "
                                     "changeit), and wgetrc and apt.conf naming the "
                                     "certificate\n"));
  EXPECT_THAT(result.out, HasSubstr("SSL_CERT_FILE=" + dir + "/ca.pem"));

  struct stat st {};
  ASSERT_EQ(::stat((dir + "/ca.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto ca = certs::CertificateAuthority::load(dir);
  ASSERT_TRUE(ca) << ca.error();
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(ca->certificate()), subject, sizeof subject);
  EXPECT_STREQ(subject, "/O=sluice/CN=sluice sandbox CA");

  // Java's copy of the same certificate (certs/trust_store.h).
  std::ifstream p12(dir + "/ca.p12", std::ios::binary);
  const std::string der((std::istreambuf_iterator<char>(p12)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(certs::trustStoreHolds(der, ca->certificate()));
}

TEST(CaInitCommand, AcceptsDirWithEqualsSign) {
  TempDir tmp;
  Outcome result = caInit({"--dir=" + tmp.path()});
  ASSERT_EQ(result.code, kExitOk) << result.err;
  EXPECT_TRUE(exists(tmp.file("ca.pem")));
  EXPECT_TRUE(exists(tmp.file("ca.key")));
}

TEST(CaInitCommand, PrintsAbsoluteCertPathForRelativeDir) {
  TempDir tmp;
  std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(tmp.path());
  Outcome result = caInit({"--dir", "state"});
  std::filesystem::current_path(cwd);
  ASSERT_EQ(result.code, kExitOk) << result.err;
  EXPECT_THAT(result.out, StartsWith("wrote state/ca.pem and state/ca.key"));
  EXPECT_THAT(result.out, HasSubstr("SSL_CERT_FILE=" + tmp.file("state/ca.pem") + " "));
}

TEST(CaInitCommand, NeverOverwritesExistingCa) {
  TempDir tmp;
  ASSERT_EQ(caInit({"--dir", tmp.path()}).code, kExitOk);
  std::string cert = readFile(tmp.file("ca.pem"));
  std::string key = readFile(tmp.file("ca.key"));

  Outcome result = caInit({"--dir", tmp.path()});
  EXPECT_EQ(result.code, kExitFailure);
  EXPECT_THAT(result.out, IsEmpty());
  EXPECT_EQ(result.err, tmp.file("ca.pem") + " and " + tmp.file("ca.key") +
                            " already exist: sluice ca init never overwrites\n");
  EXPECT_EQ(readFile(tmp.file("ca.pem")), cert);
  EXPECT_EQ(readFile(tmp.file("ca.key")), key);
}

TEST(CaInitCommand, NeverOverwritesExistingCert) {
  TempDir tmp;
  writeFile(tmp.file("ca.pem"), "keep me\n");
  Outcome result = caInit({"--dir", tmp.path()});
  EXPECT_EQ(result.code, kExitFailure);
  EXPECT_EQ(result.err, tmp.file("ca.pem") + " already exists: sluice ca init never overwrites\n");
  EXPECT_EQ(readFile(tmp.file("ca.pem")), "keep me\n");
  EXPECT_FALSE(exists(tmp.file("ca.key")));
}

TEST(CaInitCommand, NeverOverwritesExistingKey) {
  TempDir tmp;
  writeFile(tmp.file("ca.key"), "keep me\n");
  Outcome result = caInit({"--dir", tmp.path()});
  EXPECT_EQ(result.code, kExitFailure);
  EXPECT_EQ(result.err, tmp.file("ca.key") + " already exists: sluice ca init never overwrites\n");
  EXPECT_EQ(readFile(tmp.file("ca.key")), "keep me\n");
  EXPECT_FALSE(exists(tmp.file("ca.pem")));
}

TEST(CaInitCommand, FailsWhenDirIsAFile) {
  TempDir tmp;
  writeFile(tmp.file("plain"), "x");
  Outcome result = caInit({"--dir", tmp.file("plain")});
  EXPECT_EQ(result.code, kExitFailure);
  EXPECT_THAT(result.err, HasSubstr(tmp.file("plain") + ": exists and is not a directory"));
  EXPECT_THAT(result.out, IsEmpty());
}

TEST(CaInitCommand, MissingDirIsUsageError) {
  Outcome result = caInit({});
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_THAT(result.err, HasSubstr("--dir is required"));
  EXPECT_THAT(result.err, HasSubstr("usage: sluice ca init --dir DIR"));
  EXPECT_THAT(result.out, IsEmpty());
}

TEST(CaInitCommand, DirWithoutValueIsUsageError) {
  Outcome result = caInit({"--dir"});
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_THAT(result.err, HasSubstr("--dir needs a value"));
  EXPECT_THAT(result.err, HasSubstr("usage: sluice ca init --dir DIR"));
}

TEST(CaInitCommand, EmptyDirIsUsageError) {
  Outcome result = caInit({"--dir="});
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_THAT(result.err, HasSubstr("usage:"));
}

TEST(CaInitCommand, UnknownFlagIsUsageErrorAndWritesNothing) {
  TempDir tmp;
  Outcome result = caInit({"--dir", tmp.path(), "--force"});
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_THAT(result.err, HasSubstr("unknown flag --force"));
  EXPECT_THAT(result.err, HasSubstr("usage: sluice ca init --dir DIR"));
  EXPECT_FALSE(exists(tmp.file("ca.pem")));
  EXPECT_FALSE(exists(tmp.file("ca.key")));
}

TEST(CaInitCommand, PositionalArgumentIsUsageError) {
  TempDir tmp;
  Outcome result = caInit({tmp.path()});
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_THAT(result.err, HasSubstr("usage:"));
  EXPECT_FALSE(exists(tmp.file("ca.pem")));
}

TEST(CaInitCommand, RepeatedDirIsUsageError) {
  TempDir a;
  TempDir b;
  Outcome result = caInit({"--dir", a.path(), "--dir", b.path()});
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_THAT(result.err, HasSubstr("more than once"));
  EXPECT_FALSE(exists(a.file("ca.pem")));
  EXPECT_FALSE(exists(b.file("ca.pem")));
}

}  // namespace
}  // namespace sluice::cli
