#include "proxy/dns/dns_message.h"

#include <algorithm>
#include <cassert>
#include <optional>

namespace sluice::proxy::dns {

namespace {

constexpr std::size_t kMaxLabelBytes = 63;
constexpr std::size_t kMaxNameWireBytes = 255;
constexpr std::size_t kOptFixedBytes = 11;     // root name, TYPE, CLASS, TTL, RDLENGTH
constexpr std::size_t kRecordFixedBytes = 12;  // pointer, TYPE, CLASS, TTL, RDLENGTH
constexpr std::uint8_t kFlagQr = 0x80;
constexpr std::uint8_t kFlagAa = 0x04;
constexpr std::uint8_t kFlagRd = 0x01;
constexpr std::uint8_t kOpcodeMask = 0x78;  // bits 3-6 of the third header byte

std::uint16_t read16(std::span<const std::uint8_t> m, std::size_t at) {
  return static_cast<std::uint16_t>(m[at] << 8 | m[at + 1]);
}

void put16(std::vector<std::uint8_t>& out, std::uint16_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v));
}

void put32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  put16(out, static_cast<std::uint16_t>(v >> 16));
  put16(out, static_cast<std::uint16_t>(v));
}

bool isPlainNameByte(std::uint8_t b) {
  return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') || b == '-' ||
         b == '_';
}

// Writes the name text into a fixed buffer, cutting it at the buffer's end. The cut can only
// happen inside an escaped name (plain text is at most 253 characters), after its first '\\'.
class NameWriter {
 public:
  explicit NameWriter(Query* q) : q_(q) {}
  void put(char c) {
    if (length_ < kCapacity) {
      q_->name_buf[length_++] = c;
    }
  }
  void putByte(std::uint8_t b) {
    if (isPlainNameByte(b)) {
      put(static_cast<char>(b));
      return;
    }
    put('\\');
    put(static_cast<char>('0' + b / 100));
    put(static_cast<char>('0' + b / 10 % 10));
    put(static_cast<char>('0' + b % 10));
  }
  void finish() { q_->name_length = static_cast<std::uint8_t>(length_); }

 private:
  static constexpr std::size_t kCapacity = 255;  // name_length is a uint8_t
  Query* q_;
  std::size_t length_ = 0;
};

// Reads the question that starts right after the header: QNAME, QTYPE, QCLASS. Returns the
// offset just past it, or nullopt when it is not a question a query may carry.
std::optional<std::size_t> parseQuestion(std::span<const std::uint8_t> m, Query* out) {
  std::size_t at = kDnsHeaderBytes;
  std::size_t wire = 0;  // QNAME bytes so far, length octets included
  NameWriter name(out);
  for (bool first = true;; first = false) {
    if (at >= m.size()) {
      return std::nullopt;
    }
    const std::size_t length = m[at++];
    ++wire;
    if (length == 0) {
      break;
    }
    // 0x40-0xbf are the obsolete extended label types, 0xc0-0xff compression pointers.
    if (length > kMaxLabelBytes) {
      return std::nullopt;
    }
    wire += length;
    if (wire + 1 > kMaxNameWireBytes || m.size() - at < length) {  // + 1: the root label
      return std::nullopt;
    }
    if (!first) {
      name.put('.');
    }
    for (std::size_t i = 0; i < length; ++i) {
      name.putByte(m[at + i]);
    }
    at += length;
  }
  name.finish();
  if (m.size() - at < 4) {
    return std::nullopt;
  }
  out->qtype = read16(m, at);
  out->qclass = read16(m, at + 2);
  return at + 4;
}

// Reads an OPT pseudo-record at `at`; returns the offset past it.
std::optional<std::size_t> parseOpt(std::span<const std::uint8_t> m, std::size_t at, Query* out) {
  if (m.size() - at < kOptFixedBytes || m[at] != 0 || read16(m, at + 1) != kDnsTypeOpt) {
    return std::nullopt;
  }
  out->edns = true;
  out->edns_udp_size = read16(m, at + 3);
  // TTL (extended RCODE, version, DO flag) is not checked: sluice answers as EDNS version 0
  // whatever the client speaks, and sends no DNSSEC records.
  const std::size_t rdlength = read16(m, at + 9);
  at += kOptFixedBytes;
  if (m.size() - at < rdlength) {
    return std::nullopt;
  }
  return at + rdlength;
}

void putHeader(std::vector<std::uint8_t>& out, std::span<const std::uint8_t> query_message,
               std::uint8_t extra_flags, Rcode rcode, std::uint16_t qdcount, std::uint16_t ancount,
               std::uint16_t arcount) {
  out.push_back(query_message[0]);  // the id, as sent
  out.push_back(query_message[1]);
  const std::uint8_t f1 = query_message[2];
  out.push_back(
      static_cast<std::uint8_t>(kFlagQr | (f1 & kOpcodeMask) | extra_flags | (f1 & kFlagRd)));
  out.push_back(static_cast<std::uint8_t>(rcode));  // RA=0: sluice never recurses
  put16(out, qdcount);
  put16(out, ancount);
  put16(out, 0);
  put16(out, arcount);
}

}  // namespace

std::size_t Query::udpLimit() const {
  if (!edns) {
    return kDnsMaxUdpBytes;
  }
  return std::clamp<std::size_t>(edns_udp_size, kDnsMaxUdpBytes, kEdnsUdpPayload);
}

ParseOutcome parseQuery(std::span<const std::uint8_t> message, Query* out) {
  out->id = 0;
  out->recursion_desired = false;
  out->opcode = 0;
  out->qtype = 0;
  out->qclass = 0;
  out->name_length = 0;
  out->question_end = 0;
  out->edns = false;
  out->edns_udp_size = 0;
  if (message.size() < kDnsHeaderBytes) {
    return ParseOutcome::Drop;
  }
  const std::uint8_t f1 = message[2];
  if (f1 & kFlagQr) {
    return ParseOutcome::Drop;
  }
  out->id = read16(message, 0);
  out->opcode = static_cast<std::uint8_t>((f1 & kOpcodeMask) >> 3);
  out->recursion_desired = (f1 & kFlagRd) != 0;
  if (out->opcode != 0) {
    return ParseOutcome::NotImp;
  }
  const std::uint16_t qdcount = read16(message, 4);
  const std::uint16_t ancount = read16(message, 6);
  const std::uint16_t nscount = read16(message, 8);
  const std::uint16_t arcount = read16(message, 10);
  if (qdcount != 1 || ancount != 0 || nscount != 0 || arcount > 1) {
    return ParseOutcome::FormErr;
  }
  std::optional<std::size_t> at = parseQuestion(message, out);
  if (!at) {
    return ParseOutcome::FormErr;
  }
  out->question_end = *at;
  if (arcount == 1) {
    at = parseOpt(message, *at, out);
    if (!at) {
      return ParseOutcome::FormErr;
    }
  }
  if (*at != message.size()) {
    return ParseOutcome::FormErr;
  }
  return ParseOutcome::Query;
}

std::size_t responseSize(const Query& query, std::span<const policy::IpAddress> addresses) {
  std::size_t size = query.question_end + (query.edns ? kOptFixedBytes : 0);
  for (const policy::IpAddress& address : addresses) {
    size += kRecordFixedBytes + (address.isV4() ? 4 : 16);
  }
  return size;
}

void buildResponse(std::vector<std::uint8_t>& out, std::span<const std::uint8_t> query_message,
                   const Query& query, Rcode rcode, std::span<const policy::IpAddress> addresses,
                   std::uint32_t ttl) {
  assert(query.question_end > kDnsHeaderBytes && query.question_end <= query_message.size());
  assert(addresses.size() <= 0xffff);
  out.reserve(out.size() + responseSize(query, addresses));
  putHeader(out, query_message, kFlagAa, rcode, 1, static_cast<std::uint16_t>(addresses.size()),
            query.edns ? 1 : 0);
  out.insert(out.end(), query_message.begin() + kDnsHeaderBytes,
             query_message.begin() + static_cast<std::ptrdiff_t>(query.question_end));
  for (const policy::IpAddress& address : addresses) {
    put16(out, static_cast<std::uint16_t>(0xc000 | kDnsHeaderBytes));  // the question's name
    put16(out, address.isV4() ? kDnsTypeA : kDnsTypeAaaa);
    put16(out, kDnsClassIn);
    put32(out, ttl);
    const auto& bytes = address.bytes();
    const std::size_t from = address.isV4() ? 12 : 0;  // IPv4 is stored in its mapped form
    put16(out, static_cast<std::uint16_t>(bytes.size() - from));
    out.insert(out.end(), bytes.begin() + static_cast<std::ptrdiff_t>(from), bytes.end());
  }
  if (query.edns) {
    out.push_back(0);  // root
    put16(out, kDnsTypeOpt);
    put16(out, kEdnsUdpPayload);
    put32(out, 0);  // extended RCODE 0, version 0, no DO
    put16(out, 0);  // no options
  }
}

void buildError(std::vector<std::uint8_t>& out, std::span<const std::uint8_t> query_message,
                Rcode rcode) {
  if (query_message.size() < kDnsHeaderBytes) {
    return;
  }
  Query scratch;
  std::optional<std::size_t> question_end;
  if (read16(query_message, 4) == 1) {
    question_end = parseQuestion(query_message, &scratch);
  }
  putHeader(out, query_message, 0, rcode, question_end ? 1 : 0, 0, 0);
  if (question_end) {
    out.insert(out.end(), query_message.begin() + kDnsHeaderBytes,
               query_message.begin() + static_cast<std::ptrdiff_t>(*question_end));
  }
}

}  // namespace sluice::proxy::dns
