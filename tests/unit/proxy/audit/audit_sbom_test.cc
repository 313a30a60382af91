// What `sluice audit sbom` makes of audit logs (docs/packages.md#sbom): one CycloneDX component
// per package file served (kind file, allow or report, status 200), by purl; every digest and
// sandbox of each; everything else ignored, and lines that cannot be read counted, never fatal.
#include "proxy/audit/audit_sbom.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::proxy::audit {
namespace {

const std::string kSha1(64, 'a');
const std::string kSha2(64, 'b');

std::string record(std::string_view sandbox, std::string_view package,
                   std::string_view decision = "allow", std::string_view status = "200",
                   std::string_view sha = kSha1,
                   std::string_view url = "https://registry.npmjs.org/x/-/x-1.0.0.tgz") {
  return std::string(R"({"ts":"2026-12-03T06:00:00.000Z","sandbox":")") + std::string(sandbox) +
         R"(","kind":"http","url":")" + std::string(url) + R"(","decision":")" +
         std::string(decision) + R"(","status":)" + std::string(status) + R"(,"resp_sha256":)" +
         (sha.empty() ? std::string("null") : "\"" + std::string(sha) + "\"") +
         R"(,"addrs":["192.0.2.1"],"package":)" + std::string(package) + R"(,"chain":"00"})";
}

std::string file(std::string_view ecosystem, std::string_view name, std::string_view version) {
  return std::string(R"({"ecosystem":")") + std::string(ecosystem) + R"(","kind":"file","name":")" +
         std::string(name) + R"(","version":")" + std::string(version) + R"(","advisory":null})";
}

TEST(Purl, FollowsPurlTypes) {
  struct Case {
    policy::Ecosystem ecosystem;
    std::string_view name, version, purl;
  } cases[] = {
      {policy::Ecosystem::Npm, "lodash", "4.17.21", "pkg:npm/lodash@4.17.21"},
      {policy::Ecosystem::Npm, "@babel/core", "7.0.0", "pkg:npm/%40babel/core@7.0.0"},
      {policy::Ecosystem::Npm, "x", "1.0.0-rc.1+build.5", "pkg:npm/x@1.0.0-rc.1%2Bbuild.5"},
      {policy::Ecosystem::Pypi, "zope-interface", "5.4", "pkg:pypi/zope-interface@5.4"},
      {policy::Ecosystem::Pypi, "a", "1.0+local", "pkg:pypi/a@1.0%2Blocal"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(purlOf(c.ecosystem, c.name, c.version), c.purl);
  }
}

TEST(Sbom, OneComponentPerServedFile) {
  Sbom sbom;
  const std::string lines[] = {
      record("a", file("npm", "lodash", "4.17.21")),
      record("b", file("npm", "lodash", "4.17.21")),                 // same file, 2nd sandbox
      record("a", file("npm", "@babel/core", "7.0.0"), "report"),    // report mode serves it
      record("a", file("pypi", "Zope.Interface", "5.4")),            // PEP 503: zope-interface
      record("a", file("pypi", "zope_interface", "5.4")),            // the same package
      record("a", file("npm", "denied", "1.0.0"), "deny", "403"),    // refused
      record("a", file("npm", "missing", "1.0.0"), "allow", "404"),  // not served
      record("a", file("npm", "cached", "1.0.0"), "allow", "304"),   // not a file's bytes
      record("a", R"({"ecosystem":"npm","kind":"metadata","name":"lodash","version":null})"),
      record("a", R"({"ecosystem":"npm","kind":"version_metadata","name":"lodash","version":"1"})"),
      record("a", "null"),  // a request of another rule
      R"({"ts":"2026-12-03T06:00:00.000Z","sandbox":"a","kind":"dns","name":"x.test"})",
  };
  for (const std::string& line : lines) {
    sbom.add(line);
  }
  EXPECT_EQ(sbom.skipped(), 0u);
  EXPECT_EQ(sbom.records(), std::size(lines));
  ASSERT_EQ(sbom.components().size(), 3u);
  auto it = sbom.components().begin();  // in purl order
  EXPECT_EQ(it->first, "pkg:npm/%40babel/core@7.0.0");
  EXPECT_EQ((++it)->first, "pkg:npm/lodash@4.17.21");
  EXPECT_EQ(it->second.sandboxes, (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(it->second.sha256s, (std::set<std::string>{kSha1}));
  EXPECT_EQ((++it)->first, "pkg:pypi/zope-interface@5.4");

  const std::string json = sbomJson(sbom, {"urn:uuid:x", "2026-12-03T06:00:00.000Z", "9.9.9"});
  ASSERT_TRUE(JsonObjectLine::parse(json.substr(0, json.size() - 1))) << json;
  EXPECT_TRUE(json.starts_with(
      R"({"bomFormat":"CycloneDX","specVersion":"1.5","serialNumber":"urn:uuid:x","version":1,)"
      R"("metadata":{"timestamp":"2026-12-03T06:00:00.000Z","tools":{"components":[{"type":)"
      R"("application","name":"sluice","version":"9.9.9"}]}},"components":[)"))
      << json;
  EXPECT_NE(json.find(R"({"type":"library","bom-ref":"pkg:npm/%40babel/core@7.0.0","group":)"
                      R"("@babel","name":"core","version":"7.0.0","purl":)"
                      R"("pkg:npm/%40babel/core@7.0.0","hashes":[{"alg":"SHA-256","content":")" +
                      kSha1 +
                      R"("}],"properties":[{"name":"sluice:sandbox","value":"a"},)"
                      R"({"name":"sluice:url","value":"https://registry.npmjs.org/)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("name":"lodash","version":"4.17.21")"), std::string::npos);
  EXPECT_NE(
      json.find(R"({"name":"sluice:sandbox","value":"a"},{"name":"sluice:sandbox","value":"b"})"),
      std::string::npos);
  EXPECT_EQ(json.find("sluice:hashes_differ"), std::string::npos);
  EXPECT_EQ(json.find("denied"), std::string::npos);
  EXPECT_EQ(json.find("missing"), std::string::npos);
}

TEST(Sbom, EveryDistinctDigestIsListed) {
  Sbom sbom;
  sbom.add(record("a", file("npm", "x", "1.0.0"), "allow", "200", kSha1,
                  "https://registry.npmjs.org/x/-/first.tgz"));
  sbom.add(record("a", file("npm", "x", "1.0.0"), "allow", "200", kSha2, "https://second"));
  sbom.add(record("a", file("npm", "x", "1.0.0"), "allow", "200", "", "https://third"));
  sbom.add(record("a", file("npm", "x", "1.0.0"), "allow", "200", std::string(64, 'A')));
  sbom.add(record("a", file("npm", "x", "1.0.0"), "allow", "200", "not-hex"));
  ASSERT_EQ(sbom.components().size(), 1u);
  const SbomComponent& c = sbom.components().begin()->second;
  EXPECT_EQ(c.sha256s, (std::set<std::string>{kSha1, kSha2}));  // 'A's read as 'a's
  EXPECT_EQ(c.first_url, "https://registry.npmjs.org/x/-/first.tgz");
  const std::string json = sbomJson(sbom, {"urn:uuid:x", "t", "v"});
  EXPECT_NE(json.find(R"("hashes":[{"alg":"SHA-256","content":")" + kSha1 +
                      R"("},{"alg":"SHA-256","content":")" + kSha2 + "\"}]"),
            std::string::npos);
  EXPECT_NE(json.find(R"({"name":"sluice:hashes_differ","value":"2 different SHA-256 digests)"),
            std::string::npos);
}

TEST(Sbom, NoDigestNoHashes) {
  Sbom sbom;
  sbom.add(record("a", file("pypi", "requests", "2.31.0"), "allow", "200", ""));
  const std::string json = sbomJson(sbom, {"urn:uuid:x", "t", "v"});
  EXPECT_EQ(json.find("hashes"), std::string::npos);
  EXPECT_NE(json.find(R"("purl":"pkg:pypi/requests@2.31.0")"), std::string::npos);
}

TEST(Sbom, OnlyTheSandboxAsked) {
  Sbom sbom("b");
  sbom.add(record("a", file("npm", "x", "1.0.0")));
  sbom.add(record("b", file("npm", "y", "1.0.0")));
  EXPECT_EQ(sbom.filtered(), 1u);
  ASSERT_EQ(sbom.components().size(), 1u);
  EXPECT_EQ(sbom.components().begin()->first, "pkg:npm/y@1.0.0");
}

TEST(Sbom, HostileLinesAreCountedNeverFatal) {
  const std::string deep = "{\"package\":" + std::string(100000, '[') + "}";
  const std::string huge_name(1 << 20, 'a');
  const std::string lines[] = {
      "",
      "not json",
      deep,
      record("a", "[" + std::string(JsonObjectLine::kMaxDepth - 1, '[') +
                      std::string(JsonObjectLine::kMaxDepth, ']')),  // deep but valid: no object
      record("a", R"("lodash")"),                                    // package not an object
      record("a", "42"),
      record("a", "[]"),
      record("a", R"({"ecosystem":"npm","kind":"file","name":{"a":1},"version":"1"})"),
      record("a", R"({"ecosystem":"cargo","kind":"file","name":"x","version":"1"})"),
      record("a", file("npm", huge_name, "1.0.0")),  // no npm name is that long
      record("a", file("npm", "x", std::string(kMaxVersion + 1, '1'))),
      record("a", file("npm", "x", "")),
      record("a", file("npm", R"(a\"b)", "1.0.0")),                    // a quote in a name
      record("a", file("npm", R"(a\u0001b)", "1.0.0")),                // a control character
      record("a", R"({"ecosystem":"npm","kind":"file","name":"x"})"),  // no version
  };
  Sbom sbom;
  for (const std::string& line : lines) {
    sbom.add(line);
  }
  EXPECT_EQ(sbom.skipped(), std::size(lines));
  EXPECT_TRUE(sbom.components().empty());
}

TEST(Sbom, WhatTheOutputCarriesIsEscaped) {
  // A version, a sandbox and a url are what the record says: escaped in the JSON, encoded in
  // the purl.
  Sbom sbom;
  sbom.add(record(R"(s\"\u0007)", file("npm", "x", R"(1\"\n<)"), "allow", "200", kSha1,
                  R"(https://r/\"\u001b[31m)"));
  ASSERT_EQ(sbom.components().size(), 1u);
  EXPECT_EQ(sbom.components().begin()->first, "pkg:npm/x@1%22%0A%3C");
  const std::string json = sbomJson(sbom, {"urn:uuid:x", "t", "v"});
  ASSERT_TRUE(JsonObjectLine::parse(json.substr(0, json.size() - 1))) << json;
  EXPECT_EQ(json.find('\x07'), std::string::npos);
  EXPECT_EQ(json.find('\x1b'), std::string::npos);
  EXPECT_NE(json.find(R"("version":"1\"\n<")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("value":"s\"\u0007")"), std::string::npos) << json;
}

TEST(Uuid, IsVersion4) {
  unsigned char random[16];
  for (unsigned char& b : random) {
    b = 0xff;
  }
  EXPECT_EQ(uuidUrn(random), "urn:uuid:ffffffff-ffff-4fff-bfff-ffffffffffff");
  for (unsigned char& b : random) {
    b = 0;
  }
  EXPECT_EQ(uuidUrn(random), "urn:uuid:00000000-0000-4000-8000-000000000000");
}

}  // namespace
}  // namespace sluice::proxy::audit
