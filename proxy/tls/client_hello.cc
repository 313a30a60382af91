#include "proxy/tls/client_hello.h"

#include <algorithm>
#include <bitset>
#include <cstring>

namespace sluice::proxy::tls {

namespace {

constexpr std::uint8_t kContentHandshake = 22;
constexpr std::uint8_t kContentAlert = 21;
constexpr std::uint8_t kVersionMajor = 3;
constexpr std::size_t kRecordHeader = 5;
// RFC 8446 §5.1: a plaintext fragment is at most 2^14 bytes; OpenSSL refuses a longer one with
// record_overflow, so a longer record can never carry a hello that OpenSSL reads.
constexpr std::size_t kMaxFragment = 16384;
constexpr std::size_t kHandshakeHeader = 4;
constexpr std::uint8_t kClientHello = 1;
constexpr std::size_t kRandom = 32;
constexpr std::size_t kMaxSessionId = 32;

constexpr std::uint16_t kExtServerName = 0;
constexpr std::uint16_t kExtUseSrtp = 14;  // RFC 5764: DTLS only
constexpr std::uint16_t kExtAlpn = 16;
constexpr std::uint16_t kExtPreSharedKey = 41;
constexpr std::uint16_t kExtSupportedVersions = 43;
constexpr std::uint16_t kExtEch = 0xfe0d;
constexpr std::uint16_t kExtEchFirstDraft = 0xfe08;  // drafts 13..15 shipped in browsers
constexpr std::uint16_t kExtEsni = 0xffce;
constexpr std::uint8_t kNameTypeHostName = 0;
constexpr std::uint16_t kTls13 = 0x0304;

std::size_t be16(const std::uint8_t* p) { return static_cast<std::size_t>(p[0] << 8 | p[1]); }

std::size_t ceilDiv(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

// The record walk's verdict: either a terminal status, or Done meaning the whole handshake
// message and every record carrying it are in the buffer.
struct Framing {
  HelloStatus status = HelloStatus::NeedMore;
  std::size_t message_length = 0;  // the handshake message, its 4-byte header included
  std::size_t consumed = 0;
};

// Walks the records at the start of `buf` until they hold the whole handshake message. Every
// decision reads only bytes before the point where the walk stops, in order, so a terminal
// answer for a prefix is the answer for every longer buffer too.
Framing walkRecords(std::span<const std::uint8_t> buf) {
  const std::size_t size = buf.size();
  std::size_t pos = 0;   // the current record's header
  std::size_t seen = 0;  // message bytes carried by the records before it
  std::array<std::uint8_t, kHandshakeHeader> header{};
  std::size_t message_length = 0;  // 0 until the handshake header has been seen
  for (;;) {
    // The first record decides NotTls, from its first byte if it can: an HTTP request, SSH
    // banner or SSLv2-compatible hello (high bit set) never starts with 22.
    const bool first = pos == 0;
    if (pos >= size) {
      return {};
    }
    if (buf[pos] != kContentHandshake) {
      // Anything but a handshake record before the hello is complete (change_cipher_spec,
      // alert, application data) is refused, as OpenSSL refuses it.
      return {first ? HelloStatus::NotTls : HelloStatus::Malformed};
    }
    if (pos + 1 < size && buf[pos + 1] != kVersionMajor) {
      // OpenSSL checks only the major version of the records carrying the first hello.
      return {first ? HelloStatus::NotTls : HelloStatus::Malformed};
    }
    if (size - pos < kRecordHeader) {
      return {};
    }
    const std::size_t length = be16(&buf[pos + 3]);
    if (length == 0 || length > kMaxFragment) {
      // RFC 8446 §5.1 forbids empty handshake fragments; OpenSSL would tolerate a few, but
      // a hello carried by them is one no real client sends.
      return {HelloStatus::Malformed};
    }
    const std::size_t payload = pos + kRecordHeader;
    const std::size_t record_end = payload + length;
    if (record_end > kMaxClientHelloBytes) {
      return {HelloStatus::TooLarge};
    }
    // Gather the handshake header, which may itself be split across 1-byte records.
    const std::size_t available = std::min(length, size - payload);
    for (std::size_t i = 0; i < available && seen + i < kHandshakeHeader; ++i) {
      header[seen + i] = buf[payload + i];
      if (seen + i == 0 && buf[payload] != kClientHello) {
        return {HelloStatus::NotTls};  // a handshake, but not one a client starts with
      }
      if (seen + i + 1 == kHandshakeHeader) {
        message_length = kHandshakeHeader + (static_cast<std::size_t>(header[1]) << 16 |
                                             static_cast<std::size_t>(header[2]) << 8 |
                                             static_cast<std::size_t>(header[3]));
      }
    }
    if (message_length != 0) {
      // TooLarge as soon as the length is known: even packed into full records, what is left
      // of the message cannot fit.
      if (message_length > kMaxClientHelloBytes) {
        return {HelloStatus::TooLarge};
      }
      if (seen + length < message_length) {
        const std::size_t rest = message_length - seen - length;
        if (record_end + rest + kRecordHeader * ceilDiv(rest, kMaxFragment) >
            kMaxClientHelloBytes) {
          return {HelloStatus::TooLarge};
        }
      }
    }
    if (record_end > size) {
      return {};
    }
    seen += length;
    pos = record_end;
    if (message_length != 0 && seen >= message_length) {
      return {HelloStatus::Done, message_length, pos};
    }
  }
}

// Reads the handshake message as one stream of bytes across the records walkRecords() checked,
// without copying it: index arithmetic over the fragments. Every read is bounded by the
// current container (`limit_`, a logical offset into the message); a read past it fails,
// which the parser reports as Malformed. Containers nest with enter()/leave(), like
// OpenSSL's PACKET_get_length_prefixed_*.
class MessageReader {
 public:
  MessageReader(std::span<const std::uint8_t> records, std::size_t message_length)
      : buf_(records), limit_(message_length) {}

  std::size_t remaining() const { return limit_ - offset_; }

  bool u8(std::uint8_t& out) { return copy(&out, 1); }
  bool u16(std::uint16_t& out) {
    std::uint8_t b[2];
    if (!copy(b, 2)) {
      return false;
    }
    out = static_cast<std::uint16_t>(b[0] << 8 | b[1]);
    return true;
  }
  bool skip(std::size_t n) { return copy(nullptr, n); }

  // Copies the next n bytes to `out` (or drops them when `out` is null).
  bool copy(std::uint8_t* out, std::size_t n) {
    if (n > remaining()) {
      return false;
    }
    while (n > 0) {
      if (left_ == 0 && !nextRecord()) {
        return false;
      }
      const std::size_t take = std::min(n, left_);
      if (out != nullptr) {
        std::memcpy(out, &buf_[at_], take);
        out += take;
      }
      at_ += take;
      left_ -= take;
      offset_ += take;
      n -= take;
    }
    return true;
  }

  // Makes the next `length` bytes the current container; `outer` keeps the enclosing limit.
  bool enter(std::size_t length, std::size_t& outer) {
    if (length > remaining()) {
      return false;
    }
    outer = limit_;
    limit_ = offset_ + length;
    return true;
  }
  // Ends the current container, which must have been read exactly: trailing bytes inside a
  // length-prefixed structure are refused, as OpenSSL's PACKET_as_length_prefixed_* does.
  bool leave(std::size_t outer) {
    if (offset_ != limit_) {
      return false;
    }
    limit_ = outer;
    return true;
  }

 private:
  bool nextRecord() {
    // walkRecords() checked these headers; checked again so this never reads past the span.
    if (buf_.size() - next_ < kRecordHeader) {
      return false;
    }
    const std::size_t length = be16(&buf_[next_ + 3]);
    if (length == 0 || buf_.size() - next_ - kRecordHeader < length) {
      return false;
    }
    at_ = next_ + kRecordHeader;
    left_ = length;
    next_ = at_ + length;
    return true;
  }

  std::span<const std::uint8_t> buf_;
  std::size_t next_ = 0;    // the next record header in buf_
  std::size_t at_ = 0;      // the next message byte in buf_
  std::size_t left_ = 0;    // message bytes left in the current record
  std::size_t offset_ = 0;  // logical offset in the message
  std::size_t limit_;       // logical end of the current container
};

// server_name (RFC 6066 §3). OpenSSL 3.0 accepts only a list of exactly one host_name entry
// (decode_error otherwise) of at most 255 bytes without NUL (unrecognized_name otherwise).
// The structure is checked here like any other length-prefixed data (Malformed); a list that
// is well-formed but names no single host is SniState::Malformed, which the caller refuses. A
// NUL is passed through: canonicalisation refuses it, and a parser that stopped at it would be
// the strncpy bug: a name cut at its NUL is another name.
bool parseServerName(MessageReader& r, ClientHelloInfo& info) {
  std::uint16_t list_length = 0;
  std::size_t outer = 0;
  if (!r.u16(list_length) || !r.enter(list_length, outer)) {
    return false;
  }
  std::size_t host_names = 0;
  bool other_types = false;
  std::size_t host_length = 0;
  while (r.remaining() > 0) {
    std::uint8_t type = 0;
    std::uint16_t length = 0;
    if (!r.u8(type) || !r.u16(length)) {
      return false;
    }
    if (type != kNameTypeHostName) {
      other_types = true;
    } else {
      ++host_names;
    }
    const bool keep = type == kNameTypeHostName && host_names == 1 && length <= kMaxSniBytes;
    if (keep) {
      host_length = length;
    }
    if (!r.copy(keep ? reinterpret_cast<std::uint8_t*>(info.sni_bytes.data()) : nullptr, length)) {
      return false;
    }
  }
  if (!r.leave(outer)) {
    return false;
  }
  if (host_names == 1 && !other_types && host_length > 0) {
    info.sni_state = SniState::Present;
    info.sni_length = static_cast<std::uint8_t>(host_length);
  } else {
    info.sni_state = SniState::Malformed;
    info.sni_bytes = {};
    info.sni_length = 0;
  }
  return true;
}

// application_layer_protocol_negotiation (RFC 7301 §3.1): a non-empty list of names of 1..255
// bytes, which must fill the extension (OpenSSL: decode_error otherwise).
bool parseAlpn(MessageReader& r, ClientHelloInfo& info) {
  static constexpr std::string_view kHttp11 = "http/1.1";
  static constexpr std::string_view kH2 = "h2";
  std::uint16_t list_length = 0;
  std::size_t outer = 0;
  if (!r.u16(list_length) || list_length < 2 || !r.enter(list_length, outer)) {
    return false;
  }
  while (r.remaining() > 0) {
    std::uint8_t length = 0;
    std::array<std::uint8_t, 255> name{};
    if (!r.u8(length) || length == 0 || !r.copy(name.data(), length)) {
      return false;
    }
    const std::string_view protocol(reinterpret_cast<const char*>(name.data()), length);
    info.offers_http11 = info.offers_http11 || protocol == kHttp11;
    info.offers_h2 = info.offers_h2 || protocol == kH2;
  }
  info.offers_alpn = true;
  return r.leave(outer);
}

// supported_versions (RFC 8446 §4.2.1): ProtocolVersion versions<2..254>, filling the extension.
bool parseSupportedVersions(MessageReader& r, ClientHelloInfo& info) {
  std::uint8_t list_length = 0;
  std::size_t outer = 0;
  if (!r.u8(list_length) || list_length < 2 || list_length % 2 != 0 ||
      !r.enter(list_length, outer)) {
    return false;
  }
  while (r.remaining() > 0) {
    std::uint16_t version = 0;
    if (!r.u16(version)) {
      return false;
    }
    info.offers_tls13 = info.offers_tls13 || version == kTls13;
  }
  return r.leave(outer);
}

bool parseExtensions(MessageReader& r, ClientHelloInfo& info) {
  // RFC 8446 §4.2: no type twice. OpenSSL refuses a repeated type it knows
  // (illegal_parameter); refusing every repeat keeps the two parsers from ever reading
  // different copies of one extension. 8 KiB on the stack, and linear in the hello.
  std::bitset<65536> seen;
  while (r.remaining() > 0) {
    std::uint16_t type = 0;
    std::uint16_t length = 0;
    std::size_t outer = 0;
    if (!r.u16(type) || !r.u16(length) || seen.test(type) || !r.enter(length, outer)) {
      return false;
    }
    seen.set(type);
    bool ok = true;
    switch (type) {
      case kExtServerName:
        ok = parseServerName(r, info);
        break;
      case kExtAlpn:
        ok = parseAlpn(r, info);
        break;
      case kExtSupportedVersions:
        ok = parseSupportedVersions(r, info);
        break;
      case kExtUseSrtp:
        // OpenSSL 3.0 refuses an extension it knows outside the messages it belongs to
        // (verify_extension: illegal_parameter); of all 65536 types only this DTLS-only one
        // hits that in a TLS ClientHello. Refusing it too keeps every hello read here one that
        // OpenSSL reads as well (found by the differential test: a mutation of 13 into 14).
        ok = false;
        break;
      default:
        if ((type >= kExtEchFirstDraft && type <= kExtEch) || type == kExtEsni) {
          info.has_ech = true;
        }
        ok = r.skip(length);
        break;
    }
    if (!ok || !r.leave(outer)) {
      return false;
    }
    // RFC 8446 §4.2.11: pre_shared_key comes last (OpenSSL: illegal_parameter).
    if (type == kExtPreSharedKey && r.remaining() != 0) {
      return false;
    }
  }
  return true;
}

// The ClientHello body (RFC 8446 §4.1.2, RFC 5246 §7.4.1.2), with OpenSSL 3.0's checks.
bool parseBody(MessageReader& r, ClientHelloInfo& info) {
  std::uint16_t version = 0;
  std::uint8_t session_id = 0;
  std::uint16_t cipher_suites = 0;
  std::uint8_t compressions = 0;
  if (!r.u16(version) || !r.skip(kRandom) || !r.u8(session_id) || session_id > kMaxSessionId ||
      !r.skip(session_id) || !r.u16(cipher_suites) || cipher_suites < 2 || cipher_suites % 2 != 0 ||
      !r.skip(cipher_suites) || !r.u8(compressions) || compressions == 0) {
    return false;
  }
  info.legacy_version = version;
  bool has_null = false;
  for (std::size_t i = 0; i < compressions; ++i) {
    std::uint8_t method = 0;
    if (!r.u8(method)) {
      return false;
    }
    has_null = has_null || method == 0;
  }
  if (!has_null) {
    return false;
  }
  if (r.remaining() == 0) {
    return true;  // no extensions block at all: legal in TLS 1.2 syntax
  }
  std::uint16_t extensions = 0;
  if (!r.u16(extensions) || extensions != r.remaining()) {
    return false;
  }
  return parseExtensions(r, info);
}

}  // namespace

std::string_view toString(HelloStatus s) {
  switch (s) {
    case HelloStatus::NeedMore:
      return "need_more";
    case HelloStatus::Done:
      return "done";
    case HelloStatus::NotTls:
      return "not_tls";
    case HelloStatus::Malformed:
      return "malformed";
    case HelloStatus::TooLarge:
      return "too_large";
  }
  return "unknown";
}

std::string_view toString(SniState s) {
  switch (s) {
    case SniState::Absent:
      return "absent";
    case SniState::Present:
      return "present";
    case SniState::Malformed:
      return "malformed";
  }
  return "unknown";
}

HelloResult parseClientHello(std::span<const std::uint8_t> buffered) {
  const Framing framing = walkRecords(buffered);
  if (framing.status != HelloStatus::Done) {
    return {framing.status, {}};
  }
  MessageReader reader(buffered.first(framing.consumed), framing.message_length);
  HelloResult result{HelloStatus::Done, {}};
  if (!reader.skip(kHandshakeHeader) || !parseBody(reader, result.info) ||
      reader.remaining() != 0) {
    return {HelloStatus::Malformed, {}};
  }
  result.info.consumed = framing.consumed;
  return result;
}

std::array<std::uint8_t, 7> alertRecord(std::uint8_t description) {
  // Record version 0x0303: what RFC 8446 §5.1 asks of every record but an initial hello, and
  // what TLS 1.0-1.2 clients accept on an alert before any version is agreed.
  constexpr std::uint8_t kFatal = 2;
  return {kContentAlert, kVersionMajor, 3, 0, 2, kFatal, description};
}

}  // namespace sluice::proxy::tls
