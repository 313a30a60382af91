#include "proxy/session/exchange/metadata_hold.h"

#include <array>
#include <charconv>

#include "base/ascii.h"

namespace sluice::proxy::session {
namespace {

// The origin's fields that describe the body it sent, not the one sluice sends: its length,
// coding, type, validators (a later conditional request would be answered for the origin's
// document), digests, ranges, and its own Vary (sluice's varies by what it negotiates).
// Sluice-Removed is sluice's to write.
constexpr std::array<std::string_view, 13> kOriginBodyFields = {
    "Content-Length", "Content-Encoding", "Content-Type",  "ETag",
    "Last-Modified",  "Content-MD5",      "Digest",        "Content-Digest",
    "Repr-Digest",    "Content-Range",    "Accept-Ranges", "Vary",
    "Sluice-Removed"};

bool describesOriginBody(std::string_view name) {
  for (std::string_view field : kOriginBodyFields) {
    if (ascii::iequals(name, field)) {
      return true;
    }
  }
  return false;
}

// The one coding of the body, from every Content-Encoding field (two fields are a list).
packages::ContentCoding codingOf(const http::HeaderBlock& headers) {
  packages::ContentCoding coding = packages::ContentCoding::Identity;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    if (!ascii::iequals(headers.name(i), "Content-Encoding")) {
      continue;
    }
    const packages::ContentCoding this_one = packages::parseContentEncoding(headers.value(i));
    if (this_one == packages::ContentCoding::Identity) {
      continue;
    }
    coding = coding == packages::ContentCoding::Identity ? this_one
                                                         : packages::ContentCoding::Unsupported;
  }
  return coding;
}

}  // namespace

void MetadataHold::reset() {
  if (sandbox_held_ != nullptr && charged_ > 0) {
    sandbox_held_->fetch_sub(charged_, std::memory_order_relaxed);
  }
  charged_ = 0;
  sandbox_held_ = nullptr;
  planned_ = false;
  holding_ = false;
  replaced_ = false;
  inflater_.reset();
  // A document's memory is given back, not kept for the next request: metadata is rare among
  // a connection's requests and may be tens of MiB.
  std::string().swap(document_);
  std::string().swap(raw_);
  keeps_raw_ = false;
  serves_raw_ = false;
  served_.clear();
  std::string().swap(served_.body);
}

void MetadataHold::plan(const policy::PackageRequest& package, std::string_view client_accept,
                        std::uint64_t max_document, std::atomic<std::size_t>* sandbox_held,
                        bool needs_times, std::string_view client_coding) {
  reset();
  planned_ = true;
  package_ = package;
  form_ = package.form == policy::MetadataForm::PypiSimple ? simplePageFormFor(client_accept)
                                                           : SimplePageForm::Html;
  max_document_ = max_document;
  sandbox_held_ = sandbox_held;
  needs_times_ = needs_times;
  client_takes_gzip_ = packages::acceptsGzip(client_coding);
}

void MetadataHold::requestFields(std::vector<http::HeaderField>& fields) const {
  bool sets_coding = false;  // credential brokering asks for identity already
  for (const http::HeaderField& field : fields) {
    sets_coding |= ascii::iequals(field.name, "Accept-Encoding");
  }
  if (!sets_coding) {
    fields.push_back({"Accept-Encoding", "gzip"});
  }
  // A whole 200 to filter: no 304 for a copy the client kept (of another policy's filtering,
  // or none), no 206 of bytes sluice could not filter.
  for (std::string_view dropped : {"If-None-Match", "If-Modified-Since", "If-Range", "Range"}) {
    fields.push_back({dropped, ""});
  }
  if (package_.form == policy::MetadataForm::PypiSimple) {
    fields.push_back({"Accept", kSimplePageAccept});
  } else if (package_.form == policy::MetadataForm::NpmPackument && needs_times_) {
    fields.push_back({"Accept", "application/json"});  // the abbreviated form has no `time`
  }
}

policy::Reason MetadataHold::holdHead(const http::ResponseHead& head, std::string& detail) {
  holding_ = false;
  if (!planned_ || head.status / 100 != 2 || head.framing == http::ResponseFraming::None) {
    return policy::Reason::None;  // no document: passes as it is
  }
  if (head.status != 200) {
    detail = "the origin answered " + std::to_string(head.status) +
             " to a request for the whole document; only a 200 is filtered and served "
             "(docs/packages.md#metadata)";
    return policy::Reason::PackageMetadataInvalid;
  }
  const packages::ContentCoding coding = codingOf(head.headers);
  if (coding == packages::ContentCoding::Unsupported) {
    detail =
        "the origin's document has a content coding sluice did not ask for and cannot "
        "decode; it is not passed on unfiltered (docs/packages.md#metadata)";
    return policy::Reason::PackageMetadataInvalid;
  }
  origin_head_.headers = head.headers;
  origin_head_.keep_alive = head.keep_alive;
  content_type_.assign(head.headers.find("Content-Type").value_or(std::string_view()));
  inflater_.emplace(coding, static_cast<std::size_t>(max_document_), document_);
  keeps_raw_ = coding == packages::ContentCoding::Gzip && client_takes_gzip_;
  holding_ = true;
  replaced_ = true;
  return policy::Reason::None;
}

policy::Reason MetadataHold::feed(std::span<const char> data, std::string& detail) {
  const packages::InflateResult result =
      inflater_->feed(std::string_view(data.data(), data.size()));
  if (result.status == packages::InflateStatus::TooLarge) {
    detail = "the origin's document is larger than packages.max_metadata (" +
             std::to_string(max_document_) +
             " bytes decoded), which sluice holds whole to "
             "filter it; it is not passed on unfiltered (docs/packages.md#metadata)";
    return policy::Reason::PackageMetadataTooLarge;
  }
  if (!result.ok()) {
    detail =
        "the origin's document does not decode: " + result.message + " (docs/packages.md#metadata)";
    return policy::Reason::PackageMetadataInvalid;
  }
  if (keeps_raw_ && raw_.size() + data.size() > max_document_) {
    // gzip'd bytes are nearly always fewer than what they inflate to, but a stream of empty
    // blocks is not: past the document's bound the copy goes, and the document is served
    // identity.
    keeps_raw_ = false;
    std::string().swap(raw_);
  }
  if (keeps_raw_) {
    raw_.append(data.data(), data.size());
  }
  const std::size_t held = document_.size() + raw_.size();
  if (held < charged_ && sandbox_held_ != nullptr) {
    sandbox_held_->fetch_sub(charged_ - held, std::memory_order_relaxed);
    charged_ = held;
  }
  return charge(held - charged_, detail);
}

policy::Reason MetadataHold::charge(std::size_t bytes, std::string& detail) {
  if (bytes == 0 || sandbox_held_ == nullptr) {
    return policy::Reason::None;
  }
  const std::uint64_t limit = max_document_ * policy::PackageSettings::kMetadataDocumentsHeld;
  const std::size_t before = sandbox_held_->fetch_add(bytes, std::memory_order_relaxed);
  if (before + bytes > limit) {
    sandbox_held_->fetch_sub(bytes, std::memory_order_relaxed);
    detail = "the sandbox's requests already hold " + std::to_string(before) +
             " bytes of registry metadata for filtering, of the " + std::to_string(limit) +
             " it may (4 times packages.max_metadata); try again when they are served "
             "(docs/packages.md#metadata)";
    return policy::Reason::PackageMetadataBusy;
  }
  charged_ += bytes;
  return policy::Reason::None;
}

const ServedMetadata& MetadataHold::finish(const policy::PackageSettings& settings,
                                           const MetadataFacts& facts) {
  served_.clear();
  const packages::InflateResult result = inflater_->finish();
  inflater_.reset();
  holding_ = false;
  if (!result.ok()) {
    served_.reason = policy::Reason::PackageMetadataInvalid;
    served_.detail =
        "the origin's document does not decode: " + result.message + " (docs/packages.md#metadata)";
    return served_;
  }
  document_.reserve(document_.size() + packages::kMetadataPadding);
  serveFilteredMetadata(settings, facts, package_, content_type_, form_, document_, served_);
  serves_raw_ = keeps_raw_ && served_.reason == policy::Reason::None &&
                served_.body.size() == document_.size() && served_.body == document_;
  return served_;
}

const http::ResponseHead& MetadataHold::servedHead() {
  http::ResponseHead& head = served_head_;
  head.status = 200;
  head.reason = {};
  head.http_major = 1;
  head.http_minor = 1;
  head.headers.clear();
  const http::HeaderBlock& origin = origin_head_.headers;
  for (std::size_t i = 0; i < origin.size(); ++i) {
    if (!describesOriginBody(origin.name(i))) {
      head.headers.add(origin.name(i), origin.value(i));
    }
  }
  // (As an origin's head has it: HTTP/1.1 writes the length from the framing, HTTP/2 sends
  // the field.)
  char length[24];
  const std::to_chars_result length_end =
      std::to_chars(length, length + sizeof length, servedBody().size());
  head.headers.add("Content-Length",
                   std::string_view(length, static_cast<std::size_t>(length_end.ptr - length)));
  head.headers.add("Content-Type", served_.content_type);
  if (serves_raw_) {
    head.headers.add("Content-Encoding", "gzip");
  }
  head.headers.add("Vary", "Accept, Accept-Encoding");
  char count[24];
  const std::to_chars_result written =
      std::to_chars(count, count + sizeof count, served_.removed.size());
  head.headers.add("Sluice-Removed",
                   std::string_view(count, static_cast<std::size_t>(written.ptr - count)));
  head.framing = http::ResponseFraming::ContentLength;
  head.has_content_length = true;
  head.content_length = servedBody().size();
  head.keep_alive = origin_head_.keep_alive;
  return head;
}

std::span<const char> MetadataHold::servedBody() const {
  const std::string& body = serves_raw_ ? raw_ : served_.body;
  return {body.data(), body.size()};
}

}  // namespace sluice::proxy::session
