// libFuzzer target for the inflater of registry metadata (proxy/packages/gzip_codec.h): a body
// from a hostile origin, in the pieces the proxy would receive it, inflated under a small
// bound.
// Parser files: proxy/packages/gzip_codec.cc
//
// Input: byte 0 chooses the format (bits 0-1: identity, gzip, deflate (zlib or raw), a ZIP
// member's raw deflate) and the level of the re-compression check (bits 2-5, mod 10); byte 1
// is max_output in 64-byte steps (0 to 16,320); bytes 2-3 seed the cuts; the rest is the body,
// fed in pieces of 0 to 63 bytes drawn from the seed.
// Invariants, each a trap on violation:
//   - no more than max_output bytes are ever appended, and the string's capacity never grows
//     past max_output (but for libstdc++'s 30 bytes of a tiny string);
//   - the body fed whole (inflateBody, or one feed) and fed in pieces end with the same status
//     and the same output; TooLarge leaves exactly max_output bytes; a failure is final (the
//     next feed and finish() say it again, and nothing more is appended);
//   - identity is Ok exactly when the body fits, and copies it;
//   - what inflated Ok, gzip'd again (deflateGzip) and inflated, is the same bytes.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "proxy/packages/gzip_codec.h"

namespace {

namespace pk = sluice::proxy::packages;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

struct Run {
  pk::InflateStatus status = pk::InflateStatus::Ok;
  std::string out;
};

std::unique_ptr<pk::Inflater> makeInflater(int format, std::size_t max_output, std::string& out) {
  if (format == 3) {
    return std::make_unique<pk::Inflater>(pk::Inflater::RawDeflate{}, max_output, out);
  }
  const pk::ContentCoding coding = format == 0   ? pk::ContentCoding::Identity
                                   : format == 1 ? pk::ContentCoding::Gzip
                                                 : pk::ContentCoding::Deflate;
  return std::make_unique<pk::Inflater>(coding, max_output, out);
}

void checkBound(const std::string& out, std::size_t max_output) {
  check(out.size() <= max_output);
  check(out.capacity() <= (max_output > 30 ? max_output : 30));
}

// After a failure: the same status again, nothing appended.
void checkFinal(pk::Inflater& inflater, const Run& run, std::string_view more) {
  const std::size_t size = run.out.size();
  check(inflater.feed(more).status == run.status);
  check(inflater.finish().status == run.status);
  check(run.out.size() == size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) {
    return 0;
  }
  const int format = data[0] & 3;
  const int level = (data[0] >> 2 & 15) % 10;
  const std::size_t max_output = std::size_t{data[1]} * 64;
  std::uint32_t seed = static_cast<std::uint32_t>(data[2] << 8 | data[3]) | 1;
  // An exact-size heap copy, so ASan flags any read past the body.
  const std::size_t body_size = size - 4;
  std::unique_ptr<char[]> copy(new char[body_size == 0 ? 1 : body_size]);
  std::memcpy(copy.get(), data + 4, body_size);
  const std::string_view body(copy.get(), body_size);

  Run whole;
  if (format == 3) {
    auto inflater = makeInflater(format, max_output, whole.out);
    whole.status = inflater->feed(body).status;
    if (whole.status == pk::InflateStatus::Ok) {
      whole.status = inflater->finish().status;
    } else {
      checkFinal(*inflater, whole, "x");
    }
  } else {
    const pk::ContentCoding coding = format == 0   ? pk::ContentCoding::Identity
                                     : format == 1 ? pk::ContentCoding::Gzip
                                                   : pk::ContentCoding::Deflate;
    whole.status = pk::inflateBody(body, coding, max_output, whole.out).status;
  }
  checkBound(whole.out, max_output);

  Run pieces;
  {
    auto inflater = makeInflater(format, max_output, pieces.out);
    std::size_t at = 0;
    while (at < body.size() && pieces.status == pk::InflateStatus::Ok) {
      seed ^= seed << 13;
      seed ^= seed >> 17;
      seed ^= seed << 5;
      const std::size_t cut = seed % 64;
      pieces.status = inflater->feed(body.substr(at, cut)).status;
      at += cut;
      checkBound(pieces.out, max_output);
    }
    if (pieces.status == pk::InflateStatus::Ok) {
      pieces.status = inflater->finish().status;
    }
    if (pieces.status != pk::InflateStatus::Ok) {
      checkFinal(*inflater, pieces, body);
    }
  }
  checkBound(pieces.out, max_output);
  check(pieces.status == whole.status);
  check(pieces.out == whole.out);
  if (whole.status == pk::InflateStatus::TooLarge) {
    check(whole.out.size() == max_output);
  }
  if (format == 0) {
    const bool fits = body.size() <= max_output;
    check((whole.status == pk::InflateStatus::Ok) == fits);
    check(whole.out == body.substr(0, max_output));
  }

  if (whole.status == pk::InflateStatus::Ok) {
    std::string gzip;
    check(pk::deflateGzip(whole.out, gzip, level));
    std::string again;
    check(pk::inflateBody(gzip, pk::ContentCoding::Gzip, whole.out.size(), again).ok());
    check(again == whole.out);
  }
  return 0;
}
