#include "proxy/packages/gzip_codec.h"

#include <zlib.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "base/ascii.h"
#include "proxy/packages/field_lists.h"

namespace sluice::proxy::packages {
namespace {

using field_lists::forEachListElement;
using field_lists::parseQvalue;
using field_lists::trimOws;

// zlib counts in uInt: larger inputs go through in slices of this.
constexpr std::size_t kMaxSlice = std::size_t{1} << 30;
// Output of one inflate() call, on the stack, then appended: a string resized for zlib to
// write into would be zero-filled each time, which a trickle of input would repeat per byte.
constexpr std::size_t kOutputStep = std::size_t{16} << 10;
// The first capacity the output string gets, so that small documents do not double up from
// a few bytes.
constexpr std::size_t kFirstCapacity = std::size_t{4} << 10;

bool isGzipName(std::string_view name) {
  return ascii::iequals(name, "gzip") || ascii::iequals(name, "x-gzip");
}

struct AcceptedCoding {
  std::string_view name;
  int weight = 1000;  // thousandths; -1: malformed
};

// codings [ OWS ";" OWS "q=" qvalue ]
AcceptedCoding parseAcceptElement(std::string_view element) {
  const std::size_t semicolon = element.find(';');
  AcceptedCoding coding{trimOws(element.substr(0, semicolon)), 1000};
  if (!ascii::isToken(coding.name)) {
    return {coding.name, -1};
  }
  if (semicolon == std::string_view::npos) {
    return coding;
  }
  const std::string_view parameter = trimOws(element.substr(semicolon + 1));
  if (parameter.size() < 2 || ascii::toLower(parameter[0]) != 'q' || parameter[1] != '=') {
    return {coding.name, -1};
  }
  coding.weight = parseQvalue(parameter.substr(2));
  return coding;
}

enum class Listed { No, Excluded, Accepted };

// How the Accept-Encoding list names the codings `matches` selects.
template <typename Matches>
Listed lookUp(std::string_view accept_encoding, Matches matches) {
  Listed listed = Listed::No;
  forEachListElement(accept_encoding, [&](std::string_view element) {
    const AcceptedCoding coding = parseAcceptElement(element);
    if (coding.weight < 0 || !matches(coding.name)) {
      return true;
    }
    if (coding.weight == 0) {
      listed = Listed::Excluded;
      return false;  // q=0 once excludes, whatever else the list says
    }
    listed = Listed::Accepted;
    return true;
  });
  return listed;
}

bool isStar(std::string_view name) { return name == "*"; }

// A zlib header (RFC 1950 §2.2): deflate, a window of at most 32 KiB, FCHECK. One asking for
// a preset dictionary (FDICT) is one too, so that zlib refuses it (Z_NEED_DICT).
bool isZlibHeader(unsigned char cmf, unsigned char flg) {
  return (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && (cmf * 256 + flg) % 31 == 0;
}

std::size_t saturatingAdd(std::size_t a, std::size_t b) {
  return a > std::numeric_limits<std::size_t>::max() - b ? std::numeric_limits<std::size_t>::max()
                                                         : a + b;
}

Bytef* bytes(const char* data) { return reinterpret_cast<Bytef*>(const_cast<char*>(data)); }

}  // namespace

ContentCoding parseContentEncoding(std::string_view value) {
  ContentCoding coding = ContentCoding::Identity;
  forEachListElement(value, [&](std::string_view name) {
    ContentCoding this_one = ContentCoding::Unsupported;
    if (ascii::iequals(name, "identity")) {
      return true;
    }
    if (isGzipName(name)) {
      this_one = ContentCoding::Gzip;
    } else if (ascii::iequals(name, "deflate")) {
      this_one = ContentCoding::Deflate;
    }
    // A second coding, or one we cannot decode, makes the whole list undecodable.
    coding = coding == ContentCoding::Identity ? this_one : ContentCoding::Unsupported;
    return coding != ContentCoding::Unsupported;
  });
  return coding;
}

bool acceptsIdentity(std::string_view accept_encoding) {
  const Listed identity = lookUp(
      accept_encoding, [](std::string_view name) { return ascii::iequals(name, "identity"); });
  if (identity != Listed::No) {
    return identity == Listed::Accepted;
  }
  return lookUp(accept_encoding, isStar) != Listed::Excluded;
}

bool acceptsGzip(std::string_view accept_encoding) {
  const Listed gzip = lookUp(accept_encoding, isGzipName);
  if (gzip != Listed::No) {
    return gzip == Listed::Accepted;
  }
  return lookUp(accept_encoding, isStar) == Listed::Accepted;
}

// --- Inflater ---

void Inflater::ZStreamDeleter::operator()(z_stream_s* stream) const {
  inflateEnd(stream);
  delete stream;
}

namespace {

std::unique_ptr<z_stream_s> newZStream() {
  auto stream = std::make_unique<z_stream_s>();
  stream->zalloc = Z_NULL;
  stream->zfree = Z_NULL;
  stream->opaque = Z_NULL;
  return stream;
}

}  // namespace

Inflater::Inflater(ContentCoding coding, std::size_t max_output, std::string& out)
    : Inflater(coding == ContentCoding::Identity  ? Mode::Identity
               : coding == ContentCoding::Gzip    ? Mode::Gzip
               : coding == ContentCoding::Deflate ? Mode::ZlibOrRaw
                                                  : Mode::Unsupported,
               max_output, out) {}

Inflater::Inflater(RawDeflate, std::size_t max_output, std::string& out)
    : Inflater(Mode::Raw, max_output, out) {}

Inflater::Inflater(Mode mode, std::size_t max_output, std::string& out)
    : mode_(mode),
      out_(out),
      start_size_(out.size()),
      max_output_(max_output),
      capacity_limit_(saturatingAdd(out.size(), max_output)) {
  // 16 + 15: the gzip wrapper only (not zlib's automatic detection); -15: raw deflate.
  if (mode_ == Mode::Gzip) {
    startZlib(16 + MAX_WBITS);
  } else if (mode_ == Mode::Raw) {
    startZlib(-MAX_WBITS);
  }
}

Inflater::~Inflater() = default;

bool Inflater::startZlib(int window_bits) {
  std::unique_ptr<z_stream_s> stream = newZStream();
  if (inflateInit2(stream.get(), window_bits) != Z_OK) {
    fail(InflateStatus::Invalid, "zlib could not start (out of memory)");
    return false;
  }
  stream_.reset(stream.release());
  return true;
}

InflateResult Inflater::fail(InflateStatus status, std::string message) {
  if (failure_.ok()) {
    failure_ = InflateResult{status, std::move(message)};
  }
  return failure_;
}

// Grows out_ so that `wanted` more bytes fit, the capacity doubling but never past
// capacity_limit_ (libstdc++'s reserve() would round up to twice the old capacity, past the
// bound: then the bytes move into a string reserved exactly).
void Inflater::makeRoom(std::size_t wanted) {
  const std::size_t needed = out_.size() + wanted;
  if (needed <= out_.capacity()) {
    return;
  }
  const std::size_t doubled =
      out_.capacity() > std::numeric_limits<std::size_t>::max() / 2 ? needed : 2 * out_.capacity();
  const std::size_t target = std::min(std::max({needed, doubled, kFirstCapacity}), capacity_limit_);
  if (target >= doubled) {
    out_.reserve(target);
    return;
  }
  std::string bigger;
  bigger.reserve(target);
  bigger.append(out_);
  out_.swap(bigger);
}

InflateResult Inflater::feedIdentity(std::string_view chunk) {
  const std::size_t room = max_output_ - produced_;
  const std::size_t take = std::min(room, chunk.size());
  makeRoom(take);
  out_.append(chunk.substr(0, take));
  produced_ += take;
  if (take < chunk.size()) {
    return fail(InflateStatus::TooLarge,
                "the body exceeds " + std::to_string(max_output_) + " bytes");
  }
  return {};
}

InflateResult Inflater::feed(std::string_view chunk) {
  if (!failure_.ok()) {
    return failure_;
  }
  if (finished_) {
    return fail(InflateStatus::Invalid, "data fed after the end of the body");
  }
  if (chunk.empty()) {
    return {};
  }
  if (mode_ == Mode::Identity) {
    return feedIdentity(chunk);
  }
  if (mode_ == Mode::Unsupported) {
    return fail(InflateStatus::Invalid, "unsupported content coding");
  }
  while (!chunk.empty() && failure_.ok()) {
    if (phase_ == Phase::Ended) {
      if (mode_ != Mode::Gzip) {
        return fail(InflateStatus::Invalid, "data after the end of the deflate stream");
      }
      // Another gzip member (RFC 1952 §2.2), or trailing garbage, which its magic tells.
      inflateReset(stream_.get());
      phase_ = Phase::Inside;
      member_bytes_ = 0;
    }
    if (phase_ == Phase::Start) {
      if (mode_ != Mode::ZlibOrRaw) {
        phase_ = Phase::Inside;
        continue;
      }
      held_[held_count_++] = static_cast<unsigned char>(chunk[0]);
      chunk.remove_prefix(1);
      if (held_count_ < 2) {
        continue;
      }
      if (!startZlib(isZlibHeader(held_[0], held_[1]) ? MAX_WBITS : -MAX_WBITS)) {
        break;
      }
      phase_ = Phase::Inside;
      const char held[2] = {static_cast<char>(held_[0]), static_cast<char>(held_[1])};
      if (inflateSome(std::string_view(held, 2)) != 2 && failure_.ok()) {
        // The stream ended inside its first two bytes: whatever follows is trailing data.
        return fail(InflateStatus::Invalid, "data after the end of the deflate stream");
      }
      continue;
    }
    if (mode_ == Mode::Gzip && member_bytes_ < 2) {
      static constexpr unsigned char kMagic[2] = {0x1f, 0x8b};
      for (std::size_t i = 0; i < chunk.size() && member_bytes_ + i < 2; ++i) {
        if (static_cast<unsigned char>(chunk[i]) != kMagic[member_bytes_ + i]) {
          return fail(InflateStatus::Invalid,
                      members_ == 0 ? "not a gzip stream" : "data after the gzip member");
        }
      }
    }
    const std::string_view slice = chunk.substr(0, kMaxSlice);
    const std::size_t consumed = inflateSome(slice);
    member_bytes_ += consumed;
    chunk.remove_prefix(consumed);
  }
  return failure_;
}

std::size_t Inflater::inflateSome(std::string_view input) {
  z_stream_s& z = *stream_;
  z.next_in = bytes(input.data());
  z.avail_in = static_cast<uInt>(input.size());
  // Room for one byte past the bound, which tells "exactly the bound" from "past it"; that byte
  // lands here and never in out_.
  const std::size_t room_limit = saturatingAdd(max_output_, 1);
  unsigned char buffer[kOutputStep];
  while (true) {
    const std::size_t room = std::min(sizeof buffer, room_limit - produced_);
    z.next_out = buffer;
    z.avail_out = static_cast<uInt>(room);
    const int status = inflate(&z, Z_NO_FLUSH);
    const std::size_t written = room - z.avail_out;
    const std::size_t consumed = input.size() - z.avail_in;
    const std::size_t kept = std::min(written, max_output_ - produced_);
    makeRoom(kept);
    out_.append(reinterpret_cast<const char*>(buffer), kept);
    produced_ += kept;
    if (kept < written) {
      fail(InflateStatus::TooLarge, "inflates past " + std::to_string(max_output_) + " bytes");
      return consumed;
    }
    switch (status) {
      case Z_STREAM_END:
        phase_ = Phase::Ended;
        ++members_;
        return consumed;
      case Z_OK:
        if (z.avail_in == 0 && z.avail_out > 0) {
          return consumed;  // all input taken and all its output out
        }
        continue;
      case Z_BUF_ERROR:
        return consumed;  // no progress possible: the input is used up
      case Z_NEED_DICT:
        fail(InflateStatus::Invalid, "the stream needs a preset dictionary");
        return consumed;
      case Z_DATA_ERROR:
        fail(InflateStatus::Invalid,
             std::string(mode_ == Mode::Gzip ? "corrupt gzip stream" : "corrupt deflate stream") +
                 (z.msg != nullptr ? std::string(": ") + z.msg : std::string()));
        return consumed;
      default:
        fail(InflateStatus::Invalid, "zlib failed (" + std::to_string(status) + ")");
        return consumed;
    }
  }
}

InflateResult Inflater::finish() {
  if (!failure_.ok()) {
    return failure_;
  }
  finished_ = true;
  switch (mode_) {
    case Mode::Identity:
      return {};
    case Mode::Unsupported:
      return fail(InflateStatus::Invalid, "unsupported content coding");
    default:
      break;
  }
  if (phase_ == Phase::Ended) {
    return {};
  }
  if (phase_ == Phase::Start) {
    return fail(InflateStatus::Invalid,
                held_count_ == 0 ? "empty compressed body" : "truncated compressed body");
  }
  return fail(InflateStatus::Invalid, mode_ == Mode::Gzip
                                          ? "truncated gzip stream (no complete trailer)"
                                          : "truncated deflate stream");
}

InflateResult inflateBody(std::string_view compressed, ContentCoding coding, std::size_t max_output,
                          std::string& out) {
  Inflater inflater(coding, max_output, out);
  InflateResult fed = inflater.feed(compressed);
  if (!fed.ok()) {
    return fed;
  }
  return inflater.finish();
}

bool deflateGzip(std::string_view plain, std::string& out, int level) {
  if (level < Z_DEFAULT_COMPRESSION || level > Z_BEST_COMPRESSION) {
    return false;
  }
  const std::unique_ptr<z_stream_s> stream = newZStream();
  z_stream_s& z = *stream;
  // 16 + 15: a gzip wrapper with an empty header (no name, time 0); memLevel 8 is zlib's
  // default.
  if (deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return false;
  }
  const std::size_t start_size = out.size();
  const std::size_t bound = deflateBound(&z, static_cast<uLong>(plain.size()));
  out.resize(start_size + bound);
  std::size_t written = 0;
  int status = Z_OK;
  while (status == Z_OK || status == Z_BUF_ERROR) {
    const std::string_view slice = plain.substr(0, kMaxSlice);
    z.next_in = bytes(slice.data());
    z.avail_in = static_cast<uInt>(slice.size());
    const std::size_t room = std::min(kMaxSlice, bound - written);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + start_size + written);
    z.avail_out = static_cast<uInt>(room);
    const bool last = slice.size() == plain.size();
    status = deflate(&z, last ? Z_FINISH : Z_NO_FLUSH);
    written += room - z.avail_out;
    plain.remove_prefix(slice.size() - z.avail_in);
    if (status == Z_BUF_ERROR && room == z.avail_out && slice.size() == z.avail_in) {
      break;  // no progress: cannot happen within deflateBound(), but never loop on it
    }
  }
  deflateEnd(&z);
  if (status != Z_STREAM_END) {
    out.resize(start_size);
    return false;
  }
  out.resize(start_size + written);
  return true;
}

}  // namespace sluice::proxy::packages
