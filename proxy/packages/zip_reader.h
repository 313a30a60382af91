#pragma once
// A ZIP archive held in memory (APPNOTE.TXT 6.3), as OSV publishes advisories per ecosystem
// (`all.zip`: thousands of small JSON members, deflated or stored; docs/packages.md#advisories).
// Sans-IO: the caller reads the file; this reads bytes.
//
// An archive is read whole or refused: open() checks every entry before any is extracted, so
// an advisory the reader could not read is never silently left out of what sluice enforces.
// Refused: no end record (searched backwards within the last 65,557 bytes), more than one
// disk, bytes between the central directory and the end records (an archive with a prefix
// included), a central directory that does not hold exactly its count of entries, more
// entries than Limits::max_entries, an encrypted entry (flags bits 0, 6, 13), a method other
// than stored (0) and deflate (8), a stored entry whose sizes differ, an uncompressed size
// over Limits::max_member_size, a local header that is not where its entry says, or names
// another method or name, member data outside the archive or past the start of the central
// directory, and two members whose bytes overlap (the overlapping-member zip bomb). ZIP64 is
// read: the end-of-central-directory locator and record (when the 16- or 32-bit fields are
// saturated) and an entry's ZIP64 extra field for its sizes and offset. Data descriptors (flag
// bit 3) are allowed: the central directory's CRC-32 and sizes are the ones checked.
// Directory entries (names ending in '/') are checked, then skipped. Names are reported as
// they are, never used as paths.
//
// Bounds: open() is O(n log n) in the entries, holds one ZipMember (48 bytes, spans into the
// archive) and one range (16 bytes) per entry, at most max_entries of them; no recursion.
// extract() inflates at most the member's recorded size (itself at most max_member_size) plus
// one byte, reserving as it goes (gzip_codec.h), in time linear in the member's bytes.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace sluice::proxy::packages {

struct ZipLimits {
  std::size_t max_entries = std::size_t{1} << 20;          // central directory entries, all kinds
  std::uint64_t max_member_size = std::uint64_t{4} << 20;  // uncompressed bytes of one member
};

enum class ZipMethod : std::uint8_t { Stored = 0, Deflated = 8 };

struct ZipMember {
  std::string_view name;        // as recorded: hostile bytes, for messages and matching only
  std::string_view compressed;  // the member's data, a span of the archive
  std::uint64_t size = 0;       // uncompressed, as the central directory records it
  std::uint32_t crc32 = 0;      // as the central directory records it
  ZipMethod method = ZipMethod::Stored;
};

class ZipReader {
 public:
  // The archive must outlive the reader: members are spans of it.
  static Result<ZipReader, std::string> open(std::string_view archive, const ZipLimits& limits);

  // Members that are files (directory entries skipped), in central directory order.
  std::size_t size() const { return members_.size(); }
  const ZipMember& member(std::size_t i) const { return members_[i]; }
  std::string_view name(std::size_t i) const { return members_[i].name; }

  // The bytes of member `i`, checked against its CRC-32 and uncompressed size: a span of the
  // archive for a stored member, else of `scratch` (cleared, then inflated into; reuse it
  // across calls to keep its capacity).
  Result<std::string_view, std::string> extract(std::size_t i, std::string& scratch) const;

 private:
  ZipReader() = default;
  std::vector<ZipMember> members_;
};

// Opens `archive` and hands each file member's name and bytes to `visit`, in order; stops at
// the first error (an archive is read whole or refused: a member already visited before a
// failing one should be discarded by the caller).
Result<Ok, std::string> forEachZipMember(
    std::string_view archive, const ZipLimits& limits,
    const std::function<void(std::string_view name, std::string_view bytes)>& visit);

}  // namespace sluice::proxy::packages
