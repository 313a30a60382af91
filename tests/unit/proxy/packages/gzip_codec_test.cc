#include "proxy/packages/gzip_codec.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace pk = sluice::proxy::packages;
using pk::ContentCoding;
using pk::InflateStatus;

// Text that compresses like JSON metadata, `size` bytes.
std::string sampleText(std::size_t size) {
  std::string text;
  std::uint32_t state = 12345;
  while (text.size() < size) {
    state = state * 1103515245 + 12345;
    text += "{\"version\":\"1." + std::to_string(state % 97) + ".0\",\"time\":\"2025-01-0" +
            std::to_string(state % 9 + 1) + "\"},";
  }
  text.resize(size);
  return text;
}

// `plain` deflated with zlib's window bits: 15 zlib, -15 raw, 31 gzip.
std::string deflateWith(std::string_view plain, int window_bits, int level = 6) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
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
std::string gzipOf(std::string_view plain) { return deflateWith(plain, 16 + MAX_WBITS); }
std::string zlibOf(std::string_view plain) { return deflateWith(plain, MAX_WBITS); }
std::string rawOf(std::string_view plain) { return deflateWith(plain, -MAX_WBITS); }

struct Outcome {
  InflateStatus status;
  std::string out;
};

Outcome inflateInChunks(std::string_view body, ContentCoding coding, std::size_t max_output,
                        std::size_t chunk) {
  Outcome outcome{InflateStatus::Ok, {}};
  pk::Inflater inflater(coding, max_output, outcome.out);
  for (std::size_t at = 0; at < body.size() && outcome.status == InflateStatus::Ok; at += chunk) {
    outcome.status = inflater.feed(body.substr(at, chunk)).status;
  }
  if (outcome.status == InflateStatus::Ok) {
    outcome.status = inflater.finish().status;
  }
  return outcome;
}

Outcome inflateWhole(std::string_view body, ContentCoding coding, std::size_t max_output) {
  Outcome outcome{InflateStatus::Ok, {}};
  outcome.status = pk::inflateBody(body, coding, max_output, outcome.out).status;
  return outcome;
}

constexpr std::size_t kBig = std::size_t{1} << 30;

TEST(Inflate, EachFormatRoundTripsWholeAndInChunks) {
  for (std::size_t size :
       {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{300000}}) {
    const std::string plain = sampleText(size);
    const struct {
      const char* what;
      ContentCoding coding;
      std::string body;
    } cases[] = {
        {"gzip", ContentCoding::Gzip, gzipOf(plain)},
        {"zlib", ContentCoding::Deflate, zlibOf(plain)},
        {"raw deflate", ContentCoding::Deflate, rawOf(plain)},
        {"stored zlib", ContentCoding::Deflate, deflateWith(plain, MAX_WBITS, 0)},
        {"identity", ContentCoding::Identity, plain},
    };
    for (const auto& c : cases) {
      SCOPED_TRACE(std::string(c.what) + " of " + std::to_string(size) + " bytes");
      const Outcome whole = inflateWhole(c.body, c.coding, kBig);
      EXPECT_EQ(whole.status, InflateStatus::Ok);
      EXPECT_EQ(whole.out, plain);
      for (std::size_t chunk : {1, 2, 3, 7, 1000, 16384}) {
        const Outcome pieces = inflateInChunks(c.body, c.coding, kBig, chunk);
        EXPECT_EQ(pieces.status, InflateStatus::Ok) << "chunk " << chunk;
        EXPECT_EQ(pieces.out, plain) << "chunk " << chunk;
        if (size > 1000 && chunk < 1000) {
          break;  // byte by byte over 300 KB is slow and adds nothing
        }
      }
    }
  }
}

TEST(Inflate, OutputIsAppendedToWhatTheStringHolds) {
  std::string out = "prefix:";
  ASSERT_TRUE(pk::inflateBody(gzipOf("body"), ContentCoding::Gzip, 4, out).ok());
  EXPECT_EQ(out, "prefix:body");
}

TEST(Inflate, EveryTruncationIsInvalidNeverOk) {
  const std::string plain = sampleText(5000);
  const struct {
    const char* what;
    ContentCoding coding;
    std::string body;
  } cases[] = {
      {"gzip", ContentCoding::Gzip, gzipOf(plain)},
      {"zlib", ContentCoding::Deflate, zlibOf(plain)},
      {"raw", ContentCoding::Deflate, rawOf(plain)},
  };
  for (const auto& c : cases) {
    for (std::size_t cut = 0; cut < c.body.size(); ++cut) {
      SCOPED_TRACE(std::string(c.what) + " cut at " + std::to_string(cut));
      const std::string_view prefix = std::string_view(c.body).substr(0, cut);
      EXPECT_EQ(inflateWhole(prefix, c.coding, kBig).status, InflateStatus::Invalid);
      if (cut % 97 == 0) {
        EXPECT_EQ(inflateInChunks(prefix, c.coding, kBig, 13).status, InflateStatus::Invalid);
      }
    }
  }
}

TEST(Inflate, CorruptionIsInvalid) {
  const std::string plain = sampleText(2000);
  const std::string gzip = gzipOf(plain);
  const std::string zlib = zlibOf(plain);
  auto flipped = [](std::string body, std::size_t at) {
    body[at] = static_cast<char>(body[at] ^ 0x01);
    return body;
  };
  const struct {
    const char* what;
    ContentCoding coding;
    std::string body;
  } cases[] = {
      {"gzip CRC-32", ContentCoding::Gzip, flipped(gzip, gzip.size() - 8)},
      {"gzip length", ContentCoding::Gzip, flipped(gzip, gzip.size() - 4)},
      {"gzip magic", ContentCoding::Gzip, flipped(gzip, 1)},
      {"gzip method", ContentCoding::Gzip, flipped(gzip, 2)},
      {"gzip data", ContentCoding::Gzip, flipped(gzip, gzip.size() / 2)},
      {"zlib Adler-32", ContentCoding::Deflate, flipped(zlib, zlib.size() - 1)},
      {"zlib data", ContentCoding::Deflate, flipped(zlib, zlib.size() / 2)},
      {"zlib body as gzip", ContentCoding::Gzip, zlib},
      {"gzip body as deflate", ContentCoding::Deflate, gzip},
      {"plain text as gzip", ContentCoding::Gzip, plain},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    std::string out;
    const pk::InflateResult result = pk::inflateBody(c.body, c.coding, kBig, out);
    EXPECT_EQ(result.status, InflateStatus::Invalid);
    EXPECT_FALSE(result.message.empty());
    EXPECT_EQ(inflateInChunks(c.body, c.coding, kBig, 5).status, InflateStatus::Invalid);
  }
}

TEST(Inflate, TrailingBytesAreInvalid) {
  const std::string gzip = gzipOf("{}");
  const struct {
    const char* what;
    ContentCoding coding;
    std::string body;
  } cases[] = {
      {"gzip then a byte", ContentCoding::Gzip, gzip + "x"},
      {"gzip then zero padding", ContentCoding::Gzip, gzip + std::string(512, '\0')},
      {"gzip then a lone magic byte", ContentCoding::Gzip, gzip + "\x1f"},
      {"gzip then a truncated member", ContentCoding::Gzip, gzip + gzip.substr(0, 12)},
      {"zlib then a byte", ContentCoding::Deflate, zlibOf("{}") + "x"},
      {"zlib then a zlib stream", ContentCoding::Deflate, zlibOf("{}") + zlibOf("{}")},
      {"raw then a byte", ContentCoding::Deflate, rawOf("{}") + "x"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(inflateWhole(c.body, c.coding, kBig).status, InflateStatus::Invalid);
    for (std::size_t chunk : {1, 2, 5}) {
      EXPECT_EQ(inflateInChunks(c.body, c.coding, kBig, chunk).status, InflateStatus::Invalid);
    }
  }
}

TEST(Inflate, ConcatenatedGzipMembersInflateToTheirConcatenation) {
  const std::string first = sampleText(3000);
  const std::string second = "and the second member";
  const std::string body = gzipOf(first) + gzipOf(second) + gzipOf("");
  const Outcome whole = inflateWhole(body, ContentCoding::Gzip, kBig);
  EXPECT_EQ(whole.status, InflateStatus::Ok);
  EXPECT_EQ(whole.out, first + second);
  for (std::size_t chunk : {1, 4, 4096}) {
    const Outcome pieces = inflateInChunks(body, ContentCoding::Gzip, kBig, chunk);
    EXPECT_EQ(pieces.status, InflateStatus::Ok);
    EXPECT_EQ(pieces.out, first + second);
  }
  // A bound counts every member.
  EXPECT_EQ(inflateWhole(body, ContentCoding::Gzip, first.size() + 1).status,
            InflateStatus::TooLarge);
}

TEST(Inflate, EmptyBodiesOfCompressedCodingsAreInvalid) {
  EXPECT_EQ(inflateWhole("", ContentCoding::Gzip, kBig).status, InflateStatus::Invalid);
  EXPECT_EQ(inflateWhole("", ContentCoding::Deflate, kBig).status, InflateStatus::Invalid);
  EXPECT_EQ(inflateWhole("\x78", ContentCoding::Deflate, kBig).status, InflateStatus::Invalid);
  EXPECT_EQ(inflateWhole("", ContentCoding::Identity, kBig).status, InflateStatus::Ok);
}

TEST(Inflate, UnsupportedCodingIsInvalid) {
  EXPECT_EQ(inflateWhole("abc", ContentCoding::Unsupported, kBig).status, InflateStatus::Invalid);
  EXPECT_EQ(inflateWhole("", ContentCoding::Unsupported, kBig).status, InflateStatus::Invalid);
}

TEST(Inflate, ZlibWithAPresetDictionaryIsInvalid) {
  z_stream z{};
  ASSERT_EQ(deflateInit(&z, 6), Z_OK);
  const char dictionary[] = "version";
  ASSERT_EQ(deflateSetDictionary(&z, reinterpret_cast<const Bytef*>(dictionary), 7), Z_OK);
  std::string body(256, '\0');
  std::string plain = "version version";
  z.next_in = reinterpret_cast<Bytef*>(plain.data());
  z.avail_in = static_cast<uInt>(plain.size());
  z.next_out = reinterpret_cast<Bytef*>(body.data());
  z.avail_out = static_cast<uInt>(body.size());
  ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  body.resize(z.total_out);
  deflateEnd(&z);
  EXPECT_EQ(inflateWhole(body, ContentCoding::Deflate, kBig).status, InflateStatus::Invalid);
}

// A raw stream whose first two bytes make a valid zlib header (a stored block whose length
// byte happens to fit) is read as zlib: it fails, it is never misread.
TEST(Inflate, RawStreamLookingLikeZlibFailsClosed) {
  // Stored block, not final: 0x78 (BFINAL 0, BTYPE 00), LEN 1, NLEN, "x"; then an empty final
  // stored block. 0x7801 is a multiple of 31.
  const std::string raw("\x78\x01\x00\xfe\xffx\x01\x00\x00\xff\xff", 11);
  std::string direct;
  pk::Inflater reference(pk::Inflater::RawDeflate{}, kBig, direct);
  ASSERT_TRUE(reference.feed(raw).ok());
  ASSERT_TRUE(reference.finish().ok());
  ASSERT_EQ(direct, "x");
  EXPECT_EQ(inflateWhole(raw, ContentCoding::Deflate, kBig).status, InflateStatus::Invalid);
}

TEST(Inflate, BoundIsExactAndCounted) {
  const std::string plain = sampleText(100000);
  const std::string body = gzipOf(plain);
  EXPECT_EQ(inflateWhole(body, ContentCoding::Gzip, plain.size()).status, InflateStatus::Ok);
  const Outcome over = inflateWhole(body, ContentCoding::Gzip, plain.size() - 1);
  EXPECT_EQ(over.status, InflateStatus::TooLarge);
  EXPECT_EQ(over.out, plain.substr(0, plain.size() - 1));
  EXPECT_EQ(inflateWhole(gzipOf(""), ContentCoding::Gzip, 0).status, InflateStatus::Ok);
  EXPECT_EQ(inflateWhole(gzipOf("x"), ContentCoding::Gzip, 0).status, InflateStatus::TooLarge);
  const Outcome identity = inflateInChunks(plain, ContentCoding::Identity, 1000, 300);
  EXPECT_EQ(identity.status, InflateStatus::TooLarge);
  EXPECT_EQ(identity.out, plain.substr(0, 1000));
}

// A gzip bomb: 64 MiB of zeros in about 64 KB. Inflating it with a 1 MiB bound stops at the
// bound, and the string's capacity never exceeds the bound.
TEST(Inflate, BombStopsAtTheBoundWithoutAllocatingPastIt) {
  const std::string bomb = gzipOf(std::string(std::size_t{64} << 20, '\0'));
  ASSERT_LT(bomb.size(), std::size_t{100} << 10);
  constexpr std::size_t kBound = std::size_t{1} << 20;
  {
    std::string out;
    const pk::InflateResult result = pk::inflateBody(bomb, ContentCoding::Gzip, kBound, out);
    EXPECT_EQ(result.status, InflateStatus::TooLarge);
    EXPECT_EQ(out.size(), kBound);
    EXPECT_LE(out.capacity(), kBound);
  }
  {
    std::string out = "head";
    pk::Inflater inflater(ContentCoding::Gzip, kBound, out);
    InflateStatus status = InflateStatus::Ok;
    std::size_t fed = 0;
    for (; fed < bomb.size() && status == InflateStatus::Ok; fed += 4096) {
      status = inflater.feed(std::string_view(bomb).substr(fed, 4096)).status;
    }
    EXPECT_EQ(status, InflateStatus::TooLarge);
    EXPECT_LT(fed, bomb.size() / 8);  // stopped at once, not after the whole body
    EXPECT_EQ(out.size(), kBound + 4);
    EXPECT_LE(out.capacity(), kBound + 4);
    EXPECT_EQ(inflater.finish().status, InflateStatus::TooLarge);
  }
}

TEST(Inflate, AFailureIsFinal) {
  std::string out;
  pk::Inflater inflater(ContentCoding::Gzip, kBig, out);
  EXPECT_EQ(inflater.feed("not gzip").status, InflateStatus::Invalid);
  EXPECT_EQ(inflater.feed(gzipOf("fine")).status, InflateStatus::Invalid);
  EXPECT_EQ(inflater.finish().status, InflateStatus::Invalid);
  EXPECT_EQ(out, "");

  std::string after;
  pk::Inflater finished(ContentCoding::Gzip, kBig, after);
  ASSERT_TRUE(finished.feed(gzipOf("a")).ok());
  ASSERT_TRUE(finished.finish().ok());
  EXPECT_EQ(finished.feed(gzipOf("b")).status, InflateStatus::Invalid);
  EXPECT_EQ(after, "a");
}

TEST(Deflate, GzipRoundTripsAtEveryLevel) {
  const std::string plain = sampleText(200000);
  for (int level : {-1, 0, 1, 6, 9}) {
    SCOPED_TRACE(level);
    std::string gzip = "kept";
    ASSERT_TRUE(pk::deflateGzip(plain, gzip, level));
    ASSERT_EQ(gzip.substr(0, 4), "kept");
    const std::string_view member = std::string_view(gzip).substr(4);
    EXPECT_EQ(static_cast<unsigned char>(member[0]), 0x1f);
    EXPECT_EQ(static_cast<unsigned char>(member[1]), 0x8b);
    const Outcome back = inflateWhole(member, ContentCoding::Gzip, plain.size());
    EXPECT_EQ(back.status, InflateStatus::Ok);
    EXPECT_EQ(back.out, plain);
  }
  std::string empty;
  ASSERT_TRUE(pk::deflateGzip("", empty, 6));
  EXPECT_EQ(inflateWhole(empty, ContentCoding::Gzip, 0).status, InflateStatus::Ok);
}

TEST(Deflate, BadLevelIsRefused) {
  std::string out = "kept";
  EXPECT_FALSE(pk::deflateGzip("x", out, 10));
  EXPECT_FALSE(pk::deflateGzip("x", out, -2));
  EXPECT_EQ(out, "kept");
}

TEST(ContentEncoding, Parses) {
  const struct {
    std::string_view value;
    ContentCoding coding;
  } cases[] = {
      {"", ContentCoding::Identity},
      {"identity", ContentCoding::Identity},
      {" , ,", ContentCoding::Identity},
      {"gzip", ContentCoding::Gzip},
      {"GZip", ContentCoding::Gzip},
      {"x-gzip", ContentCoding::Gzip},
      {"X-GZIP", ContentCoding::Gzip},
      {" \tgzip \t", ContentCoding::Gzip},
      {"gzip, identity", ContentCoding::Gzip},
      {"identity,gzip", ContentCoding::Gzip},
      {"gzip,", ContentCoding::Gzip},
      {"deflate", ContentCoding::Deflate},
      {"Deflate , identity", ContentCoding::Deflate},
      {"gzip, gzip", ContentCoding::Unsupported},
      {"deflate, gzip", ContentCoding::Unsupported},
      {"gzip, br", ContentCoding::Unsupported},
      {"br", ContentCoding::Unsupported},
      {"zstd", ContentCoding::Unsupported},
      {"compress", ContentCoding::Unsupported},
      {"x-compress", ContentCoding::Unsupported},
      {"gzip;q=1", ContentCoding::Unsupported},
      {"gzip deflate", ContentCoding::Unsupported},
      {"gzi", ContentCoding::Unsupported},
      {"gzip\x01", ContentCoding::Unsupported},
      {"\"gzip\"", ContentCoding::Unsupported},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(pk::parseContentEncoding(c.value), c.coding) << '"' << c.value << '"';
  }
}

TEST(AcceptEncoding, IdentityAndGzip) {
  const struct {
    std::string_view value;
    bool identity;
    bool gzip;
  } cases[] = {
      {"", true, false},  // absent (or empty): identity only
      {"gzip", true, true},
      {"GZIP", true, true},
      {"x-gzip", true, true},
      {"gzip, deflate, br", true, true},
      {"br", true, false},
      {"deflate", true, false},
      {"*", true, true},
      {"*;q=0", false, false},
      {"*;q=0, gzip", false, true},
      {"*;q=0, identity", true, false},
      {"*;q=0.5", true, true},
      {"identity;q=0", false, false},
      {"identity;q=0, *", false, true},
      {"identity;q=0.000, gzip", false, true},
      {"identity ; q=0", false, false},
      {"identity;Q=0", false, false},
      {"identity;q=0.001", true, false},
      {"gzip;q=0", true, false},
      {"gzip;q=0, *", true, false},
      {"gzip;q=0.0, x-gzip", true, false},  // q=0 once excludes
      {"gzip;q=1.0", true, true},
      {"gzip;q=1.000", true, true},
      {"gzip;q=1.001", true, false},   // malformed: ignored
      {"gzip;q=0.0001", true, false},  // malformed: ignored
      {"gzip;q=2", true, false},       // malformed
      {"gzip;level=1", true, false},   // not a weight: ignored
      {"gzip;q=", true, false},
      {"identity;q=abc", true, false},  // malformed: identity stays acceptable
      {"gzip;q=0.8, identity;q=0.2", true, true},
      {" gzip ,\t*;q=0 ", false, true},
      {",,gzip,,", true, true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(pk::acceptsIdentity(c.value), c.identity) << '"' << c.value << '"';
    EXPECT_EQ(pk::acceptsGzip(c.value), c.gzip) << '"' << c.value << '"';
  }
}

}  // namespace
