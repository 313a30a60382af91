#include "proxy/packages/zip_reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace pk = sluice::proxy::packages;

// Made by Python 3.11's zipfile (timestamps 2025-01-01):
//   with zipfile.ZipFile(b, 'w') as z:
//       z.writestr(info('npm/', ZIP_STORED), b'')
//       z.writestr(info('npm/MAL-2025-1.json', ZIP_DEFLATED), b'{"id":"MAL-2025-1",...}')
//       z.writestr(info('stored.json', ZIP_STORED), b'{"id":"GHSA-1"}')
//       with z.open(info('zip64.json', ZIP_DEFLATED), 'w', force_zip64=True) as f:
//           f.write(b'{"id":"PYSEC-1"}' * 3)
//       z.comment = b'osv'
constexpr std::string_view kPythonArchiveHex =
    "504b03041400000000000000215a000000000000000000000000040000006e706d2f504b03041400000008000000"
    "215adab1ecee4b0000004e000000130000006e706d2f4d414c2d323032352d312e6a736f6eab56ca4c51b252f275"
    "f4d135323032d53554d2514a4c4b4b4d2e49058a47572b1524266727a6a72a59552ba526e717571697a4e60235e4"
    "15e40255e625e602659452cb3273946a6b636b01504b03041400000000000000215a6c82a7c90f0000000f000000"
    "0b00000073746f7265642e6a736f6e7b226964223a22474853412d31227d504b03042d00000008000000215aa249"
    "81b2ffffffffffffffff0a0014007a697036342e6a736f6e0100100030000000000000001500000000000000ab56"
    "ca4c51b2520a880c7675d63554aaad26c00700504b010214031400000000000000215a0000000000000000000000"
    "000400000000000000000000008001000000006e706d2f504b010214031400000008000000215adab1ecee4b0000"
    "004e0000001300000000000000000000008001220000006e706d2f4d414c2d323032352d312e6a736f6e504b0102"
    "14031400000000000000215a6c82a7c90f0000000f0000000b000000000000000000000080019e00000073746f72"
    "65642e6a736f6e504b01022d032d00000008000000215aa24981b215000000300000000a00000000000000000000"
    "008001d60000007a697036342e6a736f6e504b05060000000004000400e40000002701000003006f7376";
// The same module writing to a stream it cannot seek: a data descriptor (flag bit 3) after
// the member, zeros in its local header.
constexpr std::string_view kPythonStreamedArchiveHex =
    "504b03041400080008000000215a0000000000000000000000000700000064642e6a736f6eab56ca4c51b2527271"
    "51aa0500504b0708c5ff6cf50d0000000b000000504b010214031400080008000000215ac5ff6cf50d0000000b00"
    "000007000000000000000000000080010000000064642e6a736f6e504b0506000000000100010035000000420000"
    "000000";

std::string fromHex(std::string_view hex) {
  std::string bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return bytes;
}

void putLe(std::string& out, std::uint64_t value, int width) {
  for (int i = 0; i < width; ++i) {
    out.push_back(static_cast<char>(value >> (8 * i) & 0xff));
  }
}

std::string rawDeflate(std::string_view plain) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, static_cast<uLong>(plain.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  z.avail_in = static_cast<uInt>(plain.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::uint32_t crcOf(std::string_view bytes) {
  return static_cast<std::uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

// A member as the test writer lays it out, and the ways a test can make it lie.
struct TestEntry {
  std::string name = {};
  std::string plain = {};
  std::uint16_t method = 8;
  std::uint16_t flags = 0;
  bool zip64 = false;       // central sizes and offset saturated, the values in a ZIP64 extra
  bool descriptor = false;  // flag bit 3: zeros in the local header, a descriptor after the data
  std::optional<std::string> data = {};  // the bytes stored instead of `plain` compressed
  std::optional<std::uint32_t> crc = {};
  std::optional<std::uint64_t> size = {};  // recorded uncompressed size
  std::optional<std::uint64_t> local_offset = {};
  std::optional<std::string> local_name = {};
  std::optional<std::uint16_t> local_method = {};
  std::optional<std::uint16_t> local_flags = {};
};

struct ArchiveOptions {
  bool zip64_end = false;
  std::optional<std::uint64_t> recorded_entries = {};
  std::string between = {};  // bytes between the central directory and the end records
  std::string comment = {};
};

struct Archive {
  std::string bytes;
  std::vector<std::size_t> local_offsets;
  std::size_t directory_offset = 0;
};

Archive buildZip(const std::vector<TestEntry>& entries, const ArchiveOptions& options = {}) {
  Archive archive;
  std::string& out = archive.bytes;
  struct Written {
    std::uint64_t offset, compressed, size;
    std::uint32_t crc;
  };
  std::vector<Written> written;
  for (const TestEntry& e : entries) {
    const std::string data = e.data ? *e.data : e.method == 8 ? rawDeflate(e.plain) : e.plain;
    const Written w{out.size(), data.size(), e.size.value_or(e.plain.size()),
                    e.crc.value_or(crcOf(e.plain))};
    const std::string local_name = e.local_name.value_or(e.name);
    archive.local_offsets.push_back(out.size());
    written.push_back(w);
    putLe(out, 0x04034b50, 4);
    putLe(out, 20, 2);
    putLe(out, e.local_flags.value_or(e.flags | (e.descriptor ? 8 : 0)), 2);
    putLe(out, e.local_method.value_or(e.method), 2);
    putLe(out, 0, 4);  // time and date
    putLe(out, e.descriptor ? 0 : w.crc, 4);
    putLe(out, e.descriptor ? 0 : w.compressed, 4);
    putLe(out, e.descriptor ? 0 : w.size, 4);
    putLe(out, local_name.size(), 2);
    putLe(out, 0, 2);
    out += local_name;
    out += data;
    if (e.descriptor) {
      putLe(out, 0x08074b50, 4);
      putLe(out, w.crc, 4);
      putLe(out, w.compressed, 4);
      putLe(out, w.size, 4);
    }
  }
  archive.directory_offset = out.size();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const TestEntry& e = entries[i];
    const Written& w = written[i];
    const std::uint64_t offset = e.local_offset.value_or(w.offset);
    std::string extra;
    if (e.zip64) {
      putLe(extra, 0x5455, 2);  // another field first: the reader must skip it
      putLe(extra, 5, 2);
      extra += std::string(5, '\0');
      putLe(extra, 1, 2);
      putLe(extra, 24, 2);
      putLe(extra, w.size, 8);
      putLe(extra, w.compressed, 8);
      putLe(extra, offset, 8);
    }
    putLe(out, 0x02014b50, 4);
    putLe(out, 0x031e, 2);
    putLe(out, e.zip64 ? 45 : 20, 2);
    putLe(out, e.flags | (e.descriptor ? 8 : 0), 2);
    putLe(out, e.method, 2);
    putLe(out, 0, 4);
    putLe(out, w.crc, 4);
    putLe(out, e.zip64 ? 0xffffffff : w.compressed, 4);
    putLe(out, e.zip64 ? 0xffffffff : w.size, 4);
    putLe(out, e.name.size(), 2);
    putLe(out, extra.size(), 2);
    putLe(out, 0, 2);  // comment
    putLe(out, 0, 2);  // disk
    putLe(out, 0, 2);  // internal attributes
    putLe(out, 0, 4);  // external attributes
    putLe(out, e.zip64 ? 0xffffffff : offset, 4);
    out += e.name;
    out += extra;
  }
  const std::uint64_t directory_size = out.size() - archive.directory_offset;
  out += options.between;
  const std::uint64_t count = options.recorded_entries.value_or(entries.size());
  if (options.zip64_end) {
    const std::uint64_t record = out.size();
    putLe(out, 0x06064b50, 4);
    putLe(out, 44, 8);
    putLe(out, 45, 2);
    putLe(out, 45, 2);
    putLe(out, 0, 4);
    putLe(out, 0, 4);
    putLe(out, count, 8);
    putLe(out, count, 8);
    putLe(out, directory_size, 8);
    putLe(out, archive.directory_offset, 8);
    putLe(out, 0x07064b50, 4);
    putLe(out, 0, 4);
    putLe(out, record, 8);
    putLe(out, 1, 4);
  }
  putLe(out, 0x06054b50, 4);
  putLe(out, 0, 4);  // disks
  putLe(out, options.zip64_end ? 0xffff : count, 2);
  putLe(out, options.zip64_end ? 0xffff : count, 2);
  putLe(out, options.zip64_end ? 0xffffffff : directory_size, 4);
  putLe(out, options.zip64_end ? 0xffffffff : archive.directory_offset, 4);
  putLe(out, options.comment.size(), 2);
  out += options.comment;
  return archive;
}

const pk::ZipLimits kLimits{1000, 1 << 20};

// Every member's name and bytes, or the first error.
std::string readAll(std::string_view archive, const pk::ZipLimits& limits = kLimits) {
  std::string listing;
  const auto read =
      pk::forEachZipMember(archive, limits, [&](std::string_view name, std::string_view bytes) {
        listing += std::string(name) + "=" + std::string(bytes) + ";";
      });
  return read.ok() ? listing : "error: " + read.error();
}

bool refused(std::string_view archive, std::string_view expected_words,
             const pk::ZipLimits& limits = kLimits) {
  const std::string outcome = readAll(archive, limits);
  EXPECT_NE(outcome.find(expected_words), std::string::npos) << outcome;
  return outcome.rfind("error: ", 0) == 0;
}

TEST(ZipReader, ReadsWhatPythonsZipfileWrites) {
  const std::string archive = fromHex(kPythonArchiveHex);
  auto reader = pk::ZipReader::open(archive, kLimits);
  ASSERT_TRUE(reader.ok()) << reader.error();
  ASSERT_EQ(reader->size(), 3u);  // the directory entry skipped
  EXPECT_EQ(reader->name(0), "npm/MAL-2025-1.json");
  EXPECT_EQ(reader->member(0).method, pk::ZipMethod::Deflated);
  EXPECT_EQ(reader->name(1), "stored.json");
  EXPECT_EQ(reader->member(1).method, pk::ZipMethod::Stored);
  EXPECT_EQ(reader->name(2), "zip64.json");
  std::string scratch;
  auto stored = reader->extract(1, scratch);
  ASSERT_TRUE(stored.ok()) << stored.error();
  EXPECT_EQ(*stored, R"({"id":"GHSA-1"})");
  // A stored member is a span of the archive, not a copy.
  EXPECT_GE(stored->data(), archive.data());
  EXPECT_LE(stored->data() + stored->size(), archive.data() + archive.size());
  EXPECT_EQ(readAll(archive),
            R"(npm/MAL-2025-1.json={"id":"MAL-2025-1","affected":[{"package":{"ecosystem":)"
            R"("npm","name":"evil"}}]};stored.json={"id":"GHSA-1"};)"
            R"(zip64.json={"id":"PYSEC-1"}{"id":"PYSEC-1"}{"id":"PYSEC-1"};)");
  EXPECT_EQ(readAll(fromHex(kPythonStreamedArchiveHex)), R"(dd.json={"id":"DD"};)");
}

TEST(ZipReader, EveryTruncationIsRefused) {
  const std::string archive = fromHex(kPythonArchiveHex);
  for (std::size_t cut = 0; cut < archive.size(); ++cut) {
    EXPECT_FALSE(pk::ZipReader::open(std::string_view(archive).substr(0, cut), kLimits).ok())
        << "cut at " << cut;
  }
}

TEST(ZipReader, ReadsItsOwnWriterInEveryShape) {
  const std::string big(200000, 'a');
  const Archive archive = buildZip(
      {
          {.name = "a.json", .plain = "{\"a\":1}"},
          {.name = "dir/", .plain = "", .method = 0},
          {.name = "stored", .plain = "plain bytes", .method = 0},
          {.name = "empty", .plain = ""},
          {.name = "empty-stored", .plain = "", .method = 0},
          {.name = "zip64", .plain = "sixty-four", .zip64 = true},
          {.name = "described", .plain = "after the data", .descriptor = true},
          {.name = "big", .plain = big},
      },
      {.comment = "a comment"});
  EXPECT_EQ(readAll(archive.bytes),
            "a.json={\"a\":1};stored=plain bytes;empty=;empty-stored=;"
            "zip64=sixty-four;described=after the data;big=" +
                big + ";");
}

TEST(ZipReader, AnEmptyArchiveHasNoMembers) {
  EXPECT_EQ(readAll(buildZip({}).bytes), "");
  EXPECT_EQ(readAll(buildZip({}, {.zip64_end = true}).bytes), "");
}

TEST(ZipReader, Zip64EndRecordsCarryMoreThan65535Entries) {
  std::vector<TestEntry> entries;
  for (int i = 0; i < 70000; ++i) {
    entries.push_back({.name = "MAL-" + std::to_string(i), .plain = "", .method = 0});
  }
  const Archive archive = buildZip(entries, {.zip64_end = true});
  auto reader = pk::ZipReader::open(archive.bytes, {100000, 1 << 20});
  ASSERT_TRUE(reader.ok()) << reader.error();
  EXPECT_EQ(reader->size(), 70000u);
  EXPECT_EQ(reader->name(69999), "MAL-69999");
  EXPECT_TRUE(refused(archive.bytes, "70000 entries, over the 69999 allowed", {69999, 1 << 20}));
}

TEST(ZipReader, RefusesBrokenZip64EndRecords) {
  const Archive good = buildZip({{.name = "a", .plain = "x"}}, {.zip64_end = true});
  ASSERT_EQ(readAll(good.bytes), "a=x;");
  // The locator is the 20 bytes before the 22-byte end record; its offset field at +8.
  const std::size_t locator = good.bytes.size() - 22 - 20;
  std::string moved = good.bytes;
  moved[locator + 8] = static_cast<char>(moved[locator + 8] + 1);
  EXPECT_TRUE(refused(moved, "ZIP64 end record is not where"));
  std::string far = good.bytes;
  far[locator + 15] = '\x7f';
  EXPECT_TRUE(refused(far, "ZIP64 end record is not where"));
  std::string disks = good.bytes;
  disks[locator + 16] = 2;
  EXPECT_TRUE(refused(disks, "multi-disk"));
  std::string record_size = good.bytes;
  record_size[locator - 56 + 4] = 45;
  EXPECT_TRUE(refused(record_size, "size is inconsistent"));
  // Saturated fields with no locator: the 16- and 32-bit values are taken as they are.
  std::string no_locator = good.bytes;
  no_locator[locator] = 'X';
  EXPECT_TRUE(refused(no_locator, "error"));
}

TEST(ZipReader, RefusesInconsistentLayouts) {
  const std::vector<TestEntry> two = {{.name = "a", .plain = "first"},
                                      {.name = "b", .plain = "second"}};
  const Archive good = buildZip(two);
  ASSERT_EQ(readAll(good.bytes), "a=first;b=second;");

  auto with = [&](std::size_t which, auto change) {
    std::vector<TestEntry> entries = two;
    change(entries[which]);
    return buildZip(entries).bytes;
  };
  // Two entries sharing one member (the overlapping-member bomb).
  EXPECT_TRUE(refused(with(1,
                           [](TestEntry& e) {
                             e.name = "a";
                             e.local_offset = 0;
                           }),
                      "overlap at offset 0"));
  EXPECT_TRUE(refused(with(1, [](TestEntry& e) { e.local_offset = 0; }), "disagrees"));
  EXPECT_TRUE(refused(with(1, [&](TestEntry& e) { e.local_offset = good.directory_offset; }),
                      "no local header"));
  EXPECT_TRUE(
      refused(with(1, [](TestEntry& e) { e.local_offset = 0xfffffff0; }), "no local header"));
  EXPECT_TRUE(refused(with(0, [](TestEntry& e) { e.local_offset = 3; }), "no local header"));
  EXPECT_TRUE(refused(with(0, [](TestEntry& e) { e.local_name = "x"; }), "disagrees"));
  EXPECT_TRUE(refused(with(0, [](TestEntry& e) { e.local_name = "ab"; }), "disagrees"));
  EXPECT_TRUE(refused(with(0, [](TestEntry& e) { e.local_method = 0; }), "disagrees"));
  // A compressed size reaching past the members into the directory, or into the next member.
  {
    std::string bytes = good.bytes;
    // Central entry 0's compressed size (offset +20) made huge.
    const std::size_t central = good.directory_offset;
    bytes[central + 22] = '\x10';
    EXPECT_TRUE(refused(bytes, "outside the archive's members"));
    std::string into_next = good.bytes;
    into_next[central + 20] = static_cast<char>(into_next[central + 20] + 10);
    EXPECT_TRUE(refused(into_next, "overlap"));
  }
  EXPECT_TRUE(refused(buildZip(two, {.recorded_entries = 1}).bytes, "more than its count"));
  EXPECT_TRUE(refused(buildZip(two, {.recorded_entries = 3}).bytes, "too small"));
  EXPECT_TRUE(refused(buildZip(two, {.between = "junk"}).bytes, "does not end where"));
  EXPECT_TRUE(refused("", "too short"));
  EXPECT_TRUE(refused(std::string(100, 'x'), "no end of central directory"));
  EXPECT_TRUE(refused(good.bytes + "trailing", "no end of central directory"));
}

TEST(ZipReader, RefusesWhatItDoesNotRead) {
  EXPECT_TRUE(refused(buildZip({{.name = "e", .plain = "x", .flags = 1}}).bytes, "encrypted"));
  EXPECT_TRUE(refused(buildZip({{.name = "e", .plain = "x", .flags = 0x40}}).bytes, "encrypted"));
  EXPECT_TRUE(
      refused(buildZip({{.name = "e", .plain = "x", .local_flags = 1}}).bytes, "encrypted"));
  EXPECT_TRUE(refused(buildZip({{.name = "bz", .plain = "x", .method = 12, .data = "BZh"}}).bytes,
                      "compression method 12"));
  EXPECT_TRUE(refused(buildZip({{.name = "aes", .plain = "x", .method = 99, .data = "??"}}).bytes,
                      "compression method 99"));
  EXPECT_TRUE(refused(buildZip({{.name = "s", .plain = "abc", .method = 0, .size = 2}}).bytes,
                      "two sizes differ"));
}

TEST(ZipReader, BoundsEntriesAndMemberSizes) {
  std::vector<TestEntry> entries(5, TestEntry{.name = "m", .plain = "x"});
  for (std::size_t i = 0; i < entries.size(); ++i) {
    entries[i].name += std::to_string(i);
  }
  const std::string archive = buildZip(entries).bytes;
  EXPECT_FALSE(refused(archive, "m4=x", {5, 1}));
  EXPECT_TRUE(refused(archive, "5 entries, over the 4 allowed", {4, 1}));
  // Directory entries count against the bound too: they are work.
  entries.push_back({.name = "d/", .plain = "", .method = 0});
  EXPECT_TRUE(refused(buildZip(entries).bytes, "6 entries, over the 5 allowed", {5, 1}));

  const std::string member(1000, 'z');
  const std::string one = buildZip({{.name = "big", .plain = member}}).bytes;
  EXPECT_FALSE(refused(one, "big=", {10, 1000}));
  EXPECT_TRUE(refused(one, "1000 bytes uncompressed, over the 999 allowed", {10, 999}));
}

TEST(ZipReader, ChecksContentAgainstTheDirectory) {
  const std::string plain = "{\"id\":\"MAL-1\"}";
  EXPECT_TRUE(refused(buildZip({{.name = "c", .plain = plain, .crc = 1234}}).bytes,
                      "member 0 (c): CRC-32 mismatch"));
  EXPECT_TRUE(refused(buildZip({{.name = "c", .plain = plain, .method = 0, .crc = 1}}).bytes,
                      "CRC-32 mismatch"));
  EXPECT_TRUE(refused(buildZip({{.name = "c", .plain = plain, .size = plain.size() + 1}}).bytes,
                      "inflates to 14 bytes, its recorded size is 15"));
  EXPECT_TRUE(refused(buildZip({{.name = "c", .plain = plain, .size = plain.size() - 1}}).bytes,
                      "inflates past its recorded size"));
  std::string corrupt = rawDeflate(plain);
  corrupt[0] = '\xff';
  EXPECT_TRUE(refused(buildZip({{.name = "c", .plain = plain, .data = corrupt}}).bytes,
                      "corrupt deflate stream"));
  EXPECT_TRUE(
      refused(buildZip({{.name = "c", .plain = plain, .data = rawDeflate(plain) + "x"}}).bytes,
              "data after the end"));
  const std::string truncated = rawDeflate(plain).substr(0, 5);
  EXPECT_TRUE(refused(buildZip({{.name = "c", .plain = plain, .data = truncated}}).bytes,
                      "truncated deflate stream"));
}

// A member that records a small size but inflates to 64 MiB stops at its recorded size: the
// scratch string never grows past it.
TEST(ZipReader, ABombMemberStopsAtItsRecordedSize) {
  const std::string zeros(std::size_t{64} << 20, '\0');
  const std::string bomb = rawDeflate(zeros);
  const std::string archive =
      buildZip({{.name = "bomb", .plain = zeros, .data = bomb, .size = 1000}}).bytes;
  auto reader = pk::ZipReader::open(archive, kLimits);
  ASSERT_TRUE(reader.ok()) << reader.error();
  std::string scratch;
  auto bytes = reader->extract(0, scratch);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.error().find("inflates past"), std::string::npos);
  EXPECT_LE(scratch.capacity(), 1000u);
}

TEST(ZipReader, NamesAreShownSafelyInMessages) {
  const std::string name = "evil\n\x1b[31mname" + std::string(100, 'x');
  const std::string outcome = readAll(buildZip({{.name = name, .plain = "x", .crc = 0}}).bytes);
  EXPECT_NE(outcome.find("evil??[31mname"), std::string::npos) << outcome;
  EXPECT_NE(outcome.find("..."), std::string::npos);
  EXPECT_EQ(outcome.find('\n'), std::string::npos);
}

}  // namespace
