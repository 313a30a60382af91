// libFuzzer target for the ClientHello reader (proxy/tls/client_hello.h). The caller re-parses
// a growing buffer, so every prefix of the input is parsed as if it were all that had arrived.
// Invariants, each a trap on violation:
//   - once a prefix gets a final verdict (anything but NeedMore), every longer prefix gets the
//     same verdict, and for Done the same SNI, flags and consumed: more bytes never change a
//     decision already acted on;
//   - NeedMore only while fewer than kMaxClientHelloBytes are buffered (the buffer is bounded);
//   - consumed <= the prefix length, and the records it covers start the buffer;
//   - the SNI is Present exactly when it has 1..255 bytes, and those bytes occur in the input
//     in order (split across records perhaps, never invented);
//   - the hello's handshake message split into 1-byte records reads the same (when that stays
//     under the limit).
// ASan checks that nothing reads past the span: each prefix is parsed from its own heap copy.
//
// Parser files: proxy/tls/client_hello.cc

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "proxy/tls/client_hello.h"

namespace {

namespace st = sluice::proxy::tls;

void check(bool ok) {
  if (!ok) {
    __builtin_trap();
  }
}

bool sameInfo(const st::ClientHelloInfo& a, const st::ClientHelloInfo& b) {
  return a.sni_state == b.sni_state && a.sni() == b.sni() && a.offers_alpn == b.offers_alpn &&
         a.offers_http11 == b.offers_http11 && a.offers_h2 == b.offers_h2 &&
         a.has_ech == b.has_ech && a.legacy_version == b.legacy_version &&
         a.offers_tls13 == b.offers_tls13 && a.consumed == b.consumed;
}

st::HelloResult parseCopy(const std::uint8_t* data, std::size_t n) {
  // An exact-size heap copy, so ASan flags any read past the span.
  std::unique_ptr<std::uint8_t[]> copy(new std::uint8_t[n == 0 ? 1 : n]);
  if (n > 0) {
    std::memcpy(copy.get(), data, n);
  }
  return st::parseClientHello(std::span<const std::uint8_t>(copy.get(), n));
}

// `sni` appears in `data` as a subsequence (the SNI may be split by record headers).
bool isSubsequence(std::string_view sni, const std::uint8_t* data, std::size_t size) {
  std::size_t j = 0;
  for (std::size_t i = 0; i < size && j < sni.size(); ++i) {
    if (data[i] == static_cast<std::uint8_t>(sni[j])) {
      ++j;
    }
  }
  return j == sni.size();
}

void checkResult(const st::HelloResult& r, const std::uint8_t* data, std::size_t n) {
  check(r.status != st::HelloStatus::NeedMore || n < st::kMaxClientHelloBytes);
  if (r.status != st::HelloStatus::Done) {
    check(r.info.consumed == 0 && r.info.sni().empty());
    return;
  }
  check(r.info.consumed >= 6 && r.info.consumed <= n);
  check(r.info.consumed <= st::kMaxClientHelloBytes);
  check(data[0] == 22);
  const std::size_t len = r.info.sni().size();
  check(len <= st::kMaxSniBytes);
  check((r.info.sni_state == st::SniState::Present) == (len > 0));
  check(isSubsequence(r.info.sni(), data, r.info.consumed));
  check(!r.info.offers_http11 || r.info.offers_alpn);
  check(!r.info.offers_h2 || r.info.offers_alpn);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<st::HelloResult> final_result;
  for (std::size_t n = 0; n <= size; ++n) {
    const st::HelloResult r = parseCopy(data, n);
    checkResult(r, data, n);
    if (final_result) {
      check(r.status == final_result->status);
      check(sameInfo(r.info, final_result->info));
    } else if (r.status != st::HelloStatus::NeedMore) {
      final_result = r;
    }
  }

  // The handshake message of a Done hello (without whatever followed it in its last record),
  // re-framed as 1-byte records, reads the same.
  if (final_result && final_result->status == st::HelloStatus::Done) {
    std::vector<std::uint8_t> message;
    for (std::size_t at = 0; at + 5 <= final_result->info.consumed;) {
      const std::size_t n = static_cast<std::size_t>(data[at + 3] << 8 | data[at + 4]);
      message.insert(message.end(), data + at + 5, data + at + 5 + n);
      at += 5 + n;
    }
    check(message.size() >= 4);
    const std::size_t length = 4 + (static_cast<std::size_t>(message[1]) << 16 |
                                    static_cast<std::size_t>(message[2]) << 8 | message[3]);
    check(length <= message.size());
    message.resize(length);
    if (message.size() * 6 <= st::kMaxClientHelloBytes) {
      std::vector<std::uint8_t> tiny;
      for (std::uint8_t b : message) {
        tiny.insert(tiny.end(), {22, 3, 1, 0, 1, b});
      }
      const st::HelloResult r = st::parseClientHello(tiny);
      check(r.status == st::HelloStatus::Done);
      st::ClientHelloInfo expected = final_result->info;
      expected.consumed = tiny.size();
      check(sameInfo(r.info, expected));
    }
  }
  return 0;
}
