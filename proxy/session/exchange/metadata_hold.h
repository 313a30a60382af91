#pragma once
// A registry's metadata held whole on its way to the sandbox, to be filtered
// (docs/packages.md#metadata). The exchange asks the origin for a document it can read (gzip or
// identity, the PyPI form with upload times, never a conditional answer), holds the 200's body
// decoded as it comes, then sends the document proxy/runtime/package_metadata.h serves in its
// place with a head of sluice's: nothing of the origin's body reaches the client unfiltered.
//
// Memory: the decoded document, at most the policy's `max_metadata` (past it:
// package_metadata_too_large), is charged as it grows to its sandbox's count across workers
// (SandboxRuntime::metadata_held), which holds at most kMetadataDocumentsHeld documents' worth
// (past it: package_metadata_busy). The charge is given back when the exchange is over or
// reused. Filtering's own working memory is at most about the document again, for its moment.

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "policy/reason.h"
#include "proxy/http/header_block.h"
#include "proxy/http/response_parser.h"
#include "proxy/packages/gzip_codec.h"
#include "proxy/packages/metadata_json.h"
#include "proxy/runtime/package_metadata.h"

namespace sluice::proxy::session {

class MetadataHold {
 public:
  MetadataHold() = default;
  ~MetadataHold() { reset(); }
  MetadataHold(const MetadataHold&) = delete;
  MetadataHold& operator=(const MetadataHold&) = delete;

  // Each request: whether its answer is held (filtersMetadata), the form a PyPI client is
  // served, the bound of one document and the sandbox's count it is charged to.
  void reset();
  // `needs_times`: the age rule applies, so an npm packument is asked for in its full form,
  // the one with `time` (the client's Accept for a packument takes it: npm's lists it).
  // `client_coding`: the client's Accept-Encoding ("" when it sent none).
  void plan(const policy::PackageRequest& package, std::string_view client_accept,
            std::uint64_t max_document, std::atomic<std::size_t>* sandbox_held,
            bool needs_times = false, std::string_view client_coding = "");
  bool planned() const { return planned_; }

  // The fields sluice writes in place of the client's (an empty value drops the client's
  // field: head_writer.h): appended to `fields`.
  void requestFields(std::vector<http::HeaderField>& fields) const;

  // The final head: true when its body is held (a 200 with a body); else it passes as it is
  // (an error, a redirect, a 304 the client asked for is none: the conditionals were dropped).
  // Reason None, or why the answer is refused before a byte of its body (a coding sluice
  // cannot read).
  policy::Reason holdHead(const http::ResponseHead& head, std::string& detail);
  bool holding() const { return holding_; }
  // The origin's body was held (and then served filtered, or refused): none of its bytes are
  // the client's to take, so the client's taking them reopens no origin window.
  bool replacesOriginBody() const { return replaced_; }
  // Body bytes as they come: None, or why the document is refused (too large, busy, a bad
  // coding); `detail` then says so.
  policy::Reason feed(std::span<const char> data, std::string& detail);
  // The body is whole: decoded to its end, then filtered. What is served (valid until the
  // next reset): the document, or the refusal.
  const ServedMetadata& finish(const policy::PackageSettings& settings, const MetadataFacts& facts);
  // The head sent with the served document (valid until the next reset): the origin's fields
  // less those that describe its body (length, coding, type, validators, digests, ranges,
  // Vary), then sluice's type, `Vary: Accept, Accept-Encoding` and `Sluice-Removed` (the
  // number of versions removed), with a Content-Length (and `Content-Encoding: gzip` when the
  // body is the origin's gzip'd bytes: servedBody()).
  const http::ResponseHead& servedHead();
  // The served document's bytes. When filtering changed nothing (the filtered document is the
  // decoded one, byte for byte), the origin came gzip'd and the client takes gzip: the origin's
  // own gzip'd bytes, which decode to exactly that document (the inflater checked the stream
  // to its end and its CRC). So an install that has nothing removed is sent what it would
  // have been sent without sluice, not several times as many bytes. Else the filtered
  // document, identity.
  std::span<const char> servedBody() const;

 private:
  policy::Reason charge(std::size_t bytes, std::string& detail);

  bool planned_ = false;
  bool holding_ = false;
  bool replaced_ = false;
  policy::PackageRequest package_;
  SimplePageForm form_ = SimplePageForm::Html;
  bool needs_times_ = false;
  std::uint64_t max_document_ = 0;
  std::atomic<std::size_t>* sandbox_held_ = nullptr;
  std::size_t charged_ = 0;
  http::ResponseHead origin_head_;  // its fields (its reason phrase is not kept)
  std::string content_type_;
  std::string document_;
  // The body as it came, when it came gzip'd and the client takes gzip (servedBody()).
  std::string raw_;
  bool keeps_raw_ = false;
  bool client_takes_gzip_ = false;
  bool serves_raw_ = false;
  std::optional<packages::Inflater> inflater_;
  ServedMetadata served_;
  http::ResponseHead served_head_;
};

}  // namespace sluice::proxy::session
