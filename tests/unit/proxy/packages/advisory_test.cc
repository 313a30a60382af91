// OSV advisories: documents shaped like the OpenSSF malicious-packages repository's and the
// GitHub advisory database's, the spec's range evaluation and its edges, the index, and
// documents a hostile or broken source could hand sluice.
#include "proxy/packages/advisory.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace sluice::proxy::packages {
namespace {

using policy::Ecosystem;

std::vector<AdvisoryEntry> read(std::string_view json) {
  std::vector<AdvisoryEntry> out;
  std::string error;
  EXPECT_TRUE(parseOsv(json, out, &error)) << error << "\n" << json;
  return out;
}

std::string readError(std::string_view json) {
  std::vector<AdvisoryEntry> out;
  std::string error;
  EXPECT_FALSE(parseOsv(json, out, &error)) << json;
  EXPECT_TRUE(out.empty()) << json;
  return error;
}

constexpr std::string_view kMalicious = R"json({
  "modified": "2025-03-01T10:00:00Z",
  "published": "2025-03-01T09:00:00Z",
  "schema_version": "1.5.0",
  "id": "MAL-2025-1",
  "summary": "Malicious code in Evil (npm)",
  "details": "\n---\n_-= Per source details. Do not edit below this line.=-_\n",
  "affected": [{
    "package": {"ecosystem": "npm", "name": "Evil"},
    "versions": ["1.0.0", "1.0.1-beta"],
    "database_specific": {"malicious-packages-origins": [{"source": "ghsa-malware",
        "sha256": "ab", "import_time": "2025-03-01T09:30:00Z"}]}
  }],
  "credits": [{"name": "someone", "type": "FINDER"}]
})json";

constexpr std::string_view kGhsa = R"({
  "schema_version": "1.4.0",
  "id": "GHSA-aaaa-bbbb-cccc",
  "modified": "2024-05-01T00:00:00Z",
  "aliases": ["CVE-2024-0001"],
  "summary": "ReDoS in some_lib",
  "affected": [
    {"package": {"ecosystem": "PyPI", "name": "Some_Lib", "purl": "pkg:pypi/some-lib"},
     "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "2.0.1"}]}],
     "database_specific": {"last_known_affected_version_range": "<= 2.0.0"}},
    {"package": {"ecosystem": "npm", "name": "some-lib"},
     "ranges": [{"type": "SEMVER", "events": [{"introduced": "1.2.0"}, {"fixed": "1.4.0"}]},
                {"type": "GIT", "repo": "https://example.test/r",
                 "events": [{"introduced": "0123abcd"}, {"fixed": "4567ef01"}]}]},
    {"package": {"ecosystem": "Go", "name": "example.test/some-lib"},
     "ranges": [{"type": "SEMVER", "events": [{"introduced": "0"}]}]},
    {"package": {"ecosystem": "Debian:12", "name": "some-lib"}, "versions": ["1.0-1"]}
  ],
  "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:H"}]
})";

TEST(Osv, ReadsAMaliciousPackagesEntry) {
  const std::vector<AdvisoryEntry> entries = read(kMalicious);
  ASSERT_EQ(entries.size(), 1u);
  const AdvisoryEntry& e = entries[0];
  EXPECT_EQ(e.id, "MAL-2025-1");
  EXPECT_TRUE(e.malicious);
  EXPECT_EQ(e.modified, "2025-03-01T10:00:00Z");
  EXPECT_EQ(e.ecosystem, Ecosystem::Npm);
  EXPECT_EQ(e.name, "evil");
  EXPECT_EQ(e.versions, (std::vector<std::string>{"1.0.0", "1.0.1-beta"}));
  EXPECT_TRUE(e.ranges.empty());
  EXPECT_TRUE(affects(e, "1.0.0"));
  EXPECT_TRUE(affects(e, "1.0.1-beta"));
  EXPECT_FALSE(affects(e, "1.0.1"));
  EXPECT_TRUE(affects(e, "v1.0.0"));  // npm reads it as 1.0.0
}

TEST(Osv, ReadsAnAdvisoryWithRangesForBothEcosystems) {
  const std::vector<AdvisoryEntry> entries = read(kGhsa);
  ASSERT_EQ(entries.size(), 2u);  // Go and Debian skipped
  const AdvisoryEntry& pypi = entries[0];
  EXPECT_EQ(pypi.ecosystem, Ecosystem::Pypi);
  EXPECT_EQ(pypi.name, "some-lib");
  EXPECT_FALSE(pypi.malicious);
  ASSERT_EQ(pypi.ranges.size(), 1u);
  EXPECT_EQ(pypi.ranges[0].scheme, VersionScheme::Pep440);
  const AdvisoryEntry& npm = entries[1];
  EXPECT_EQ(npm.ecosystem, Ecosystem::Npm);
  ASSERT_EQ(npm.ranges.size(), 1u);  // the GIT range is not kept
  EXPECT_EQ(npm.ranges[0].scheme, VersionScheme::SemVer);

  const std::pair<std::string_view, bool> pypi_versions[] = {
      {"0.1", true},      {"2.0", true},           {"2.0.0", true},    {"2.0.1.dev1", true},
      {"2.0.1rc1", true}, {"2.0.1", false},        {"2.0.1.0", false}, {"2.0.1.post1", false},
      {"3", false},       {"not-a-version", true},  // only a range from "0" covers it
  };
  for (const auto& [version, affected] : pypi_versions) {
    EXPECT_EQ(affects(pypi, version), affected) << version;
  }
  const std::pair<std::string_view, bool> npm_versions[] = {
      {"1.1.9", false},  {"1.2.0-rc.1", false}, {"1.2.0", true},  {"1.3.7", true},
      {"1.4.0-0", true}, {"1.4.0", false},      {"2.0.0", false}, {"1.2", false},
  };
  for (const auto& [version, affected] : npm_versions) {
    EXPECT_EQ(affects(npm, version), affected) << version;
  }
}

TEST(Osv, WithdrawnAndForeignAdvisoriesGiveNothing) {
  const std::string_view documents[] = {
      R"({"id":"GHSA-x","withdrawn":"2024-01-01T00:00:00Z",
          "affected":[{"package":{"ecosystem":"npm","name":"a"},"versions":["1.0.0"]}]})",
      R"({"id":"RUSTSEC-2024-1","affected":[{"package":{"ecosystem":"crates.io","name":"a"},
          "versions":["1.0.0"]}]})",
      R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm:foo","name":"a"}},
          {"package":{"ecosystem":"NPM","name":"a"}},{"package":{"ecosystem":"pypi","name":"a"}},
          {"package":{"ecosystem":"npm","name":"bad name!"},"versions":["1.0.0"]},
          {"package":{"ecosystem":7,"name":"a"}}, {"package":"npm"}, {"versions":["1"]}]})",
      R"({"id":"X-2"})",
      R"({"id":"X-3","affected":null,"withdrawn":null})",
      R"({"id":"X-4","affected":[]})",
  };
  for (std::string_view json : documents) {
    EXPECT_TRUE(read(json).empty()) << json;
  }
}

TEST(Osv, ToleratesUnknownFieldsAndSkipsWhatItCannotEvaluate) {
  const std::vector<AdvisoryEntry> entries = read(R"({
    "id": "PYSEC-2024-9", "future_field": {"a": [1, 2, {"b": null}]}, "modified": 5,
    "affected": [{
      "package": {"ecosystem": "PyPI", "name": "pkg"},
      "ranges": [
        {"type": "GIT", "events": "not even looked at"},
        {"type": "FUTURE", "events": [{"introduced": "0"}]},
        {"type": "ECOSYSTEM", "events": [{"introduced": "1.0"}, {"fixed": "1.1"},
                                         {"future_event": "x"}], "extra": true}
      ],
      "versions": null,
      "ecosystem_specific": {"deep": {"deeper": {"deepest": []}}}
    }]
  })");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].modified, "");
  ASSERT_EQ(entries[0].ranges.size(), 1u);
  EXPECT_EQ(entries[0].ranges[0].events.size(), 2u);
  EXPECT_TRUE(affects(entries[0], "1.0.5"));
  EXPECT_FALSE(affects(entries[0], "0.9"));
}

struct RangeCase {
  std::string_view name;
  Ecosystem ecosystem;
  std::string_view range;  // one ranges[] element
  std::vector<std::pair<std::string_view, bool>> versions;
};

std::string documentWith(Ecosystem ecosystem, std::string_view range) {
  return std::string(R"({"id":"T-1","affected":[{"package":{"ecosystem":")") +
         std::string(policy::osvName(ecosystem)) + R"(","name":"p"},"ranges":[)" +
         std::string(range) + "]}]}";
}

TEST(Osv, RangeEvaluation) {
  const RangeCase cases[] = {
      {"every version",
       Ecosystem::Npm,
       R"({"type":"SEMVER","events":[{"introduced":"0"}]})",
       {{"0.0.0", true}, {"99.0.0", true}, {"0.0.0-0", true}, {"junk", true}}},
      {"two intervals",
       Ecosystem::Npm,
       R"({"type":"SEMVER","events":[{"introduced":"1.0.0"},{"fixed":"1.0.2"},
           {"introduced":"3.0.0"},{"fixed":"3.2.5"}]})",
       {{"0.9.0", false},
        {"1.0.0", true},
        {"1.0.1", true},
        {"1.0.2", false},
        {"2.0.0", false},
        {"3.0.0", true},
        {"3.2.4", true},
        {"3.2.5", false}}},
      {"events out of order",
       Ecosystem::Npm,
       R"({"type":"SEMVER","events":[{"fixed":"3.2.5"},{"introduced":"3.0.0"},
           {"fixed":"1.0.2"},{"introduced":"1.0.0"}]})",
       {{"0.9.0", false}, {"1.0.1", true}, {"2.0.0", false}, {"3.1.0", true}, {"4.0.0", false}}},
      {"last_affected is included",
       Ecosystem::Pypi,
       R"({"type":"ECOSYSTEM","events":[{"introduced":"0"},{"last_affected":"2.1.214"}]})",
       {{"2.1.214", true}, {"2.1.214.0", true}, {"2.1.214.post1", false}, {"2.1.215", false}}},
      {"touching intervals leave no gap",
       Ecosystem::Npm,
       R"({"type":"SEMVER","events":[{"introduced":"1.0.0"},{"fixed":"2.0.0"},
           {"introduced":"2.0.0"},{"fixed":"3.0.0"}]})",
       {{"1.5.0", true}, {"2.0.0", true}, {"3.0.0", false}}},
      {"a limit bounds the range",
       Ecosystem::Npm,
       R"({"type":"SEMVER","events":[{"introduced":"0"},{"limit":"2.0.0"}]})",
       {{"1.9.9", true}, {"2.0.0", false}, {"2.0.1", false}}},
      {"a limit of * is none",
       Ecosystem::Npm,
       R"({"type":"SEMVER","events":[{"introduced":"0"},{"limit":"2.0.0"},{"limit":"*"}]})",
       {{"1.0.0", true}, {"5.0.0", true}}},
      {"a fixed that is no version is dropped",
       Ecosystem::Npm,
       R"({"type":"SEMVER","events":[{"introduced":"1.0.0"},{"fixed":"1.x"}]})",
       {{"0.9.0", false}, {"1.0.0", true}, {"9.0.0", true}}},
      {"an introduced that is no version starts at 0",
       Ecosystem::Npm,
       R"({"type":"SEMVER","events":[{"introduced":"v1"},{"fixed":"2.0.0"}]})",
       {{"0.1.0", true}, {"2.0.0", false}}},
      {"no introduced starts at 0",
       Ecosystem::Pypi,
       R"({"type":"ECOSYSTEM","events":[{"fixed":"2.0"}]})",
       {{"0.1", true}, {"1.9", true}, {"2.0", false}}},
      {"SEMVER orders PyPI versions by SemVer",
       Ecosystem::Pypi,
       R"({"type":"SEMVER","events":[{"introduced":"1.0.0"},{"fixed":"1.2.0"}]})",
       {{"1.1.0", true}, {"1.2.0", false}, {"1.1", false}}},  // "1.1" is no SemVer
      {"ECOSYSTEM orders PyPI by PEP 440",
       Ecosystem::Pypi,
       R"({"type":"ECOSYSTEM","events":[{"introduced":"1.0"},{"fixed":"1.2"}]})",
       {{"1.0.0", true},
        {"1.1", true},
        {"1.2.0", false},
        {"1.2rc1", true},
        {"1.0.dev1", false},
        {"1!0.5", false}}},
      {"ECOSYSTEM orders npm by SemVer",
       Ecosystem::Npm,
       R"({"type":"ECOSYSTEM","events":[{"introduced":"1.0.0"},{"fixed":"1.2.0"}]})",
       {{"1.1.0", true}, {"1.2.0-rc.1", true}, {"1.2.0", false}}},
      {"an empty range is skipped",
       Ecosystem::Npm,
       R"({"type":"SEMVER","events":[]})",
       {{"1.0.0", false}}},
  };
  for (const RangeCase& c : cases) {
    const std::vector<AdvisoryEntry> entries = read(documentWith(c.ecosystem, c.range));
    ASSERT_EQ(entries.size(), 1u) << c.name;
    for (const auto& [version, affected] : c.versions) {
      EXPECT_EQ(affects(entries[0], version), affected) << c.name << ": " << version;
    }
  }
}

TEST(Osv, ExplicitVersionsMatchByTheEcosystemsEquality) {
  const std::vector<AdvisoryEntry> entries = read(R"({"id":"MAL-2025-2","affected":[
        {"package":{"ecosystem":"PyPI","name":"Evil.Pkg"},"versions":["1.0","2.0rc1","junk"]}]})");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].name, "evil-pkg");
  const std::pair<std::string_view, bool> versions[] = {
      {"1.0", true},  {"1.0.0", true},      {"v1.0", true}, {"2.0c1", true},
      {"2.0", false}, {"1.0+local", false}, {"junk", true}, {"Junk", false},
  };
  for (const auto& [version, affected] : versions) {
    EXPECT_EQ(affects(entries[0], version), affected) << version;
  }
}

TEST(Osv, RefusesBrokenDocumentsWhole) {
  const std::string_view documents[] = {
      "", "not json", R"({"id":"X-1")", R"(["id","X-1"])", R"("X-1")", R"({"affected":[]})",
      R"({"id":7})", R"({"id":""})", R"({"id":"X 1"})", R"({"id":"X-1\n"})",
      R"({"id":"X-1","withdrawn":true})", R"({"id":"X-1","affected":{}})",
      R"({"id":"X-1","affected":[1]})",
      R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":1}}]})",
      R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":"a"},"versions":"1.0.0"}]})",
      R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":"a"},"versions":[1]}]})",
      R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":"a"},"ranges":{}}]})",
      R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":"a"},"ranges":[1]}]})",
      R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":"a"},"ranges":[{}]}]})",
      R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":"a"},
          "ranges":[{"type":"SEMVER"}]}]})",
      R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":"a"},
          "ranges":[{"type":"SEMVER","events":[[]]}]}]})",
      R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":"a"},
          "ranges":[{"type":"SEMVER","events":[{"introduced":0}]}]}]})",
      R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":"a"},
          "ranges":[{"type":"SEMVER","events":[{"introduced":"0","fixed":"1.0.0"}]}]}]})",
      // The first entry was fine; the document still gives nothing.
      R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":"a"},"versions":["1.0.0"]},
          {"package":{"ecosystem":"npm","name":"b"},"versions":[null]}]})",
      "{\"id\":\"X-1\",\"summary\":\"\xff\"}",  // not UTF-8
  };
  for (std::string_view json : documents) {
    EXPECT_FALSE(readError(json).empty()) << json;
  }
  // The error names the advisory when it has one.
  EXPECT_EQ(readError(R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":"a"},
                           "versions":"1"}]})"),
            "X-1: affected[0].versions is not an array");
}

TEST(Osv, HostileDocumentsAreBounded) {
  const std::string deep =
      R"({"id":"X-1","database_specific":)" + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_NE(readError(deep).find("not JSON"), std::string::npos);
  const std::string shallow_enough =
      R"({"id":"X-1","database_specific":)" + std::string(50, '[') + std::string(50, ']') + "}";
  EXPECT_TRUE(read(shallow_enough).empty());

  auto versions = [](std::size_t n) {
    std::string json = R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":"a"},)"
                       R"("versions":[)";
    for (std::size_t i = 0; i < n; ++i) {
      json += (i ? ",\"1.0." : "\"1.0.") + std::to_string(i) + "\"";
    }
    return json + "]}]}";
  };
  EXPECT_EQ(read(versions(kMaxOsvVersions)).at(0).versions.size(), kMaxOsvVersions);
  EXPECT_NE(readError(versions(kMaxOsvVersions + 1)).find("versions"), std::string::npos);

  std::string many_affected = R"({"id":"X-1","affected":[)";
  for (std::size_t i = 0; i <= kMaxOsvAffected; ++i) {
    many_affected += std::string(i ? "," : "") + R"({"package":{"ecosystem":"npm","name":"a"}})";
  }
  EXPECT_FALSE(readError(many_affected + "]}").empty());

  std::string many_events = R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm","name":)"
                            R"("a"},"ranges":[{"type":"SEMVER","events":[)";
  for (std::size_t i = 0; i <= kMaxOsvEvents; ++i) {
    many_events += std::string(i ? "," : "") + R"({"introduced":"1.0.0"})";
  }
  EXPECT_FALSE(readError(many_events + "]}]}]}").empty());

  std::string exact(kMaxOsvDocument, ' ');
  exact.replace(0, 12, R"({"id":"X-1"})");
  EXPECT_TRUE(read(exact).empty());
  std::string huge(kMaxOsvDocument + 1, ' ');
  huge.replace(0, 12, R"({"id":"X-1"})");
  EXPECT_NE(readError(huge).find("larger"), std::string::npos);

  // A version longer than any version is dropped, not kept.
  const std::string long_version = R"({"id":"X-1","affected":[{"package":{"ecosystem":"npm",)"
                                   R"("name":"a"},"versions":[")" +
                                   std::string(kMaxOsvVersionLength + 1, '1') + R"("]}]})";
  EXPECT_TRUE(read(long_version).at(0).versions.empty());
}

TEST(Osv, OneReaderReadsManyDocuments) {
  OsvReader reader;
  std::vector<AdvisoryEntry> out;
  std::string error;
  EXPECT_TRUE(reader.read(kGhsa, out, &error)) << error;
  EXPECT_FALSE(reader.read("{", out, &error));
  EXPECT_TRUE(reader.read(kMalicious, out, &error)) << error;
  EXPECT_TRUE(reader.read(R"({"id":"X-9"})", out, nullptr));
  EXPECT_EQ(out.size(), 3u);
}

std::vector<AdvisoryEntry> readAll(const std::vector<std::string_view>& documents) {
  std::vector<AdvisoryEntry> out;
  OsvReader reader;
  for (std::string_view json : documents) {
    std::string error;
    EXPECT_TRUE(reader.read(json, out, &error)) << error;
  }
  return out;
}

struct Case {
  Ecosystem ecosystem;
  std::string_view version;
  bool affected;
};

constexpr std::string_view kSecondMalicious = R"({"id":"MAL-2025-0","modified":"m",
  "affected":[{"package":{"ecosystem":"npm","name":"evil"},
               "ranges":[{"type":"SEMVER","events":[{"introduced":"0"}]}]},
              {"package":{"ecosystem":"npm","name":"evil"},"versions":["1.0.0"]}]})";

TEST(AdvisoryIndex, LooksUpByPackageAndVersion) {
  const AdvisoryIndex index(readAll({kMalicious, kGhsa, kSecondMalicious}));
  EXPECT_EQ(index.size(), 3u);  // MAL-2025-0, MAL-2025-1, GHSA-aaaa-bbbb-cccc
  EXPECT_EQ(index.entryCount(), 5u);

  const std::vector<AdvisoryMatch> both = index.lookup(Ecosystem::Npm, "evil", "1.0.0");
  ASSERT_EQ(both.size(), 2u);  // MAL-2025-0 once, though two of its entries match
  EXPECT_EQ(both[0].id, "MAL-2025-0");
  EXPECT_EQ(both[1].id, "MAL-2025-1");
  EXPECT_TRUE(both[0].malicious && both[1].malicious);
  EXPECT_EQ(index.lookup(Ecosystem::Npm, "evil", "7.0.0").size(), 1u);
  EXPECT_TRUE(index.lookup(Ecosystem::Pypi, "evil", "1.0.0").empty());
  EXPECT_TRUE(index.lookup(Ecosystem::Npm, "Evil", "1.0.0").empty());  // names come normalised
  EXPECT_TRUE(index.lookup(Ecosystem::Npm, "nobody", "1.0.0").empty());

  const std::vector<AdvisoryMatch> ghsa = index.lookup(Ecosystem::Pypi, "some-lib", "1.0");
  ASSERT_EQ(ghsa.size(), 1u);
  EXPECT_EQ(ghsa[0].id, "GHSA-aaaa-bbbb-cccc");
  EXPECT_FALSE(ghsa[0].malicious);

  EXPECT_FALSE(index.find(Ecosystem::Pypi, "some-lib", "1.0", true).has_value());
  EXPECT_EQ(index.find(Ecosystem::Pypi, "some-lib", "1.0", false)->id, "GHSA-aaaa-bbbb-cccc");
  EXPECT_EQ(index.find(Ecosystem::Npm, "evil", "1.0.0", true)->id, "MAL-2025-0");
  EXPECT_FALSE(index.find(Ecosystem::Npm, "some", "1.3.0", false).has_value());
  EXPECT_EQ(index.find(Ecosystem::Npm, "some-lib", "1.3.0", false)->id, "GHSA-aaaa-bbbb-cccc");
}

// The index finds listed versions by their keys: the same equality as affects().
TEST(AdvisoryIndex, ListedVersionsMatchByTheEcosystemsEquality) {
  const AdvisoryIndex index(readAll({
      R"({"id":"MAL-1","affected":[{"package":{"ecosystem":"PyPI","name":"p"},
          "versions":["1.0","2.0rc1","junk","1.0+Local.007","3.0.0.0"]}]})",
      R"({"id":"MAL-2","affected":[{"package":{"ecosystem":"npm","name":"p"},
          "versions":["1.0.0","2.0.0-rc.1+build","junk","1.0"]}]})",
  }));
  const Case cases[] = {
      {Ecosystem::Pypi, "1.0", true},         {Ecosystem::Pypi, "1.0.0", true},
      {Ecosystem::Pypi, "v1", true},          {Ecosystem::Pypi, "1.0.1", false},
      {Ecosystem::Pypi, "2.0c1", true},       {Ecosystem::Pypi, "2.0", false},
      {Ecosystem::Pypi, "junk", true},        {Ecosystem::Pypi, "JUNK", false},
      {Ecosystem::Pypi, "1.0+local.7", true}, {Ecosystem::Pypi, "1.0+local", false},
      {Ecosystem::Pypi, "3", true},           {Ecosystem::Npm, "1.0.0", true},
      {Ecosystem::Npm, "v1.0.0", true},       {Ecosystem::Npm, "1.0.0+x", true},
      {Ecosystem::Npm, "2.0.0-rc.1", true},   {Ecosystem::Npm, "2.0.0", false},
      {Ecosystem::Npm, "junk", true},         {Ecosystem::Npm, "1.0", true},
      {Ecosystem::Npm, "1.0.1", false},       {Ecosystem::Npm, "", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(index.find(c.ecosystem, "p", c.version, false).has_value(), c.affected) << c.version;
  }
}

TEST(AdvisoryIndex, FingerprintSaysWhetherWhatIsLoadedChanged) {
  const AdvisoryIndex empty;
  const AdvisoryIndex one(readAll({kMalicious, kGhsa}));
  const AdvisoryIndex reordered(readAll({kGhsa, kMalicious}));
  const AdvisoryIndex twice(readAll({kGhsa, kMalicious, kGhsa}));  // a directory and a zip
  EXPECT_EQ(one.fingerprint(), reordered.fingerprint());
  EXPECT_EQ(one.fingerprint(), twice.fingerprint());
  EXPECT_EQ(twice.size(), one.size());
  EXPECT_EQ(twice.entryCount(), one.entryCount());
  EXPECT_NE(one.fingerprint(), empty.fingerprint());
  EXPECT_EQ(empty.size(), 0u);

  std::string changed(kMalicious);
  changed.replace(changed.find("1.0.1-beta"), 10, "1.0.2-beta");
  const AdvisoryIndex other(readAll({changed, kGhsa}));
  EXPECT_NE(one.fingerprint(), other.fingerprint());
  std::string remodified(kMalicious);
  remodified.replace(remodified.find("10:00:00Z"), 9, "11:00:00Z");
  EXPECT_NE(one.fingerprint(), AdvisoryIndex(readAll({remodified, kGhsa})).fingerprint());
}

}  // namespace
}  // namespace sluice::proxy::packages
