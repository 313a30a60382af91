// libFuzzer target for the sandbox resolver's query parser and response writer
// (proxy/dns/dns_message.h): the bytes are whatever a sandbox sends to its resolver.
// Invariants, each a trap on violation:
//   - Drop exactly when the message is shorter than a header or has QR=1; NotImp only for an
//     opcode other than 0;
//   - for Query: question_end lies inside the message (at its end without EDNS); the name is at
//     most 255 characters of [A-Za-z0-9-_.\] and digits; a name without '\' re-encodes to the
//     exact QNAME bytes of the message (no two wire names share a text);
//   - the response to a Query decodes as a response (written here from RFC 1035): same id, QR=1,
//     AA=1, RA=0, the chosen rcode, the question byte for byte, one A/AAAA record per address
//     owned by a pointer to offset 12, an OPT exactly when the query had one, nothing after;
//     its size is responseSize() and, with up to two addresses, within the UDP limit;
//   - the response's header and question, turned back into a query, parse to the same query;
//   - FormErr and NotImp get a header-only error echoing the id, plus the question when one
//     could be read, and then it is the message's own bytes.
// ASan checks that nothing reads past the span: each input is parsed from its own heap copy.
//
// Parser files: proxy/dns/dns_message.cc

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "policy/ip_address.h"
#include "proxy/dns/dns_message.h"

namespace {

namespace sd = sluice::proxy::dns;
using Bytes = std::vector<std::uint8_t>;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

std::uint16_t read16(std::span<const std::uint8_t> m, std::size_t at) {
  return static_cast<std::uint16_t>(m[at] << 8 | m[at + 1]);
}

bool nameCharOk(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '\\';
}

// The wire form of an unescaped name text.
Bytes encode(std::string_view name) {
  Bytes out;
  while (!name.empty()) {
    const std::size_t dot = name.find('.');
    const std::string_view label = name.substr(0, dot);
    out.push_back(static_cast<std::uint8_t>(label.size()));
    out.insert(out.end(), label.begin(), label.end());
    name = dot == std::string_view::npos ? std::string_view() : name.substr(dot + 1);
  }
  out.push_back(0);
  return out;
}

void checkResponse(std::span<const std::uint8_t> query_message, const sd::Query& q, const Bytes& r,
                   sd::Rcode rcode, const std::vector<sluice::policy::IpAddress>& addresses) {
  check(r.size() == sd::responseSize(q, addresses));
  check(r.size() >= q.question_end);
  check(read16(r, 0) == q.id);
  check((r[2] & 0x80) != 0);                           // QR
  check(((r[2] >> 3) & 0xf) == q.opcode);              // opcode copied
  check((r[2] & 0x04) != 0);                           // AA
  check((r[2] & 0x02) == 0);                           // TC
  check(((r[2] & 0x01) != 0) == q.recursion_desired);  // RD copied
  check((r[3] & 0x80) == 0);                           // RA: never
  check((r[3] & 0x0f) == static_cast<std::uint8_t>(rcode));
  check(read16(r, 4) == 1);
  check(read16(r, 6) == addresses.size());
  check(read16(r, 8) == 0);
  check(read16(r, 10) == (q.edns ? 1 : 0));
  check(std::memcmp(r.data() + 12, query_message.data() + 12, q.question_end - 12) == 0);
  std::size_t at = q.question_end;
  for (const auto& address : addresses) {
    check(at + 12 <= r.size());
    check(r[at] == 0xc0 && r[at + 1] == 12);
    const std::size_t length = address.isV4() ? 4 : 16;
    check(read16(r, at + 2) == (address.isV4() ? sd::kDnsTypeA : sd::kDnsTypeAaaa));
    check(read16(r, at + 4) == sd::kDnsClassIn);
    check(read16(r, at + 10) == length);
    at += 12;
    check(at + length <= r.size());
    check(std::memcmp(r.data() + at, address.bytes().data() + (16 - length), length) == 0);
    at += length;
  }
  if (q.edns) {
    check(at + 11 <= r.size());
    check(r[at] == 0 && read16(r, at + 1) == sd::kDnsTypeOpt);
    check(read16(r, at + 3) == sd::kEdnsUdpPayload);
    check(read16(r, at + 9) == 0);
    at += 11;
  }
  check(at == r.size());
  if (addresses.size() <= 2) {
    check(r.size() <= q.udpLimit());
  }

  // The response's header and question, made a query again, parse to the same query.
  Bytes back(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(q.question_end));
  back[2] &= static_cast<std::uint8_t>(~0x84);  // QR, AA
  back[3] = 0;
  back[6] = back[7] = back[10] = back[11] = 0;
  sd::Query again;
  check(sd::parseQuery(back, &again) == sd::ParseOutcome::Query);
  check(again.id == q.id && again.qtype == q.qtype && again.qclass == q.qclass);
  check(again.name() == q.name() && again.question_end == q.question_end);
  check(again.recursion_desired == q.recursion_desired && !again.edns);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An exact-size heap copy, so ASan flags any read past the span.
  std::unique_ptr<std::uint8_t[]> copy(new std::uint8_t[size == 0 ? 1 : size]);
  if (size > 0) {
    std::memcpy(copy.get(), data, size);
  }
  const std::span<const std::uint8_t> message(copy.get(), size);

  sd::Query q;
  const sd::ParseOutcome outcome = sd::parseQuery(message, &q);
  const bool runt = size < sd::kDnsHeaderBytes;
  const bool is_response = !runt && (message[2] & 0x80) != 0;
  check((outcome == sd::ParseOutcome::Drop) == (runt || is_response));
  if (outcome == sd::ParseOutcome::Drop) {
    return 0;
  }
  const std::uint8_t opcode = (message[2] >> 3) & 0xf;
  check((outcome == sd::ParseOutcome::NotImp) == (opcode != 0));
  check(q.id == read16(message, 0));

  if (outcome != sd::ParseOutcome::Query) {
    const sd::Rcode rcode =
        outcome == sd::ParseOutcome::NotImp ? sd::Rcode::NotImp : sd::Rcode::FormErr;
    Bytes error;
    sd::buildError(error, message, rcode);
    check(error.size() >= 12);
    check(read16(error, 0) == q.id);
    check((error[2] & 0x80) != 0 && (error[3] & 0x0f) == static_cast<std::uint8_t>(rcode));
    const std::uint16_t qd = read16(error, 4);
    check(qd <= 1 && read16(error, 6) == 0 && read16(error, 8) == 0 && read16(error, 10) == 0);
    check((qd == 1) == (error.size() > 12));
    check(error.size() <= size);
    check(std::memcmp(error.data() + 12, message.data() + 12, error.size() - 12) == 0);
    return 0;
  }

  // A well-formed query.
  check(q.opcode == 0);
  check(q.question_end > 12 + 4 && q.question_end <= size);
  check(q.edns || q.question_end == size);
  check(q.name_length <= 255);
  const std::string_view name = q.name();
  for (char c : name) {
    check(nameCharOk(c));
  }
  if (name.find('\\') == std::string_view::npos) {
    check(name.size() <= 253);
    const Bytes wire = encode(name);
    check(wire.size() + 4 + 12 == q.question_end);
    check(std::memcmp(wire.data(), message.data() + 12, wire.size()) == 0);
  }

  // Answer it with 0-3 addresses picked from the input, both families, and a varying rcode.
  std::vector<sluice::policy::IpAddress> addresses;
  const std::size_t count = size % 4;
  for (std::size_t i = 0; i < count; ++i) {
    std::array<std::uint8_t, 16> bytes{};
    for (std::size_t j = 0; j < bytes.size(); ++j) {
      bytes[j] = message[(i * 16 + j) % size];
    }
    if (bytes[0] & 1) {
      addresses.push_back(sluice::policy::IpAddress::fromV4(
          static_cast<std::uint32_t>(bytes[1] << 24 | bytes[2] << 16 | bytes[3] << 8 | bytes[4])));
    } else {
      addresses.push_back(sluice::policy::IpAddress::fromV6(bytes));
    }
  }
  const sd::Rcode rcode =
      addresses.empty() && (size & 4) ? sd::Rcode::NxDomain : sd::Rcode::NoError;
  Bytes response{0xee};  // appended to, never overwritten
  sd::buildResponse(response, message, q, rcode, addresses, static_cast<std::uint32_t>(size));
  check(response[0] == 0xee);
  response.erase(response.begin());
  checkResponse(message, q, response, rcode, addresses);
  return 0;
}
