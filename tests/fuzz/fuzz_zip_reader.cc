// libFuzzer target for the reader of OSV's advisory zips (proxy/packages/zip_reader.h): the
// operator downloads them, so they are as hostile as whatever served the download.
// Parser files: proxy/packages/zip_reader.cc, proxy/packages/gzip_codec.cc (raw deflate)
//
// Input: byte 0 is max_entries (0-255), byte 1 max_member_size in 256-byte steps (0 to
// 65,280); the rest is the archive.
// Invariants, each a trap on violation:
//   - an opened archive has at most max_entries members, none a directory; every member's
//     name and compressed bytes lie within the archive, no two members' bytes overlap, a
//     stored member's bytes are its size, and no size exceeds max_member_size;
//   - an extracted member is exactly its recorded size and CRC-32, and lies in the archive
//     (stored) or in the scratch string (deflated), whose capacity never exceeds the member
//     bound (but for libstdc++'s 30 bytes of a tiny string);
//   - forEachZipMember visits the same names and bytes, in order, and fails exactly when
//     open() or an extract() does.

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "proxy/packages/zip_reader.h"

namespace {

namespace pk = sluice::proxy::packages;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

bool within(std::string_view part, std::string_view whole) {
  const auto begin = reinterpret_cast<std::uintptr_t>(whole.data());
  const auto at = reinterpret_cast<std::uintptr_t>(part.data());
  return part.empty() || (at >= begin && at + part.size() <= begin + whole.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) {
    return 0;
  }
  const pk::ZipLimits limits{data[0], std::uint64_t{data[1]} * 256};
  // An exact-size heap copy, so ASan flags any read past the archive.
  const std::size_t archive_size = size - 2;
  std::unique_ptr<char[]> copy(new char[archive_size == 0 ? 1 : archive_size]);
  std::memcpy(copy.get(), data + 2, archive_size);
  const std::string_view archive(copy.get(), archive_size);

  std::vector<std::pair<std::string, std::string>> expected;
  bool all_ok = false;
  auto reader = pk::ZipReader::open(archive, limits);
  if (reader.ok()) {
    check(reader->size() <= limits.max_entries);
    std::vector<std::pair<const char*, std::size_t>> spans;
    for (std::size_t i = 0; i < reader->size(); ++i) {
      const pk::ZipMember& member = reader->member(i);
      check(reader->name(i) == member.name);
      check(within(member.name, archive) && within(member.compressed, archive));
      check(member.name.empty() || member.name.back() != '/');
      check(member.size <= limits.max_member_size);
      check(member.method != pk::ZipMethod::Stored || member.compressed.size() == member.size);
      if (!member.compressed.empty()) {
        spans.emplace_back(member.compressed.data(), member.compressed.size());
      }
    }
    std::sort(spans.begin(), spans.end());
    for (std::size_t k = 1; k < spans.size(); ++k) {
      check(spans[k - 1].first + spans[k - 1].second <= spans[k].first);
    }
    all_ok = true;
    std::string scratch;
    for (std::size_t i = 0; i < reader->size() && all_ok; ++i) {
      const pk::ZipMember& member = reader->member(i);
      auto bytes = reader->extract(i, scratch);
      check(scratch.capacity() <= std::max<std::uint64_t>(limits.max_member_size, 30));
      if (!bytes.ok()) {
        check(!bytes.error().empty());
        all_ok = false;
        break;
      }
      check(bytes->size() == member.size);
      check(crc32_z(0, reinterpret_cast<const Bytef*>(bytes->data()), bytes->size()) ==
            member.crc32);
      check(member.method == pk::ZipMethod::Stored ? within(*bytes, archive)
                                                   : within(*bytes, scratch));
      expected.emplace_back(member.name, *bytes);
    }
  }

  std::size_t visited = 0;
  const auto each = pk::forEachZipMember(
      archive, limits, [&](std::string_view name, std::string_view bytes) {
        check(visited < expected.size());
        check(name == expected[visited].first && bytes == expected[visited].second);
        ++visited;
      });
  check(each.ok() == all_ok);
  check(!all_ok || visited == expected.size());
  return 0;
}
