#include "proxy/packages/zip_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "proxy/packages/gzip_codec.h"

namespace sluice::proxy::packages {
namespace {

// Signatures and fixed sizes of APPNOTE.TXT §4.3.
constexpr std::uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr std::uint32_t kCentralEntrySignature = 0x02014b50;
constexpr std::uint32_t kEndSignature = 0x06054b50;
constexpr std::uint32_t kZip64EndSignature = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr std::size_t kLocalHeaderSize = 30;
constexpr std::size_t kCentralEntrySize = 46;
constexpr std::size_t kEndSize = 22;
constexpr std::size_t kZip64EndSize = 56;
constexpr std::size_t kZip64LocatorSize = 20;
constexpr std::size_t kMaxComment = 0xffff;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
// Flags: 0 encrypted, 6 strong encryption, 13 central directory encrypted (§4.4.4).
constexpr std::uint16_t kEncryptionFlags = 0x0001 | 0x0040 | 0x2000;

// Little-endian reads; the caller has checked that the bytes are there.
std::uint64_t readLe(std::string_view s, std::size_t at, std::size_t width) {
  std::uint64_t value = 0;
  for (std::size_t i = width; i-- > 0;) {
    value = value << 8 | static_cast<unsigned char>(s[at + i]);
  }
  return value;
}
std::uint16_t u16(std::string_view s, std::size_t at) {
  return static_cast<std::uint16_t>(readLe(s, at, 2));
}
std::uint32_t u32(std::string_view s, std::size_t at) {
  return static_cast<std::uint32_t>(readLe(s, at, 4));
}
std::uint64_t u64(std::string_view s, std::size_t at) { return readLe(s, at, 8); }

// Where the central directory is, from the end records.
struct Directory {
  std::uint64_t entries = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t ends_at = 0;  // where the end records begin: the directory must end there
};

using DirectoryResult = Result<Directory, std::string>;

// The ZIP64 end record through its locator, just before the end record at `end`.
DirectoryResult readZip64End(std::string_view archive, std::size_t locator) {
  if (u32(archive, locator + 4) != 0 || u32(archive, locator + 16) > 1) {
    return Err{std::string("a multi-disk archive")};
  }
  const std::uint64_t record = u64(archive, locator + 8);
  if (record > locator || locator - record < kZip64EndSize ||
      u32(archive, record) != kZip64EndSignature) {
    return Err{std::string("the ZIP64 end record is not where its locator says")};
  }
  // The record's size counts what follows its first 12 bytes; it must end at the locator.
  if (u64(archive, record + 4) != locator - record - 12) {
    return Err{std::string("the ZIP64 end record's size is inconsistent")};
  }
  const std::uint64_t entries_here = u64(archive, record + 24);
  Directory directory{u64(archive, record + 32), u64(archive, record + 48),
                      u64(archive, record + 40), record};
  if (u32(archive, record + 16) != 0 || u32(archive, record + 20) != 0 ||
      entries_here != directory.entries) {
    return Err{std::string("a multi-disk archive")};
  }
  return directory;
}

DirectoryResult findDirectory(std::string_view archive) {
  if (archive.size() < kEndSize) {
    return Err{std::string("too short to be a zip archive")};
  }
  // The end record is the last 22 bytes but for a comment of at most 65,535 bytes, whose
  // length it gives: the latest signature whose comment reaches exactly the end is the one.
  const std::size_t last = archive.size() - kEndSize;
  const std::size_t lowest = last > kMaxComment ? last - kMaxComment : 0;
  std::optional<std::size_t> end;
  for (std::size_t at = last + 1; at-- > lowest;) {
    if (u32(archive, at) == kEndSignature &&
        at + kEndSize + u16(archive, at + 20) == archive.size()) {
      end = at;
      break;
    }
  }
  if (!end) {
    return Err{std::string("no end of central directory record")};
  }
  const std::size_t at = *end;
  const std::uint16_t disk = u16(archive, at + 4);
  const std::uint16_t directory_disk = u16(archive, at + 6);
  const std::uint16_t entries_here = u16(archive, at + 8);
  Directory directory{u16(archive, at + 10), u32(archive, at + 16), u32(archive, at + 12), at};
  const bool saturated = disk == 0xffff || directory_disk == 0xffff || entries_here == 0xffff ||
                         directory.entries == 0xffff || directory.size == 0xffffffff ||
                         directory.offset == 0xffffffff;
  // As Go's archive/zip: the ZIP64 records are looked for only when a field needs them (a
  // count of exactly 65,535 entries is written without them by Python's zipfile).
  if (saturated && at >= kZip64LocatorSize &&
      u32(archive, at - kZip64LocatorSize) == kZip64LocatorSignature) {
    return readZip64End(archive, at - kZip64LocatorSize);
  }
  if (disk != 0 || directory_disk != 0 || entries_here != directory.entries) {
    return Err{std::string("a multi-disk archive")};
  }
  return directory;
}

// A name as a message may show it: printable ASCII, at most 64 bytes.
std::string shown(std::string_view name) {
  std::string text;
  for (char c : name.substr(0, 64)) {
    text.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  if (name.size() > 64) {
    text += "...";
  }
  return text;
}

// "entry 3 (name): what"; extract() counts members ("member 2"), directories left out.
std::string entryError(std::uint64_t index, std::string_view name, std::string_view what,
                       const char* kind = "entry") {
  std::string message = std::string(kind) + " " + std::to_string(index);
  if (!name.empty()) {
    message += " (" + shown(name) + ")";
  }
  message += ": ";
  message += what;
  return message;
}

// One central directory entry's fields, ZIP64 values applied.
struct CentralEntry {
  std::uint16_t flags = 0;
  std::uint16_t method = 0;
  std::uint32_t crc32 = 0;
  std::uint64_t compressed_size = 0;
  std::uint64_t size = 0;
  std::uint64_t local_offset = 0;
  std::uint32_t disk = 0;
  std::string_view name;
  std::string_view extra;
};

// Replaces the saturated fields by the ZIP64 extra field's values (§4.5.3: in this order, each
// present only when its field is saturated). False when one is missing.
bool applyZip64Extra(CentralEntry& entry) {
  const bool wants_size = entry.size == 0xffffffff;
  const bool wants_compressed = entry.compressed_size == 0xffffffff;
  const bool wants_offset = entry.local_offset == 0xffffffff;
  const bool wants_disk = entry.disk == 0xffff;
  if (!wants_size && !wants_compressed && !wants_offset && !wants_disk) {
    return true;
  }
  std::string_view extra = entry.extra;
  // As Go's archive/zip, fewer than four bytes left over (padding) end the list.
  while (extra.size() >= 4) {
    const std::uint16_t id = u16(extra, 0);
    const std::size_t length = u16(extra, 2);
    if (length > extra.size() - 4) {
      return false;
    }
    std::string_view field = extra.substr(4, length);
    extra.remove_prefix(4 + length);
    if (id != kZip64ExtraId) {
      continue;
    }
    const std::size_t needed = (wants_size ? 8 : 0) + (wants_compressed ? 8 : 0) +
                               (wants_offset ? 8 : 0) + (wants_disk ? 4 : 0);
    if (field.size() < needed) {
      return false;
    }
    for (std::uint64_t* value :
         {wants_size ? &entry.size : nullptr, wants_compressed ? &entry.compressed_size : nullptr,
          wants_offset ? &entry.local_offset : nullptr}) {
      if (value != nullptr) {
        *value = u64(field, 0);
        field.remove_prefix(8);
      }
    }
    if (wants_disk) {
      entry.disk = u32(field, 0);
    }
    return true;
  }
  return false;
}

struct ByteRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  bool operator<(const ByteRange& other) const { return begin < other.begin; }
};

}  // namespace

Result<ZipReader, std::string> ZipReader::open(std::string_view archive, const ZipLimits& limits) {
  DirectoryResult found = findDirectory(archive);
  if (!found.ok()) {
    return Err{std::move(found).error()};
  }
  const Directory directory = *found;
  if (directory.entries > limits.max_entries) {
    return Err{"the archive has " + std::to_string(directory.entries) + " entries, over the " +
               std::to_string(limits.max_entries) + " allowed"};
  }
  if (directory.offset > directory.ends_at ||
      directory.size != directory.ends_at - directory.offset) {
    return Err{std::string("the central directory does not end where the end record begins")};
  }
  if (directory.entries > directory.size / kCentralEntrySize) {
    return Err{std::string("the central directory is too small for its entries")};
  }
  const std::string_view central = archive.substr(directory.offset, directory.size);
  const std::uint64_t data_limit = directory.offset;  // members lie before the directory

  ZipReader reader;
  reader.members_.reserve(directory.entries);
  std::vector<ByteRange> ranges;
  ranges.reserve(directory.entries);
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < directory.entries; ++i) {
    if (central.size() - at < kCentralEntrySize || u32(central, at) != kCentralEntrySignature) {
      return Err{entryError(i, {}, "no central directory entry where one should be")};
    }
    CentralEntry entry;
    entry.flags = u16(central, at + 8);
    entry.method = u16(central, at + 10);
    entry.crc32 = u32(central, at + 16);
    entry.compressed_size = u32(central, at + 20);
    entry.size = u32(central, at + 24);
    const std::size_t name_length = u16(central, at + 28);
    const std::size_t extra_length = u16(central, at + 30);
    const std::size_t comment_length = u16(central, at + 32);
    entry.disk = u16(central, at + 34);
    entry.local_offset = u32(central, at + 42);
    if (central.size() - at - kCentralEntrySize < name_length + extra_length + comment_length) {
      return Err{entryError(i, {}, "its name, extra field or comment overruns the directory")};
    }
    entry.name = central.substr(at + kCentralEntrySize, name_length);
    entry.extra = central.substr(at + kCentralEntrySize + name_length, extra_length);
    at += kCentralEntrySize + name_length + extra_length + comment_length;

    const std::string_view name = entry.name;
    if (!applyZip64Extra(entry)) {
      return Err{entryError(i, name, "a saturated size or offset has no ZIP64 extra field")};
    }
    if (entry.disk != 0) {
      return Err{entryError(i, name, "a multi-disk archive")};
    }
    if ((entry.flags & kEncryptionFlags) != 0) {
      return Err{entryError(i, name, "encrypted")};
    }
    if (entry.method != 0 && entry.method != 8) {
      return Err{entryError(i, name,
                            "compression method " + std::to_string(entry.method) +
                                " (only stored and deflate are read)")};
    }
    if (entry.size > limits.max_member_size) {
      return Err{entryError(i, name,
                            std::to_string(entry.size) + " bytes uncompressed, over the " +
                                std::to_string(limits.max_member_size) + " allowed")};
    }
    if (entry.method == 0 && entry.compressed_size != entry.size) {
      return Err{entryError(i, name, "stored, but its two sizes differ")};
    }

    // The local header: inside the archive before the directory, agreeing with the entry.
    const std::uint64_t local = entry.local_offset;
    if (local > data_limit || data_limit - local < kLocalHeaderSize ||
        u32(archive, local) != kLocalHeaderSignature) {
      return Err{entryError(i, name, "no local header where the directory says")};
    }
    const std::uint16_t local_flags = u16(archive, local + 6);
    const std::uint16_t local_method = u16(archive, local + 8);
    const std::size_t local_name_length = u16(archive, local + 26);
    const std::size_t local_extra_length = u16(archive, local + 28);
    const std::uint64_t data = local + kLocalHeaderSize + local_name_length + local_extra_length;
    if (data > data_limit || data_limit - data < entry.compressed_size) {
      return Err{entryError(i, name, "its data lies outside the archive's members")};
    }
    if (local_method != entry.method || local_name_length != name_length ||
        archive.substr(local + kLocalHeaderSize, name_length) != name) {
      return Err{entryError(i, name, "the local header disagrees with the directory")};
    }
    if ((local_flags & kEncryptionFlags) != 0) {
      return Err{entryError(i, name, "encrypted")};
    }
    ranges.push_back({local, data + entry.compressed_size});
    if (!name.empty() && name.back() == '/') {
      continue;  // a directory
    }
    ZipMember member;
    member.name = name;
    member.compressed = archive.substr(data, entry.compressed_size);
    member.size = entry.size;
    member.crc32 = entry.crc32;
    member.method = entry.method == 0 ? ZipMethod::Stored : ZipMethod::Deflated;
    reader.members_.push_back(member);
  }
  if (at != central.size()) {
    return Err{std::string("the central directory holds more than its count of entries")};
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t k = 1; k < ranges.size(); ++k) {
    if (ranges[k].begin < ranges[k - 1].end) {
      return Err{"two entries overlap at offset " + std::to_string(ranges[k].begin)};
    }
  }
  return reader;
}

Result<std::string_view, std::string> ZipReader::extract(std::size_t i,
                                                         std::string& scratch) const {
  const ZipMember& member = members_[i];
  std::string_view bytes = member.compressed;
  if (member.method == ZipMethod::Deflated) {
    scratch.clear();
    // At most the recorded size: one byte more is TooLarge, and the bound of open() holds.
    Inflater inflater(Inflater::RawDeflate{}, static_cast<std::size_t>(member.size), scratch);
    InflateResult result = inflater.feed(member.compressed);
    if (result.ok()) {
      result = inflater.finish();
    }
    if (result.status == InflateStatus::TooLarge) {
      return Err{entryError(i, member.name, "inflates past its recorded size", "member")};
    }
    if (!result.ok()) {
      return Err{entryError(i, member.name, result.message, "member")};
    }
    if (scratch.size() != member.size) {
      return Err{entryError(i, member.name,
                            "inflates to " + std::to_string(scratch.size()) +
                                " bytes, its recorded size is " + std::to_string(member.size),
                            "member")};
    }
    bytes = scratch;
  }
  const uLong crc = crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
  if (crc != member.crc32) {
    return Err{entryError(i, member.name, "CRC-32 mismatch", "member")};
  }
  return bytes;
}

Result<Ok, std::string> forEachZipMember(
    std::string_view archive, const ZipLimits& limits,
    const std::function<void(std::string_view name, std::string_view bytes)>& visit) {
  Result<ZipReader, std::string> reader = ZipReader::open(archive, limits);
  if (!reader.ok()) {
    return Err{std::move(reader).error()};
  }
  std::string scratch;
  for (std::size_t i = 0; i < reader->size(); ++i) {
    Result<std::string_view, std::string> bytes = reader->extract(i, scratch);
    if (!bytes.ok()) {
      return Err{std::move(bytes).error()};
    }
    visit(reader->name(i), *bytes);
  }
  return Ok{};
}

}  // namespace sluice::proxy::packages
