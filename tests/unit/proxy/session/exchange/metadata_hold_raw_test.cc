// MetadataHold's pass-through (docs/packages.md#metadata): a document filtering left whole, that
// the origin sent gzip'd, goes to a client that takes gzip as the origin's own bytes; anything
// else (a version removed, a client without gzip, a gzip stream longer than the document's
// bound) is served identity. The copy of the origin's bytes is charged to the sandbox, and
// dropped (its charge given back) once it passes max_metadata.

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "policy/package_request.h"
#include "proxy/packages/gzip_codec.h"
#include "proxy/session/exchange/metadata_hold.h"

namespace sluice::proxy::session {
namespace {

using policy::Ecosystem;
using policy::Reason;

constexpr std::uint64_t kMaxDocument = 1 << 20;

const packages::AdvisoryIndex& advisories() {
  static const packages::AdvisoryIndex index([] {
    std::vector<packages::AdvisoryEntry> entries(1);
    entries[0].id = "MAL-2025-1";
    entries[0].malicious = true;
    entries[0].ecosystem = Ecosystem::Npm;
    entries[0].name = "left-pad";
    entries[0].versions = {"1.2.0"};
    return entries;
  }());
  return index;
}

std::string packument(bool with_malicious) {
  std::string doc = R"({"name":"left-pad","dist-tags":{"latest":"1.1.0"},"versions":{"1.1.0":)"
                    R"({"name":"left-pad","version":"1.1.0"})";
  if (with_malicious) {
    doc += R"(,"1.2.0":{"name":"left-pad","version":"1.2.0"})";
  }
  return doc + "}}";
}

std::string gzipped(std::string_view plain) {
  std::string out;
  EXPECT_TRUE(packages::deflateGzip(plain, out, 6));
  return out;
}

// `gzip` with `blocks` empty stored deflate blocks after its 10-byte header: the same document,
// `blocks` x 5 more bytes of stream (RFC 1951 §3.2.4: BFINAL 0, BTYPE 00, LEN 0, NLEN 0xffff).
std::string withEmptyBlocks(const std::string& gzip, std::size_t blocks) {
  std::string out = gzip.substr(0, 10);
  for (std::size_t i = 0; i < blocks; ++i) {
    out.append(std::string_view("\x00\x00\x00\xff\xff", 5));
  }
  return out + gzip.substr(10);
}

struct Served {
  Reason reason;
  std::string body;
  std::optional<std::string> coding;  // (copied: the head goes with the hold)
  std::string length;
  std::size_t held_before_reset;
};

Served serve(const std::string& body, std::string_view client_coding, std::string_view coding,
             std::atomic<std::size_t>& held) {
  MetadataHold hold;
  hold.plan(policy::recognizePackageRequest(policy::RegistrySettings{Ecosystem::Npm, "/"}, "GET",
                                            "/left-pad"),
            "", kMaxDocument, &held, false, client_coding);
  http::ResponseHead head;
  head.status = 200;
  head.framing = http::ResponseFraming::Chunked;
  head.headers.add("Content-Type", "application/json");
  head.headers.add("Content-Encoding", coding);
  std::string detail;
  EXPECT_EQ(hold.holdHead(head, detail), Reason::None) << detail;
  for (std::size_t at = 0; at < body.size(); at += 65536) {
    const std::string_view piece = std::string_view(body).substr(at, 65536);
    EXPECT_EQ(hold.feed(std::span<const char>(piece.data(), piece.size()), detail), Reason::None)
        << detail;
  }
  Served out;
  out.reason =
      hold.finish(policy::PackageSettings{}, MetadataFacts{&advisories(), 0, nullptr}).reason;
  const http::ResponseHead& served = hold.servedHead();
  const std::span<const char> bytes = hold.servedBody();
  out.body.assign(bytes.data(), bytes.size());
  if (const auto served_coding = served.headers.find("Content-Encoding")) {
    out.coding.emplace(*served_coding);
  }
  out.length = std::string(served.headers.find("Content-Length").value_or(""));
  out.held_before_reset = held.load();
  return out;
}

TEST(MetadataHoldPassThrough, AWholeDocumentGoesAsTheOriginsGzipToAClientThatTakesGzip) {
  const std::string plain = packument(false);
  const std::string body = gzipped(plain);
  std::atomic<std::size_t> held{0};
  const Served served = serve(body, "gzip, deflate", "gzip", held);
  ASSERT_EQ(served.reason, Reason::None);
  EXPECT_EQ(served.body, body);
  EXPECT_EQ(served.coding, "gzip");
  EXPECT_EQ(served.length, std::to_string(body.size()));
  EXPECT_EQ(served.held_before_reset, plain.size() + body.size());  // both copies charged
  EXPECT_EQ(held.load(), 0u);
}

TEST(MetadataHoldPassThrough, AnythingElseIsServedIdentity) {
  struct Case {
    const char* what;
    bool with_malicious;
    std::string_view client_coding;
  };
  for (const Case& c :
       {Case{"a version removed", true, "gzip"}, Case{"a client without gzip", false, ""},
        Case{"a client that refuses gzip", false, "gzip;q=0, identity"}}) {
    SCOPED_TRACE(c.what);
    std::atomic<std::size_t> held{0};
    const Served served =
        serve(gzipped(packument(c.with_malicious)), c.client_coding, "gzip", held);
    ASSERT_EQ(served.reason, Reason::None);
    EXPECT_EQ(served.body, packument(false));  // the filtered document, decoded
    EXPECT_FALSE(served.coding.has_value());
    EXPECT_EQ(served.length, std::to_string(served.body.size()));
  }
}

TEST(MetadataHoldPassThrough, AGzipStreamLongerThanTheBoundIsNotKept) {
  const std::string plain = packument(false);
  // Empty blocks: over 1 MiB of stream for a document of a hundred bytes.
  const std::string body = withEmptyBlocks(gzipped(plain), (kMaxDocument / 5) + 10);
  ASSERT_GT(body.size(), kMaxDocument);
  std::atomic<std::size_t> held{0};
  const Served served = serve(body, "gzip", "gzip", held);
  ASSERT_EQ(served.reason, Reason::None);
  EXPECT_EQ(served.body, plain);
  EXPECT_FALSE(served.coding.has_value());
  EXPECT_EQ(served.held_before_reset, plain.size()) << "the dropped copy's charge went back";
  EXPECT_EQ(held.load(), 0u);
}

}  // namespace
}  // namespace sluice::proxy::session
