// MetadataHold: registry metadata held whole, charged to its sandbox, filtered and served with a
// head of sluice's (docs/packages.md#metadata). What the origin is asked for (gzip, no
// conditionals or ranges, PEP 691 JSON from PyPI), which answers are held, the memory bounds
// (max_metadata per document, four documents' worth per sandbox, every byte given back), and a
// served head with nothing left of the origin's that describes the origin's body.

#include "proxy/session/exchange/metadata_hold.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/package_request.h"
#include "proxy/packages/gzip_codec.h"

namespace sluice::proxy::session {
namespace {

using policy::Ecosystem;
using policy::Reason;

constexpr std::uint64_t kMaxDocument = 1 << 20;  // PackageSettings::kMinMaxMetadata
constexpr std::string_view kMalId = "MAL-2025-1";
constexpr std::string_view kPipAccept =
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, "
    "text/html; q=0.01";

const packages::AdvisoryIndex& advisories() {
  static const packages::AdvisoryIndex index([] {
    std::vector<packages::AdvisoryEntry> entries(2);
    entries[0].id = std::string(kMalId);
    entries[0].malicious = true;
    entries[0].ecosystem = Ecosystem::Npm;
    entries[0].name = "left-pad";
    entries[0].versions = {"1.2.0"};
    entries[1].id = "MAL-2025-2";
    entries[1].malicious = true;
    entries[1].ecosystem = Ecosystem::Pypi;
    entries[1].name = "foo-bar";
    entries[1].versions = {"2.0"};
    return entries;
  }());
  return index;
}

policy::PackageRequest request(Ecosystem ecosystem, std::string_view target) {
  return policy::recognizePackageRequest(policy::RegistrySettings{ecosystem, "/"}, "GET", target);
}

std::string manifest(std::string_view version) {
  return R"({"name":"left-pad","version":")" + std::string(version) +
         R"(","dist":{"integrity":"sha512-AAAA=="}})";
}

std::string packument() {
  return R"({"name":"left-pad","dist-tags":{"latest":"1.2.0"},"versions":{"1.1.0":)" +
         manifest("1.1.0") + R"(,"1.2.0":)" + manifest("1.2.0") + "}}";
}

std::string gzipped(std::string_view plain) {
  std::string out;
  EXPECT_TRUE(packages::deflateGzip(plain, out, 6));
  return out;
}

http::ResponseHead responseHead(int status, http::ResponseFraming framing,
                                std::vector<std::pair<std::string_view, std::string_view>> fields,
                                std::uint64_t content_length = 0) {
  http::ResponseHead head;
  head.status = status;
  head.framing = framing;
  for (const auto& [name, value] : fields) {
    head.headers.add(name, value);
  }
  head.has_content_length = framing == http::ResponseFraming::ContentLength;
  head.content_length = content_length;
  return head;
}

Reason feed(MetadataHold& hold, std::string_view bytes, std::string& detail) {
  return hold.feed(std::span<const char>(bytes.data(), bytes.size()), detail);
}

// A hold planned for `target`, its 200 identity head held.
void startHolding(MetadataHold& hold, std::atomic<std::size_t>* held,
                  std::string_view target = "/left-pad", std::string_view coding = "") {
  hold.plan(request(Ecosystem::Npm, target), "", kMaxDocument, held);
  std::string detail;
  std::vector<std::pair<std::string_view, std::string_view>> fields = {
      {"Content-Type", "application/json"}};
  if (!coding.empty()) {
    fields.emplace_back("Content-Encoding", coding);
  }
  ASSERT_EQ(hold.holdHead(responseHead(200, http::ResponseFraming::Chunked, fields), detail),
            Reason::None)
      << detail;
  ASSERT_TRUE(hold.holding());
}

std::string fieldsText(const std::vector<http::HeaderField>& fields) {
  std::string out;
  for (const http::HeaderField& f : fields) {
    out += std::string(f.name) + "=" + std::string(f.value) + ";";
  }
  return out;
}

TEST(MetadataHold, AsksForAWholeDocumentItCanRead) {
  const std::string removals = "If-None-Match=;If-Modified-Since=;If-Range=;Range=;";
  const std::string pypi_accept = "Accept=" + std::string(kSimplePageAccept) + ";";
  const struct {
    const char* what;
    Ecosystem ecosystem;
    std::string_view target;
    std::vector<http::HeaderField> fields;  // already there (credential brokering's)
    std::string expected;
  } cases[] = {
      {"npm packument", Ecosystem::Npm, "/left-pad", {}, "Accept-Encoding=gzip;" + removals},
      {"npm version document",
       Ecosystem::Npm,
       "/left-pad/latest",
       {},
       "Accept-Encoding=gzip;" + removals},
      {"a broker's identity stays",
       Ecosystem::Npm,
       "/left-pad",
       {{"Authorization", "Bearer t"}, {"Accept-Encoding", "identity"}},
       "Authorization=Bearer t;Accept-Encoding=identity;" + removals},
      {"any case",
       Ecosystem::Npm,
       "/left-pad",
       {{"accept-ENCODING", "identity"}},
       "accept-ENCODING=identity;" + removals},
      {"PyPI simple page: JSON first",
       Ecosystem::Pypi,
       "/simple/foo-bar/",
       {},
       "Accept-Encoding=gzip;" + removals + pypi_accept},
      {"PyPI JSON API: no Accept",
       Ecosystem::Pypi,
       "/pypi/foo-bar/json",
       {},
       "Accept-Encoding=gzip;" + removals},
  };
  for (const auto& c : cases) {
    MetadataHold hold;
    hold.plan(request(c.ecosystem, c.target), kPipAccept, kMaxDocument, nullptr);
    EXPECT_TRUE(hold.planned());
    std::vector<http::HeaderField> fields = c.fields;
    hold.requestFields(fields);
    EXPECT_EQ(fieldsText(fields), c.expected) << c.what;
  }
}

// The age rule (docs/packages.md#the-age-rule) needs npm's `time`, which only the full
// packument has: asked for whatever the client's Accept said. PyPI is asked for JSON anyway.
TEST(MetadataHold, AsksNpmForTheFullPackumentWhenItNeedsTimes) {
  const std::string removals = "If-None-Match=;If-Modified-Since=;If-Range=;Range=;";
  const std::string gzip = "Accept-Encoding=gzip;" + removals;
  const std::string pypi_accept = "Accept=" + std::string(kSimplePageAccept) + ";";
  const std::string abbreviated = "application/vnd.npm.install-v1+json; q=1.0, */*";
  const struct {
    const char* what;
    Ecosystem ecosystem;
    std::string_view target;
    std::string_view client_accept;
    bool needs_times;
    std::string expected;
  } cases[] = {
      {"npm packument", Ecosystem::Npm, "/left-pad", "", true, gzip + "Accept=application/json;"},
      {"npm packument, npm's Accept", Ecosystem::Npm, "/left-pad", abbreviated, true,
       gzip + "Accept=application/json;"},
      {"npm packument, no times", Ecosystem::Npm, "/left-pad", abbreviated, false, gzip},
      {"npm version document", Ecosystem::Npm, "/left-pad/latest", "", true, gzip},
      {"PyPI simple page", Ecosystem::Pypi, "/simple/foo-bar/", kPipAccept, true,
       gzip + pypi_accept},
      {"PyPI simple page, no times", Ecosystem::Pypi, "/simple/foo-bar/", "text/html", false,
       gzip + pypi_accept},
      {"PyPI JSON API", Ecosystem::Pypi, "/pypi/foo-bar/json", "", true, gzip},
  };
  for (const auto& c : cases) {
    MetadataHold hold;
    hold.plan(request(c.ecosystem, c.target), c.client_accept, kMaxDocument, nullptr,
              c.needs_times);
    std::vector<http::HeaderField> fields;
    hold.requestFields(fields);
    EXPECT_EQ(fieldsText(fields), c.expected) << c.what;
  }
  // Each plan says it anew: the next request on the connection without the rule asks for no
  // form.
  MetadataHold hold;
  hold.plan(request(Ecosystem::Npm, "/left-pad"), "", kMaxDocument, nullptr, true);
  hold.plan(request(Ecosystem::Npm, "/left-pad"), "", kMaxDocument, nullptr);
  std::vector<http::HeaderField> fields;
  hold.requestFields(fields);
  EXPECT_EQ(fieldsText(fields), gzip);
}

// The facts reach the filter: a version younger than min_age leaves, and its time is handed
// back to be learned.
TEST(MetadataHold, FinishJudgesAgesWithTheFactsGiven) {
  MetadataHold hold;
  startHolding(hold, nullptr);
  const std::string doc =
      R"({"name":"left-pad","versions":{"1.1.0":)" + manifest("1.1.0") + R"(,"1.2.0":)" +
      manifest("1.2.0") +
      R"(},"time":{"1.1.0":"2025-01-01T00:00:00.000Z","1.2.0":"2025-12-31T23:00:00.000Z"}})";
  std::string detail;
  ASSERT_EQ(feed(hold, doc, detail), Reason::None) << detail;
  policy::PackageSettings settings;
  settings.min_age = std::chrono::milliseconds(7LL * 24 * 60 * 60 * 1000);
  PublishTimes known;
  const ServedMetadata& served =
      hold.finish(settings, MetadataFacts{nullptr, 1767225600000 /* 2026-01-01 */, &known});
  ASSERT_EQ(served.reason, Reason::None) << served.detail;
  ASSERT_EQ(served.removed.size(), 1u);
  EXPECT_EQ(served.removed[0].version, "1.2.0");
  EXPECT_EQ(served.removed[0].reason, Reason::PackageTooNew);
  ASSERT_EQ(served.published.size(), 2u);
  EXPECT_EQ(served.published[1].first, "1.2.0");
  EXPECT_EQ(served.published[1].second, 1767225600000 - 60 * 60 * 1000);
  EXPECT_EQ(served.body.find("1.2.0"), std::string::npos) << served.body;
}

TEST(MetadataHold, HoldsOnlyA200WithABodyItCanDecode) {
  using F = http::ResponseFraming;
  const struct {
    const char* what;
    int status;
    F framing;
    std::vector<std::pair<std::string_view, std::string_view>> fields;
    Reason reason;
    bool holding;
  } cases[] = {
      {"404 passes", 404, F::ContentLength, {}, Reason::None, false},
      {"redirect passes", 302, F::ContentLength, {{"Location", "/x"}}, Reason::None, false},
      {"500 passes", 500, F::Chunked, {}, Reason::None, false},
      {"304 passes", 304, F::None, {}, Reason::None, false},
      {"204 has no body", 204, F::None, {}, Reason::None, false},
      {"a 200 framed as a HEAD answer", 200, F::None, {}, Reason::None, false},
      {"206 with a body",
       206,
       F::ContentLength,
       {{"Content-Range", "bytes 0-9/100"}},
       Reason::PackageMetadataInvalid,
       false},
      {"203 with a body", 203, F::Chunked, {}, Reason::PackageMetadataInvalid, false},
      {"brotli",
       200,
       F::ContentLength,
       {{"Content-Encoding", "br"}},
       Reason::PackageMetadataInvalid,
       false},
      {"gzip twice in one field",
       200,
       F::Chunked,
       {{"Content-Encoding", "gzip, gzip"}},
       Reason::PackageMetadataInvalid,
       false},
      {"gzip in two fields",
       200,
       F::Chunked,
       {{"Content-Encoding", "gzip"}, {"Content-Encoding", "gzip"}},
       Reason::PackageMetadataInvalid,
       false},
      {"gzip and deflate in two fields",
       200,
       F::Chunked,
       {{"Content-Encoding", "deflate"}, {"content-encoding", "gzip"}},
       Reason::PackageMetadataInvalid,
       false},
      {"identity", 200, F::ContentLength, {}, Reason::None, true},
      {"identity named",
       200,
       F::ContentLength,
       {{"Content-Encoding", "identity"}},
       Reason::None,
       true},
      {"identity beside gzip",
       200,
       F::Chunked,
       {{"Content-Encoding", "identity"}, {"Content-Encoding", "gzip"}},
       Reason::None,
       true},
      {"gzip", 200, F::Chunked, {{"Content-Encoding", "gzip"}}, Reason::None, true},
      {"deflate", 200, F::UntilClose, {{"Content-Encoding", "deflate"}}, Reason::None, true},
  };
  for (const auto& c : cases) {
    MetadataHold hold;
    hold.plan(request(Ecosystem::Npm, "/left-pad"), "", kMaxDocument, nullptr);
    std::string detail;
    EXPECT_EQ(hold.holdHead(responseHead(c.status, c.framing, c.fields), detail), c.reason)
        << c.what;
    EXPECT_EQ(hold.holding(), c.holding) << c.what;
    EXPECT_EQ(hold.replacesOriginBody(), c.holding) << c.what;
    if (c.reason != Reason::None) {
      EXPECT_NE(detail.find("docs/packages.md#metadata"), std::string::npos) << detail;
    }
  }
  // Nothing planned: nothing is held.
  MetadataHold idle;
  std::string detail;
  EXPECT_EQ(idle.holdHead(responseHead(200, F::ContentLength, {}), detail), Reason::None);
  EXPECT_FALSE(idle.holding());
}

TEST(MetadataHold, ChargesTheSandboxAsTheDocumentGrowsAndGivesItAllBack) {
  std::atomic<std::size_t> held{0};
  {
    MetadataHold hold;
    startHolding(hold, &held);
    std::string detail;
    EXPECT_EQ(feed(hold, std::string(1000, 'a'), detail), Reason::None);
    EXPECT_EQ(held.load(), 1000u);
    EXPECT_EQ(feed(hold, std::string(500, 'b'), detail), Reason::None);
    EXPECT_EQ(held.load(), 1500u);
    EXPECT_EQ(feed(hold, "", detail), Reason::None);
    EXPECT_EQ(held.load(), 1500u);
    hold.reset();
    EXPECT_EQ(held.load(), 0u);
    EXPECT_FALSE(hold.planned());
    EXPECT_FALSE(hold.holding());
    EXPECT_FALSE(hold.replacesOriginBody());

    // Planned again (the next request on the connection): the last charge is given back too.
    startHolding(hold, &held);
    EXPECT_EQ(feed(hold, std::string(300, 'c'), detail), Reason::None);
    EXPECT_EQ(held.load(), 300u);
    startHolding(hold, &held);
    EXPECT_EQ(held.load(), 0u);
    EXPECT_EQ(feed(hold, std::string(200, 'd'), detail), Reason::None);
    EXPECT_EQ(held.load(), 200u);
  }
  EXPECT_EQ(held.load(), 0u);  // and when the exchange goes
}

TEST(MetadataHold, ADocumentPastMaxMetadataIsTooLarge) {
  std::atomic<std::size_t> held{0};
  MetadataHold hold;
  startHolding(hold, &held);
  std::string detail;
  EXPECT_EQ(feed(hold, std::string(kMaxDocument, 'a'), detail), Reason::None) << detail;
  EXPECT_EQ(held.load(), kMaxDocument);  // exactly the bound is allowed
  EXPECT_EQ(feed(hold, "b", detail), Reason::PackageMetadataTooLarge);
  EXPECT_NE(detail.find("max_metadata (1048576 bytes decoded)"), std::string::npos) << detail;
  hold.reset();
  EXPECT_EQ(held.load(), 0u);

  // In one feed, and gzip'd: the bound is the decoded size, and a bomb stops at it.
  startHolding(hold, &held, "/left-pad", "gzip");
  EXPECT_EQ(feed(hold, gzipped(std::string(4 * kMaxDocument, '0')), detail),
            Reason::PackageMetadataTooLarge);
  EXPECT_LE(held.load(), kMaxDocument);
  hold.reset();
  EXPECT_EQ(held.load(), 0u);
}

TEST(MetadataHold, TheSandboxHoldsAtMostFourDocumentsWorth) {
  constexpr std::size_t kLimit = kMaxDocument * policy::PackageSettings::kMetadataDocumentsHeld;
  std::atomic<std::size_t> held{0};
  std::string detail;
  {
    // Four whole documents fit exactly; a byte of a fifth is refused, and not counted.
    MetadataHold holds[5];
    for (int i = 0; i < 4; ++i) {
      startHolding(holds[i], &held);
      EXPECT_EQ(feed(holds[i], std::string(kMaxDocument, 'a'), detail), Reason::None) << detail;
    }
    EXPECT_EQ(held.load(), kLimit);
    startHolding(holds[4], &held);
    EXPECT_EQ(feed(holds[4], "x", detail), Reason::PackageMetadataBusy);
    EXPECT_EQ(held.load(), kLimit);
    EXPECT_NE(detail.find("already hold 4194304 bytes"), std::string::npos) << detail;
    EXPECT_NE(detail.find("4 times packages.max_metadata"), std::string::npos) << detail;
  }
  EXPECT_EQ(held.load(), 0u);

  // Two holds sharing the count with what the sandbox's other requests hold: the second's
  // bytes would pass the limit, so they are refused and the count is as it was.
  held = 3 * kMaxDocument;
  MetadataHold first;
  MetadataHold second;
  startHolding(first, &held);
  startHolding(second, &held);
  EXPECT_EQ(feed(first, std::string(kMaxDocument / 2, 'a'), detail), Reason::None);
  EXPECT_EQ(held.load(), 3 * kMaxDocument + kMaxDocument / 2);
  EXPECT_EQ(feed(second, std::string(kMaxDocument / 2 + 1, 'b'), detail),
            Reason::PackageMetadataBusy);
  EXPECT_EQ(held.load(), 3 * kMaxDocument + kMaxDocument / 2);
  second.reset();  // charged nothing: gives nothing back
  EXPECT_EQ(held.load(), 3 * kMaxDocument + kMaxDocument / 2);
  first.reset();
  EXPECT_EQ(held.load(), 3 * kMaxDocument);
}

TEST(MetadataHold, AGzipBodyIsChargedByItsInflatedSize) {
  std::string plain = packument();
  while (plain.size() < 300 * 1024) {
    plain += ' ';  // JSON whitespace: compresses to almost nothing
  }
  const std::string body = gzipped(plain);
  ASSERT_LT(body.size(), plain.size() / 10);
  std::atomic<std::size_t> held{0};
  MetadataHold hold;
  startHolding(hold, &held, "/left-pad", "gzip");
  std::string detail;
  const std::size_t half = body.size() / 2;
  EXPECT_EQ(feed(hold, std::string_view(body).substr(0, half), detail), Reason::None) << detail;
  EXPECT_EQ(feed(hold, std::string_view(body).substr(half), detail), Reason::None) << detail;
  EXPECT_EQ(held.load(), plain.size());
  const ServedMetadata& served =
      hold.finish(policy::PackageSettings{}, MetadataFacts{&advisories(), 0, nullptr});
  EXPECT_EQ(served.reason, Reason::None) << served.detail;
  EXPECT_EQ(held.load(), plain.size());  // held until the exchange is over
  hold.reset();
  EXPECT_EQ(held.load(), 0u);
}

TEST(MetadataHold, ServesTheFilteredDocumentWithAHeadOfSluices) {
  std::atomic<std::size_t> held{0};
  MetadataHold hold;
  hold.plan(request(Ecosystem::Npm, "/left-pad"), "application/json", kMaxDocument, &held);
  const std::string body = gzipped(packument());
  http::ResponseHead origin = responseHead(200, http::ResponseFraming::ContentLength,
                                           {{"Content-Type", "application/json"},
                                            {"Content-Length", "12345"},
                                            {"Content-Encoding", "gzip"},
                                            {"ETag", "\"abc\""},
                                            {"Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT"},
                                            {"Content-MD5", "Q2hlY2sgSW50ZWdyaXR5IQ=="},
                                            {"Digest", "sha-256=abc"},
                                            {"Repr-Digest", "sha-256=:abc=:"},
                                            {"Accept-Ranges", "bytes"},
                                            {"Vary", "Accept-Encoding"},
                                            {"vary", "Origin"},
                                            {"Sluice-Removed", "0"},  // forged by the origin
                                            {"Cache-Control", "max-age=300"},
                                            {"X-Custom", "kept"}},
                                           body.size());
  origin.keep_alive = false;
  std::string detail;
  ASSERT_EQ(hold.holdHead(origin, detail), Reason::None) << detail;
  ASSERT_TRUE(hold.holding());
  ASSERT_EQ(feed(hold, body, detail), Reason::None) << detail;
  const ServedMetadata& served =
      hold.finish(policy::PackageSettings{}, MetadataFacts{&advisories(), 0, nullptr});
  ASSERT_EQ(served.reason, Reason::None) << served.detail;
  EXPECT_FALSE(hold.holding());
  EXPECT_TRUE(hold.replacesOriginBody());  // none of the origin's bytes are the client's
  ASSERT_EQ(served.removed.size(), 1u);
  EXPECT_EQ(served.removed[0].advisory, kMalId);
  EXPECT_EQ(served.body.find("1.2.0"), std::string::npos);

  const http::ResponseHead& head = hold.servedHead();
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.framing, http::ResponseFraming::ContentLength);
  EXPECT_TRUE(head.has_content_length);
  EXPECT_EQ(head.content_length, served.body.size());
  EXPECT_FALSE(head.keep_alive);  // the origin's connection, as it said
  const http::HeaderBlock& h = head.headers;
  const struct {
    std::string_view name;
    std::optional<std::string> value;  // nullopt: absent
  } expected[] = {
      {"Content-Length", std::to_string(served.body.size())},
      {"Content-Type", "application/json"},
      {"Vary", "Accept, Accept-Encoding"},
      {"Sluice-Removed", "1"},
      {"Cache-Control", "max-age=300"},
      {"X-Custom", "kept"},
      {"Content-Encoding", std::nullopt},
      {"ETag", std::nullopt},
      {"Last-Modified", std::nullopt},
      {"Content-MD5", std::nullopt},
      {"Digest", std::nullopt},
      {"Repr-Digest", std::nullopt},
      {"Accept-Ranges", std::nullopt},
  };
  for (const auto& e : expected) {
    EXPECT_EQ(h.count(e.name), e.value ? 1u : 0u) << e.name;
    if (e.value) {
      EXPECT_EQ(h.find(e.name), *e.value) << e.name;
    }
  }
}

TEST(MetadataHold, APypiPageIsServedInTheClientsForm) {
  const std::string json =
      R"({"meta":{"api-version":"1.1"},"name":"foo-bar","files":[)"
      R"({"filename":"foo_bar-1.0.tar.gz","url":"https://h/foo_bar-1.0.tar.gz","hashes":{}},)"
      R"({"filename":"foo_bar-2.0.tar.gz","url":"https://h/foo_bar-2.0.tar.gz","hashes":{}}]})";
  const struct {
    std::string_view accept;
    std::string_view content_type;
  } cases[] = {
      {kPipAccept, "application/vnd.pypi.simple.v1+json"},
      {"application/vnd.pypi.simple.v1+html", "application/vnd.pypi.simple.v1+html"},
      {"text/html", "text/html; charset=utf-8"},
      {"", "text/html; charset=utf-8"},
  };
  for (const auto& c : cases) {
    MetadataHold hold;
    hold.plan(request(Ecosystem::Pypi, "/simple/foo-bar/"), c.accept, kMaxDocument, nullptr);
    std::string detail;
    ASSERT_EQ(hold.holdHead(responseHead(200, http::ResponseFraming::ContentLength,
                                         {{"Content-Type", "application/vnd.pypi.simple.v1+json"}},
                                         json.size()),
                            detail),
              Reason::None);
    ASSERT_EQ(feed(hold, json, detail), Reason::None);
    const ServedMetadata& served =
        hold.finish(policy::PackageSettings{}, MetadataFacts{&advisories(), 0, nullptr});
    ASSERT_EQ(served.reason, Reason::None) << served.detail;
    EXPECT_EQ(served.body.find("foo_bar-2.0"), std::string::npos) << served.body;
    const http::ResponseHead& head = hold.servedHead();
    EXPECT_EQ(head.headers.find("Content-Type"), c.content_type) << c.accept;
    EXPECT_EQ(head.headers.find("Sluice-Removed"), "1");
  }
}

TEST(MetadataHold, ABodyThatDoesNotDecodeIsInvalid) {
  const std::string body = gzipped(packument());
  std::string detail;
  {
    // Cut short: nothing is wrong until the end comes too soon.
    MetadataHold hold;
    startHolding(hold, nullptr, "/left-pad", "gzip");
    EXPECT_EQ(feed(hold, std::string_view(body).substr(0, body.size() - 4), detail), Reason::None);
    const ServedMetadata& served =
        hold.finish(policy::PackageSettings{}, MetadataFacts{&advisories(), 0, nullptr});
    EXPECT_EQ(served.reason, Reason::PackageMetadataInvalid);
    EXPECT_NE(served.detail.find("does not decode"), std::string::npos) << served.detail;
    EXPECT_TRUE(served.body.empty());
  }
  {
    // Not gzip at all: refused as it comes.
    MetadataHold hold;
    startHolding(hold, nullptr, "/left-pad", "gzip");
    EXPECT_EQ(feed(hold, packument(), detail), Reason::PackageMetadataInvalid);
    EXPECT_NE(detail.find("does not decode"), std::string::npos) << detail;
  }
  {
    // Decoded, but not JSON.
    MetadataHold hold;
    startHolding(hold, nullptr);
    EXPECT_EQ(feed(hold, "{\"versions\":", detail), Reason::None);
    EXPECT_EQ(
        hold.finish(policy::PackageSettings{}, MetadataFacts{&advisories(), 0, nullptr}).reason,
        Reason::PackageMetadataInvalid);
  }
}

TEST(MetadataHold, AVersionDocumentIsRefusedOrServedWithNothingRemoved) {
  const struct {
    std::string version;
    Reason reason;
  } cases[] = {{"1.2.0", Reason::PackageMalicious}, {"1.1.0", Reason::None}};
  for (const auto& c : cases) {
    MetadataHold hold;
    startHolding(hold, nullptr, "/left-pad/latest");
    std::string detail;
    const std::string doc = manifest(c.version);
    ASSERT_EQ(feed(hold, doc, detail), Reason::None);
    const ServedMetadata& served =
        hold.finish(policy::PackageSettings{}, MetadataFacts{&advisories(), 0, nullptr});
    EXPECT_EQ(served.reason, c.reason) << c.version;
    if (c.reason == Reason::None) {
      EXPECT_EQ(served.body, doc);
      EXPECT_EQ(hold.servedHead().headers.find("Sluice-Removed"), "0");
    } else {
      EXPECT_EQ(served.advisory, kMalId);
    }
  }
}

}  // namespace
}  // namespace sluice::proxy::session
