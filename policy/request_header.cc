#include "policy/request_header.h"

#include <algorithm>
#include <array>
#include <cstddef>

#include "base/ascii.h"

namespace sluice::policy {
namespace {

using C = RequestHeaderClass;

struct Named {
  std::string_view name;  // lower case, '-' for '_'
  C cls;
};

// Where each name comes from is in docs/wire.md#headers-the-origin-never-gets-from-the-sandbox. A
// name that a prefix below covers is still listed when it has a class of its own.
constexpr Named kNames[] = {
    {"host", C::Framing},
    {"content-length", C::Framing},

    {"connection", C::HopByHop},
    {"keep-alive", C::HopByHop},
    {"te", C::HopByHop},
    {"trailer", C::HopByHop},
    {"transfer-encoding", C::HopByHop},
    {"upgrade", C::HopByHop},
    {"http2-settings", C::HopByHop},
    {"proxy-connection", C::HopByHop},
    {"proxy-authorization", C::HopByHop},
    {"proxy-authenticate", C::HopByHop},

    {"proxy", C::ProxyControl},  // CGI's HTTP_PROXY, which HTTP clients take as their proxy

    {"forwarded", C::HostClaim},
    {"x-forwarded-host", C::HostClaim},
    {"x-forwarded-server", C::HostClaim},
    {"x-host", C::HostClaim},
    {"x-http-host-override", C::HostClaim},
    {"x-original-host", C::HostClaim},

    {"x-original-url", C::PathClaim},
    {"x-original-uri", C::PathClaim},
    {"x-rewrite-url", C::PathClaim},
    {"x-forwarded-prefix", C::PathClaim},
    {"x-forwarded-path", C::PathClaim},
    {"x-forwarded-uri", C::PathClaim},
    {"x-original-prefix", C::PathClaim},
    {"x-replaced-path", C::PathClaim},
    {"x-envoy-original-path", C::PathClaim},

    {"x-forwarded-proto", C::SchemeClaim},
    {"x-forwarded-protocol", C::SchemeClaim},
    {"x-forwarded-scheme", C::SchemeClaim},
    {"x-forwarded-ssl", C::SchemeClaim},
    {"x-forwarded-port", C::SchemeClaim},
    {"x-original-proto", C::SchemeClaim},
    {"x-url-scheme", C::SchemeClaim},
    {"x-scheme", C::SchemeClaim},
    {"front-end-https", C::SchemeClaim},
    {"x-arr-ssl", C::SchemeClaim},
    {"cloudfront-forwarded-proto", C::SchemeClaim},
    {"cf-visitor", C::SchemeClaim},
    {"fastly-ssl", C::SchemeClaim},

    {"x-http-method-override", C::MethodClaim},
    {"x-http-method", C::MethodClaim},
    {"x-method-override", C::MethodClaim},
    {"x-original-method", C::MethodClaim},
    {"x-forwarded-method", C::MethodClaim},

    {"x-forwarded-for", C::ClientClaim},
    {"x-forwarded", C::ClientClaim},
    {"forwarded-for", C::ClientClaim},
    {"x-original-for", C::ClientClaim},
    {"x-original-forwarded-for", C::ClientClaim},
    {"x-real-ip", C::ClientClaim},
    {"x-client-ip", C::ClientClaim},
    {"client-ip", C::ClientClaim},
    {"true-client-ip", C::ClientClaim},
    {"cf-connecting-ip", C::ClientClaim},
    {"cf-connecting-ipv6", C::ClientClaim},
    {"fastly-client-ip", C::ClientClaim},
    {"x-cluster-client-ip", C::ClientClaim},
    {"x-originating-ip", C::ClientClaim},
    {"x-remote-ip", C::ClientClaim},
    {"x-remote-addr", C::ClientClaim},
    {"x-proxyuser-ip", C::ClientClaim},
    {"cloudfront-viewer-address", C::ClientClaim},

    {"x-middleware-subrequest", C::InternalClaim},
};

constexpr Named kPrefixes[] = {
    {"proxy-", C::ProxyControl},
    {"x-forwarded-", C::ForwardedClaim},
    {"x-original-", C::ForwardedClaim},
    {"x-envoy-", C::InternalClaim},
};

constexpr std::size_t kCount = std::size(kNames);

constexpr std::size_t longestName() {
  std::size_t longest = 0;
  for (const Named& n : kNames) {
    longest = std::max(longest, n.name.size());
  }
  return longest;
}
constexpr std::size_t kLongest = longestName();

// kNames ordered by length, and where each length starts in that order: a name is compared only
// with the few listed names of its own length.
constexpr std::array<Named, kCount> kByLength = [] {
  std::array<Named, kCount> sorted{};
  std::copy(std::begin(kNames), std::end(kNames), sorted.begin());
  std::sort(sorted.begin(), sorted.end(), [](const Named& a, const Named& b) {
    return a.name.size() != b.name.size() ? a.name.size() < b.name.size() : a.name < b.name;
  });
  return sorted;
}();
constexpr std::array<std::uint8_t, kLongest + 2> kLengthStart = [] {
  std::array<std::uint8_t, kLongest + 2> start{};
  std::size_t i = 0;
  for (std::size_t length = 0; length <= kLongest + 1; ++length) {
    while (i < kCount && kByLength[i].name.size() < length) {
      ++i;
    }
    start[length] = static_cast<std::uint8_t>(i);
  }
  return start;
}();
static_assert(kCount < 256, "kLengthStart holds positions in a byte");

constexpr bool isFolded(std::string_view s) {
  for (char c : s) {
    if (ascii::isUpper(c) || c == '_') {
      return false;
    }
  }
  return true;
}
static_assert(std::all_of(std::begin(kNames), std::end(kNames),
                          [](const Named& n) { return isFolded(n.name); }));
constexpr bool namesAreUnique() {
  for (std::size_t i = 1; i < kCount; ++i) {
    if (kByLength[i - 1].name == kByLength[i].name) {
      return false;
    }
  }
  return true;
}
static_assert(namesAreUnique());
static_assert(std::all_of(std::begin(kPrefixes), std::end(kPrefixes),
                          [](const Named& n) { return isFolded(n.name); }));

constexpr char fold(char c) { return c == '_' ? '-' : ascii::toLower(c); }

// The first letters of kPrefixes (folded): a name that starts with none of them ('p', 'x'), as
// most do, is compared with no prefix.
static_assert(std::none_of(std::begin(kPrefixes), std::end(kPrefixes),
                           [](const Named& n) { return n.name.empty(); }));
constexpr std::array<bool, 256> kPrefixInitial = [] {
  std::array<bool, 256> initial{};
  for (const Named& prefix : kPrefixes) {
    initial[static_cast<unsigned char>(prefix.name[0])] = true;
  }
  return initial;
}();

// `text` (as received) begins with `folded` (as listed).
bool startsWithFolded(std::string_view text, std::string_view folded) {
  if (text.size() < folded.size()) {
    return false;
  }
  for (std::size_t i = 0; i < folded.size(); ++i) {
    if (fold(text[i]) != folded[i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

RequestHeaderClass classifyRequestHeader(std::string_view name) {
  if (name.size() <= kLongest) {
    for (std::size_t i = kLengthStart[name.size()]; i < kLengthStart[name.size() + 1]; ++i) {
      if (startsWithFolded(name, kByLength[i].name)) {
        return kByLength[i].cls;
      }
    }
  }
  if (!name.empty() && kPrefixInitial[static_cast<unsigned char>(fold(name[0]))]) {
    for (const Named& prefix : kPrefixes) {
      if (startsWithFolded(name, prefix.name)) {
        return prefix.cls;
      }
    }
  }
  return C::EndToEnd;
}

bool isForwardableRequestTrailer(std::string_view name) {
  // Folded names, compared as the table compares: a name read by CGI as another is that name.
  static constexpr std::string_view kNotInTrailers[] = {
      "authorization", "cookie", "cache-control", "expect", "max-forwards", "pragma", "range",
  };
  if (!isEndToEndRequestHeader(name) || startsWithFolded(name, "content-") ||
      startsWithFolded(name, "if-")) {
    return false;
  }
  for (std::string_view listed : kNotInTrailers) {
    if (sameRequestHeaderName(name, listed)) {
      return false;
    }
  }
  return true;
}

bool sameRequestHeaderName(std::string_view a, std::string_view b) {
  return ascii::equalFolded(a, b, fold);
}

std::string_view toString(RequestHeaderClass c) {
  switch (c) {
    case C::EndToEnd:
      return "end_to_end";
    case C::Framing:
      return "framing";
    case C::HopByHop:
      return "hop_by_hop";
    case C::ProxyControl:
      return "proxy_control";
    case C::HostClaim:
      return "host_claim";
    case C::PathClaim:
      return "path_claim";
    case C::SchemeClaim:
      return "scheme_claim";
    case C::MethodClaim:
      return "method_claim";
    case C::ClientClaim:
      return "client_claim";
    case C::InternalClaim:
      return "internal_claim";
    case C::ForwardedClaim:
      return "forwarded_claim";
  }
  return "end_to_end";
}

}  // namespace sluice::policy
