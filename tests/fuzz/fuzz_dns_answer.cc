// libFuzzer target for what sluice reads of an upstream DNS answer (proxy/dns/answer_reader.h):
// c-ares parses an A reply and an AAAA reply (the resolver's upstream may be hostile or
// spoofed), sluice copies out the addresses and TTLs, joins the two families and decides what
// the cache keeps. c-ares itself is not instrumented; the bytes still go through its parser
// exactly as the resolver's callbacks hand them over.
// Parser files: proxy/dns/answer_reader.cc
//
// Input: bytes 0-1 are the length of the A reply (big-endian; cut to what there is), bytes 2-3
// max_ttl in seconds; then the A reply, then the AAAA reply.
// Invariants, each a trap on violation:
//   - a family has an error or records, never both; at most Answer::kMaxAddresses records;
//     A records are IPv4, AAAA records IPv6; every address is in its reply, as its 4 or 16
//     bytes in a row (c-ares never makes one up);
//   - the joined answer succeeds exactly when either family has a record; then it has 1 to
//     kMaxAddresses addresses, no duplicates, every IPv4 one before every IPv6 one, each taken
//     from a record, and the A addresses in the order the server sent them;
//   - its lifetime is at most max_ttl and at most the TTL of every record it used; a record
//     with a TTL of 0 or with the top bit set (c-ares: negative) makes it 0; the cache keeps
//     it exactly that long;
//   - a failure is kept by the cache only when it is NotFound or NoAddresses, for at most
//     min(max_ttl, 5 s); a reply c-ares could not parse (Failed) is never kept; neither is a
//     family's error ever turned into a success.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "proxy/dns/answer_reader.h"

namespace {

namespace sd = sluice::proxy::dns;
using sluice::policy::IpAddress;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

bool inReply(const IpAddress& address, std::span<const std::uint8_t> reply) {
  const std::size_t length = address.isV4() ? 4 : 16;
  const std::uint8_t* bytes = address.bytes().data() + (16 - length);
  return std::search(reply.begin(), reply.end(), bytes, bytes + length) != reply.end();
}

void checkFamily(const sd::FamilyAnswer& family, bool v4, std::span<const std::uint8_t> reply) {
  check(!(family.error && !family.records.empty()));
  check(family.records.size() <= sd::Answer::kMaxAddresses);
  for (const auto& [address, ttl] : family.records) {
    check(address.isV4() == v4);
    check(inReply(address, reply));
  }
}

sd::FamilyAnswer read(bool v4, std::span<const std::uint8_t> reply) {
  // An exact-size heap copy, so ASan flags any read past the reply.
  std::unique_ptr<unsigned char[]> copy(new unsigned char[reply.empty() ? 1 : reply.size()]);
  std::memcpy(copy.get(), reply.data(), reply.size());
  const int length = static_cast<int>(reply.size());
  return v4 ? sd::readAReply(copy.get(), length) : sd::readAaaaReply(copy.get(), length);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) {
    return 0;
  }
  const std::span<const std::uint8_t> replies(data + 4, size - 4);
  const std::size_t cut = std::min<std::size_t>(data[0] << 8 | data[1], replies.size());
  const std::span<const std::uint8_t> a_reply = replies.first(cut);
  const std::span<const std::uint8_t> aaaa_reply = replies.subspan(cut);
  const std::chrono::milliseconds max_ttl = std::chrono::seconds(data[2] << 8 | data[3]);

  const sd::FamilyAnswer a = read(true, a_reply);
  const sd::FamilyAnswer aaaa = read(false, aaaa_reply);
  checkFamily(a, true, a_reply);
  checkFamily(aaaa, false, aaaa_reply);

  const auto now = std::chrono::steady_clock::now();
  const sd::JoinedAnswer joined = sd::joinFamilies(a, aaaa, now, max_ttl);
  const bool any_record = !a.records.empty() || !aaaa.records.empty();
  check(joined.result.ok() == any_record);

  if (joined.result.ok()) {
    const sd::Answer& answer = **joined.result;
    const std::vector<IpAddress>& got = answer.addresses;
    check(!got.empty() && got.size() <= sd::Answer::kMaxAddresses);
    bool seen_v6 = false;
    std::size_t next_a = 0;  // the A addresses keep the server's order
    for (std::size_t i = 0; i < got.size(); ++i) {
      check(std::count(got.begin(), got.end(), got[i]) == 1);
      check(!(seen_v6 && got[i].isV4()));
      seen_v6 = seen_v6 || !got[i].isV4();
      const sd::FamilyAnswer& family = got[i].isV4() ? a : aaaa;
      const auto record = std::find_if(family.records.begin(), family.records.end(),
                                       [&](const auto& r) { return r.first == got[i]; });
      check(record != family.records.end());
      if (got[i].isV4()) {
        const auto at = static_cast<std::size_t>(record - family.records.begin());
        check(at >= next_a);
        next_a = at + 1;
      }
    }
    const auto lifetime = answer.expires - now;
    check(lifetime >= std::chrono::steady_clock::duration::zero());
    check(lifetime <= max_ttl);
    for (const sd::FamilyAnswer* family : {&a, &aaaa}) {
      for (const auto& [address, ttl] : family->records) {
        if (std::find(got.begin(), got.end(), address) == got.end()) {
          continue;
        }
        check(lifetime <= std::chrono::seconds(std::max(ttl, 0)));
      }
    }
    check(joined.cache_until.has_value() && *joined.cache_until == answer.expires);
  } else {
    const sd::DnsError error = joined.result.error();
    check(error != sd::DnsError::Cancelled);
    check(error == a.error || error == aaaa.error || error == sd::DnsError::NoAddresses);
    if (error == sd::DnsError::NotFound || error == sd::DnsError::NoAddresses) {
      check(joined.cache_until.has_value());
      check(*joined.cache_until - now <= std::min(max_ttl, sd::kMaxNegativeAnswerTtl));
      check(a.error != sd::DnsError::Failed && aaaa.error != sd::DnsError::Failed);
    } else {
      check(!joined.cache_until.has_value());
    }
  }
  return 0;
}
