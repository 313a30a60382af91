#pragma once
// Content codings of registry metadata (docs/packages.md#metadata): sluice inflates a gzip'd or
// deflate'd document to filter it, and serves the result as identity or gzip'd again. Sans-IO:
// bytes in memory in, bytes appended to a caller-owned string out, on zlib.
//
// Bounds (every input byte is hostile):
//   - an Inflater appends at most `max_output` bytes to its string and never grows the string's
//     capacity past its size on entry plus max_output (but for libstdc++'s rounding of tiny
//     strings to 30 bytes); it reserves as output comes (4 KiB, then doubling), never by a size
//     field of the input, so a small body claiming or inflating to gigabytes costs no more;
//     zlib writes into a 16 KiB buffer on the stack, whose one byte past the bound tells
//     "exactly the bound" from "past it";
//   - its time is linear in the input plus the output (zlib; a gzip member needs at least 18
//     bytes, so concatenated members are as many as the input allows);
//   - zlib's own state: about 7 KiB plus a 32 KiB window per Inflater.
// No recursion. The header parsers read each byte of their value a bounded number of times.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

struct z_stream_s;  // zlib's, kept out of this header so that includers need not see zlib.h

namespace sluice::proxy::packages {

enum class ContentCoding { Identity, Gzip, Deflate, Unsupported };

// A Content-Encoding value (RFC 9110 §8.4): a comma-separated list of codings, case-insensitive,
// with optional whitespace and empty elements. "x-gzip" is gzip (§8.4.1.3); "identity"
// elements are ignored; no coding at all (an empty value) is Identity. More than one
// non-identity coding ("gzip, gzip", "deflate, gzip"), a coding with parameters or a malformed
// element, and every coding zlib cannot decode ("br", "zstd", "compress") are Unsupported.
ContentCoding parseContentEncoding(std::string_view value);

// Whether a request's Accept-Encoding (RFC 9110 §12.5.3) admits a response in identity, or
// gzip'd. Pass "" when the request has no Accept-Encoding: identity is then acceptable and gzip
// is not (the RFC would allow any coding, but sluice prefers identity and every client takes
// it). Identity is acceptable unless "identity;q=0", or "*;q=0" with no "identity" entry, says
// otherwise; gzip only when "gzip" (or "x-gzip"), or failing those "*", is listed with q > 0.
// An element whose weight is malformed (q above 1, more than three decimals, another
// parameter) is ignored; a name listed twice with q=0 once is excluded.
bool acceptsIdentity(std::string_view accept_encoding);
bool acceptsGzip(std::string_view accept_encoding);

enum class InflateStatus {
  Ok,        // from feed(): no error so far; from finish(): the body is complete
  TooLarge,  // the output would exceed max_output: stopped there
  Invalid,   // not a valid stream: corrupt, truncated, trailing data, unsupported coding
};

struct InflateResult {
  InflateStatus status = InflateStatus::Ok;
  std::string message;  // empty when Ok: what was wrong, for the audit record and the log

  bool ok() const { return status == InflateStatus::Ok; }
};

// Decodes a body fed in pieces, as the proxy receives it. Formats:
//   - Gzip: RFC 1952, CRC-32 and length of every member checked. Concatenated members are
//     accepted, as gzip(1) and RFC 1952 §2.2 allow, and inflate to their concatenation; any
//     other byte after a member (zero padding included) is Invalid.
//   - Deflate: the zlib format of RFC 1950 (RFC 9110 §8.4.1.2), or raw deflate (RFC 1951)
//     as some servers send; told apart by the first two bytes, which a zlib stream makes a
//     valid zlib header (method 8, window ≤ 32 KiB, check bits; one asking for a preset
//     dictionary is Invalid). So a raw stream that happens to begin so is read as zlib and
//     fails: Invalid, never misread.
//     Bytes after the end of the stream are Invalid.
//   - Identity: the body copied through, with the same bound.
//   - Unsupported: Invalid at the first byte (and at finish()).
//   - RawDeflate (a ZIP member, zip_reader.h): raw deflate only.
// A stream that ends before its end (gzip trailer, zlib checksum, final deflate block), and an
// empty body of a compressed coding, are Invalid at finish(). A failure is final: every later
// feed() and finish() returns it again. On a failure `out` keeps what was inflated before it
// (exactly max_output bytes for TooLarge); callers discard it.
class Inflater {
 public:
  struct RawDeflate {};

  // `out` must outlive the Inflater; output is appended to what it holds.
  Inflater(ContentCoding coding, std::size_t max_output, std::string& out);
  Inflater(RawDeflate, std::size_t max_output, std::string& out);
  ~Inflater();
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  InflateResult feed(std::string_view chunk);
  InflateResult finish();

  // Bytes appended to `out` so far.
  std::size_t produced() const { return produced_; }

 private:
  enum class Mode { Identity, Gzip, ZlibOrRaw, Raw, Unsupported };
  enum class Phase {
    Start,   // before the first byte (ZlibOrRaw: until two bytes tell which format)
    Inside,  // within a stream, or a gzip member
    Ended,   // after the end of a stream (Gzip: of a member; more bytes begin the next)
  };

  Inflater(Mode mode, std::size_t max_output, std::string& out);
  bool startZlib(int window_bits);
  // Inflates from `input` within the current stream; returns the bytes it consumed, which is
  // all of them unless the stream ended before. Sets failure_ on an error.
  std::size_t inflateSome(std::string_view input);
  void makeRoom(std::size_t wanted);
  InflateResult fail(InflateStatus status, std::string message);
  InflateResult feedIdentity(std::string_view chunk);

  struct ZStreamDeleter {
    void operator()(z_stream_s* stream) const;
  };

  Mode mode_;
  Phase phase_ = Phase::Start;
  std::string& out_;
  std::size_t start_size_;  // out_.size() on entry
  std::size_t max_output_;
  std::size_t capacity_limit_;  // start_size_ + max_output_ + 1, saturated
  std::size_t produced_ = 0;
  std::size_t member_bytes_ = 0;    // bytes of the current gzip member seen (its magic checked)
  std::size_t members_ = 0;         // streams or gzip members that ended
  unsigned char held_[2] = {0, 0};  // ZlibOrRaw: the first bytes, until they tell the format
  std::size_t held_count_ = 0;
  bool finished_ = false;
  InflateResult failure_;  // status Ok while none
  std::unique_ptr<z_stream_s, ZStreamDeleter> stream_;
};

// One-shot: the whole body at once, through an Inflater.
InflateResult inflateBody(std::string_view compressed, ContentCoding coding, std::size_t max_output,
                          std::string& out);

// Appends `plain` gzip'd (one member, no file name or time) at `level` (0-9, or -1 for zlib's
// default) to `out`. Allocates deflateBound() once; false (out as on entry) on a bad level or
// a zlib failure.
[[nodiscard]] bool deflateGzip(std::string_view plain, std::string& out, int level);

}  // namespace sluice::proxy::packages
