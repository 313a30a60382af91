// The advisories a configuration lists, read from directories and OSV's zips
// (docs/packages.md#advisories): whole or not at all, each path once, counted per policy.

#include "proxy/runtime/package_advisories.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "policy/config_loader.h"
#include "tests/support/temp_dir.h"

namespace sluice::proxy {
namespace {

using test_support::TempDir;

std::string advisory(std::string_view id, std::string_view ecosystem, std::string_view name,
                     std::string_view version) {
  return R"({"id":")" + std::string(id) + R"(","affected":[{"package":{"ecosystem":")" +
         std::string(ecosystem) + R"(","name":")" + std::string(name) +
         R"("},"versions":[")" + std::string(version) + R"("]}]})";
}

void put16(std::string& out, std::uint32_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>((v >> 8) & 0xff));
}
void put32(std::string& out, std::uint32_t v) {
  put16(out, v & 0xffff);
  put16(out, v >> 16);
}

// A zip of stored members, as small as APPNOTE allows: what OSV's all.zip is, less deflate.
std::string storedZip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out;
  std::string central;
  for (const auto& [name, data] : members) {
    const auto crc = static_cast<std::uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    const auto offset = static_cast<std::uint32_t>(out.size());
    const auto size = static_cast<std::uint32_t>(data.size());
    const auto name_size = static_cast<std::uint32_t>(name.size());
    put32(out, 0x04034b50);
    put16(out, 20); put16(out, 0); put16(out, 0); put16(out, 0); put16(out, 0);
    put32(out, crc); put32(out, size); put32(out, size);
    put16(out, name_size); put16(out, 0);
    out += name + data;
    put32(central, 0x02014b50);
    put16(central, 20); put16(central, 20); put16(central, 0); put16(central, 0);
    put16(central, 0); put16(central, 0);
    put32(central, crc); put32(central, size); put32(central, size);
    put16(central, name_size); put16(central, 0); put16(central, 0); put16(central, 0);
    put16(central, 0); put32(central, 0); put32(central, offset);
    central += name;
  }
  const auto central_offset = static_cast<std::uint32_t>(out.size());
  out += central;
  put32(out, 0x06054b50);
  put16(out, 0); put16(out, 0);
  put16(out, static_cast<std::uint32_t>(members.size()));
  put16(out, static_cast<std::uint32_t>(members.size()));
  put32(out, static_cast<std::uint32_t>(central.size())); put32(out, central_offset);
  put16(out, 0);
  return out;
}

TEST(ReadAdvisories, ADirectoryIsReadBelowItSkippingHiddenDirectoriesAndOtherFiles) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("osv/malicious/npm/evil"));
  std::filesystem::create_directories(dir.file("osv/.git/objects"));
  dir.write("osv/malicious/npm/evil/MAL-1.json", advisory("MAL-1", "npm", "evil", "1.0.0"));
  dir.write("osv/README.md", "not an advisory");
  dir.write("osv/.git/objects/x.json", "not even JSON");
  std::vector<packages::AdvisoryEntry> entries;
  ASSERT_TRUE(readAdvisories(dir.file("osv"), entries));
  ASSERT_EQ(entries.size(), 1U);
  EXPECT_EQ(entries[0].id, "MAL-1");
  EXPECT_TRUE(entries[0].malicious);
}

TEST(ReadAdvisories, OneBadDocumentFailsThePathAndSaysWhich) {
  TempDir dir;
  dir.write("MAL-1.json", advisory("MAL-1", "npm", "evil", "1.0.0"));
  dir.write("broken.json", R"({"id": 7})");
  std::vector<packages::AdvisoryEntry> entries;
  auto read = readAdvisories(dir.path(), entries);
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().find("broken.json: not an OSV advisory"), std::string::npos)
      << read.error();
}

TEST(ReadAdvisories, AZipIsReadWhole) {
  TempDir dir;
  const std::string zip = dir.write(
      "npm.zip", storedZip({{"MAL-1.json", advisory("MAL-1", "npm", "evil", "1.0.0")},
                            {"GHSA-x.json", advisory("GHSA-x", "PyPI", "Requests", "2.0")},
                            {"notes.txt", "skipped"}}));
  std::vector<packages::AdvisoryEntry> entries;
  ASSERT_TRUE(readAdvisories(zip, entries));
  ASSERT_EQ(entries.size(), 2U);
  EXPECT_EQ(entries[1].name, "requests");
  // A member that is no advisory fails the zip.
  const std::string bad =
      dir.write("bad.zip", storedZip({{"MAL-1.json", advisory("MAL-1", "npm", "evil", "1.0.0")},
                                      {"x.json", "[1,2"}}));
  auto read = readAdvisories(bad, entries);
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().find("member x.json"), std::string::npos) << read.error();
  // Cut short: refused whole.
  const std::string cut = dir.write("cut.zip", zip.substr(0, 40));
  EXPECT_FALSE(readAdvisories(dir.file("cut.zip"), entries));
}

TEST(ReadAdvisories, WhatIsNeitherADirectoryNorAZipIsRefused) {
  TempDir dir;
  std::vector<packages::AdvisoryEntry> entries;
  EXPECT_FALSE(readAdvisories(dir.file("nowhere"), entries));
  dir.write("MAL-1.json", advisory("MAL-1", "npm", "evil", "1.0.0"));
  auto read = readAdvisories(dir.file("MAL-1.json"), entries);
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().find("neither a directory"), std::string::npos);
}

TEST(PolicyAdvisories, EachPolicyGetsItsPathsInOneIndex) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("a"));
  std::filesystem::create_directories(dir.file("b"));
  dir.write("a/MAL-1.json", advisory("MAL-1", "npm", "evil", "1.0.0"));
  dir.write("b/MAL-2.json", advisory("MAL-2", "npm", "worse", "2.0.0"));
  const std::string yaml = "version: 1\nsandboxes:\n  - {name: s, listen: 127.0.0.1:3128, policy: "
                           "p}\npolicies:\n  p:\n    packages:\n      advisories: [" +
                           dir.file("a") + ", " + dir.file("b") +
                           "]\n    rules:\n      - {hosts: [registry.npmjs.org], registry: "
                           "npm}\n  q:\n    packages:\n      advisories: [" +
                           dir.file("a") +
                           "]\n    rules:\n      - {hosts: [registry.npmjs.org], registry: "
                           "npm}\n  r:\n    rules: []\n";
  policy::LoadOptions options;
  options.default_ca_base = "/var/lib/sluice";
  auto config = policy::loadConfig(policy::ConfigText{"t.yaml", yaml}, options);
  ASSERT_TRUE(config.ok());
  auto loaded = PolicyAdvisories::load(*config.value());
  ASSERT_TRUE(loaded) << loaded.error();
  const packages::AdvisoryIndex* p = loaded.value()->find(*config.value()->findPolicy("p"));
  const packages::AdvisoryIndex* q = loaded.value()->find(*config.value()->findPolicy("q"));
  ASSERT_NE(p, nullptr);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(loaded.value()->find(*config.value()->findPolicy("r")), nullptr);
  EXPECT_EQ(p->size(), 2U);
  EXPECT_EQ(q->size(), 1U);
  EXPECT_FALSE(p->lookup(policy::Ecosystem::Npm, "worse", "2.0.0").empty());
  EXPECT_TRUE(q->lookup(policy::Ecosystem::Npm, "worse", "2.0.0").empty());
  ASSERT_EQ(loaded.value()->summary().size(), 2U);
  EXPECT_NE(loaded.value()->summary()[0].find("policy 'p': 2 advisories"), std::string::npos);
}

}  // namespace
}  // namespace sluice::proxy
