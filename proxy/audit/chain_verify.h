#pragma once
// Checking an audit log's hash chain (docs/audit.md#the-chain): each line ends with
// `,"chain":"<64 hex>"}`, the sha256 of the previous line's chain value (64 "0"s before the
// first line) followed by this line's bytes up to `,"chain"`. The first line that does not
// satisfy that is where the log was edited, cut, reordered or truncated.
//
// Sans-IO: the caller feeds lines as it reads them (`sluice audit verify` streams the file, so
// a log of any size is checked in constant memory).

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::proxy::audit {

class ChainVerifier {
 public:
  // One line, without its '\n'. `complete` is false for a last line with no '\n' after it (a
  // write cut short). Returns false at the first bad line; later calls return false too.
  bool feed(std::string_view line, bool complete = true);

  bool ok() const { return error_.empty(); }
  std::uint64_t records() const { return records_; }  // lines that verified
  std::uint64_t badLine() const { return bad_line_; }  // 1-based; 0 while ok()
  const std::string& error() const { return error_; }

 private:
  bool fail(std::string why);

  std::string previous_ = std::string(64, '0');
  std::uint64_t records_ = 0;
  std::uint64_t bad_line_ = 0;
  std::string error_;
};

}  // namespace sluice::proxy::audit
