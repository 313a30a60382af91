#include "proxy/audit/chain_verify.h"

#include "proxy/audit/audit_log.h"

namespace sluice::proxy::audit {

namespace {

constexpr std::string_view kChainMember = ",\"chain\":\"";
constexpr std::size_t kHexLength = 64;
// `,"chain":"` + 64 hex + `"}`
constexpr std::size_t kTrailerLength = kChainMember.size() + kHexLength + 2;

bool isLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool ChainVerifier::fail(std::string why) {
  bad_line_ = records_ + 1;
  error_ = std::move(why);
  return false;
}

bool ChainVerifier::feed(std::string_view line, bool complete) {
  if (!ok()) {
    return false;
  }
  if (!complete) {
    return fail("the last line is incomplete (no newline: the file was cut mid-record)");
  }
  if (line.size() < kTrailerLength + 1 || line.front() != '{' ||
      line.substr(line.size() - kTrailerLength, kChainMember.size()) != kChainMember ||
      line.substr(line.size() - 2) != "\"}") {
    return fail("not an audit record ending in its \"chain\" member");
  }
  std::string_view body = line.substr(0, line.size() - kTrailerLength);
  std::string_view stated = line.substr(line.size() - kHexLength - 2, kHexLength);
  if (!isLowerHex(stated)) {
    return fail("the chain value is not 64 lower-case hex digits");
  }
  std::string expected = chainOf(previous_, body);
  if (expected != stated) {
    return fail(records_ == 0
                    ? "chain mismatch: the record was edited, or records before it were removed"
                    : "chain mismatch: the record was edited, or a record before it was removed "
                      "or moved");
  }
  previous_.assign(stated);
  ++records_;
  return true;
}

}  // namespace sluice::proxy::audit
