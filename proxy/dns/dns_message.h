#pragma once
// The sandbox resolver's wire format (RFC 1035, RFC 6891 for EDNS), sans-IO: bytes of one DNS
// message in, a verdict and a parsed Query out; responses appended to a caller's buffer. No
// loop, no sockets, no allocation while parsing. Every input is hostile: it comes from the
// sandbox (docs/wire.md#the-sandboxs-resolver).
//
// What a query must look like to be answered (anything else is FormErr, NotImp or Drop):
//   - a 12-byte header with QR=0 and OPCODE=QUERY (0);
//   - QDCOUNT exactly 1, ANCOUNT 0, NSCOUNT 0, ARCOUNT 0 or 1;
//   - one question whose QNAME is plain labels of 1..63 bytes ending in the root label, at most
//     255 bytes on the wire (no compression pointer: a query has nothing to point back to, and
//     refusing pointers keeps the parser free of loops);
//   - with ARCOUNT 1, an OPT pseudo-record (owner name root, type 41); its CLASS is the
//     client's UDP payload size, its RDATA is skipped by its length;
//   - nothing after that.
//
// Names: Query::name() is the QNAME as dotted text, letter case as received, no trailing dot,
// for the caller to canonicalise (policy::canonicalizeHost). Label bytes in [A-Za-z0-9-_] are
// copied; any other byte ('.', '\\', spaces, NUL, bytes >= 0x80) is written as "\DDD", its
// decimal value, as in RFC 1035 presentation format. So a label "a.b" never reads as the two
// labels "a" and "b", and every such name contains a '\\', which canonicalizeHost refuses
// (BadCharacter): the name is still a well-formed query, answered NXDOMAIN by the policy. Such
// a name may be cut short at 255 characters; the '\\' always survives the cut.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "policy/ip_address.h"

namespace sluice::proxy::dns {

inline constexpr std::uint16_t kDnsTypeA = 1;
inline constexpr std::uint16_t kDnsTypeAaaa = 28;
inline constexpr std::uint16_t kDnsTypeOpt = 41;
inline constexpr std::uint16_t kDnsClassIn = 1;
inline constexpr std::size_t kDnsHeaderBytes = 12;
// Without EDNS a UDP response must fit 512 bytes (RFC 1035 §4.2.1).
inline constexpr std::size_t kDnsMaxUdpBytes = 512;
// The payload size sluice advertises in its OPT record, and the most it sends over UDP even
// when a client offers more (the DNS flag day 2020 value: no IP fragmentation).
inline constexpr std::uint16_t kEdnsUdpPayload = 1232;

enum class Rcode : std::uint8_t {
  NoError = 0,
  FormErr = 1,
  ServFail = 2,
  NxDomain = 3,
  NotImp = 4,
  Refused = 5,
};

struct Query {
  std::uint16_t id = 0;
  bool recursion_desired = false;
  std::uint8_t opcode = 0;
  std::uint16_t qtype = 0;
  std::uint16_t qclass = 0;
  // The QNAME as text (see the header comment), not NUL-terminated.
  std::array<char, 256> name_buf{};
  std::uint8_t name_length = 0;
  std::string_view name() const { return {name_buf.data(), name_length}; }
  // The offset just past the question (its QTYPE and QCLASS) in the message.
  std::size_t question_end = 0;
  bool edns = false;                // the query carried an OPT record
  std::uint16_t edns_udp_size = 0;  // its CLASS, as sent (may be below 512)

  // The most bytes a UDP response to this query may have: 512 without EDNS, else the client's
  // size clamped to [512, kEdnsUdpPayload].
  std::size_t udpLimit() const;
};

enum class ParseOutcome : std::uint8_t {
  Query,    // well formed: answer it
  FormErr,  // the header was readable, the rest is not what a query may be: reply FORMERR
  NotImp,   // OPCODE is not QUERY: reply NOTIMP
  Drop,     // reply nothing: shorter than a header, or QR=1 (a response: never answer those,
            // or two resolvers pointed at each other would bounce a packet forever)
};

// Parses one DNS message (without the TCP length prefix). `out` is always written: for
// FormErr and NotImp its id, opcode and recursion_desired are the header's; for Query every
// field is set. Never reads outside `message`.
ParseOutcome parseQuery(std::span<const std::uint8_t> message, Query* out);

// Appends a complete response to a query parseQuery() accepted from `query_message`: the
// header (id, QR=1, opcode copied, AA=1, TC=0, RD copied, RA=0, `rcode`), the question copied
// byte for byte (letter case included: clients using DNS 0x20 compare it), one A record per
// IPv4 address and one AAAA record per IPv6 address in `addresses`, in order, each owned by a
// compression pointer to the question's name, with TTL `ttl`; and, when the query had EDNS, an
// OPT record (payload kEdnsUdpPayload, version 0, no flags, no options). It does not filter or
// trim `addresses` (at most 65535): the caller picks what fits, see responseSize().
void buildResponse(std::vector<std::uint8_t>& out, std::span<const std::uint8_t> query_message,
                   const Query& query, Rcode rcode, std::span<const policy::IpAddress> addresses,
                   std::uint32_t ttl);

// The number of bytes buildResponse() appends for these arguments.
std::size_t responseSize(const Query& query, std::span<const policy::IpAddress> addresses);

// Appends a header-only error response (FORMERR, NOTIMP...) to a message whose header was
// readable (parseQuery gave FormErr or NotImp): id, opcode and RD copied, QR=1, AA=0, `rcode`.
// When the message holds exactly one question that parses as a question, it is echoed
// (QDCOUNT 1); otherwise QDCOUNT is 0. Appends nothing for a message shorter than a header.
void buildError(std::vector<std::uint8_t>& out, std::span<const std::uint8_t> query_message,
                Rcode rcode);

}  // namespace sluice::proxy::dns
