// Which request headers may reach the origin as the sandbox sent them: every
// listed name of each family, in any case and with '_' for '-', every Proxy-*, the catch-all
// prefixes, and near-misses that must still pass.
#include "policy/request_header.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "tests/unit/policy/request_header_cases.h"

namespace sluice::policy {
namespace {

using C = RequestHeaderClass;
using request_header_cases::kFamily;
using request_header_cases::kNearMisses;
using request_header_cases::Row;

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') {
      c = static_cast<char>(c - 'a' + 'A');
    }
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

// '_' for every '-': what CGI, WSGI and Rack read as the same variable.
std::string underscored(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '-') {
      c = '_';
    }
  }
  return out;
}

// '_' for the first '-' only.
std::string halfUnderscored(std::string_view s) {
  std::string out(s);
  const std::size_t dash = out.find('-');
  if (dash != std::string::npos) {
    out[dash] = '_';
  }
  return out;
}

TEST(ClassifyRequestHeader, EveryNameOfTheFamilyInEverySpelling) {
  for (const Row& row : kFamily) {
    for (const std::string& spelling :
         {std::string(row.name), lower(row.name), upper(row.name), underscored(row.name),
          upper(underscored(row.name)), halfUnderscored(row.name)}) {
      EXPECT_EQ(toString(classifyRequestHeader(spelling)), toString(row.cls)) << spelling;
      EXPECT_FALSE(isEndToEndRequestHeader(spelling)) << spelling;
    }
  }
}

TEST(ClassifyRequestHeader, NearMissesAreForwarded) {
  for (std::string_view name : kNearMisses) {
    EXPECT_TRUE(isEndToEndRequestHeader(name)) << name;
  }
}

TEST(ClassifyRequestHeader, OnlyTheFirstBytesOfALongNameAreRead) {
  const std::string long_plain(70000, 'a');
  EXPECT_TRUE(isEndToEndRequestHeader(long_plain));
  EXPECT_EQ(classifyRequestHeader("x-forwarded-" + long_plain), C::ForwardedClaim);
  EXPECT_EQ(classifyRequestHeader("PROXY_" + long_plain), C::ProxyControl);
  EXPECT_TRUE(isEndToEndRequestHeader(""));
}

// A catch-all prefix is looked for only in names whose first letter starts one ('p', 'x', in
// either case): every first byte before the rest of each prefix, and only those two match.
TEST(ClassifyRequestHeader, APrefixMatchesWhateverItsFirstLetterAndOnlyIt) {
  const struct {
    std::string_view rest;  // the prefix but its first letter
    char initial;
    C cls;
  } prefixes[] = {{"roxy-", 'p', C::ProxyControl},
                  {"-forwarded-", 'x', C::ForwardedClaim},
                  {"-original-", 'x', C::ForwardedClaim},
                  {"-envoy-", 'x', C::InternalClaim},
                  {"_FORWARDED_", 'x', C::ForwardedClaim}};
  for (const auto& prefix : prefixes) {
    for (int c = 0; c < 256; ++c) {
      const std::string name =
          std::string(1, static_cast<char>(c)) + std::string(prefix.rest) + "zz9";
      const bool starts = c == prefix.initial || c == prefix.initial - 'a' + 'A';
      EXPECT_EQ(classifyRequestHeader(name), starts ? prefix.cls : C::EndToEnd) << name;
    }
  }
}

// RFC 9110 section 6.5.1: what no trailer may carry, every family the head drops, and what a
// trailer is for (checksums, signatures, gRPC's and application fields).
TEST(RequestTrailer, FieldsATrailerMayNotCarryStayOut) {
  for (std::string_view name : {"Content-Length",
                                "content-type",
                                "Content-Encoding",
                                "content_md5",
                                "CONTENT-RANGE",
                                "Host",
                                "Transfer-Encoding",
                                "TE",
                                "Trailer",
                                "Connection",
                                "Authorization",
                                "cookie",
                                "Cache-Control",
                                "Expect",
                                "Max-Forwards",
                                "pragma",
                                "Range",
                                "If-Match",
                                "if_none_match",
                                "If-Modified-Since",
                                "If-Range",
                                "Proxy-Authorization",
                                "Proxy-Foo",
                                "X-Forwarded-Host",
                                "x_original_url",
                                "X-HTTP-Method-Override",
                                "X-Real-IP",
                                "X-Envoy-Retry-On",
                                "Forwarded"}) {
    EXPECT_FALSE(isForwardableRequestTrailer(name)) << name;
  }
  for (const Row& row : kFamily) {
    EXPECT_FALSE(isForwardableRequestTrailer(row.name)) << row.name;
  }
  for (std::string_view name : {"x-checksum", "Digest", "Content", "ifx", "grpc-status",
                                "x-signature", "authorization-hint", "Cookies", "Rangefinder"}) {
    EXPECT_TRUE(isForwardableRequestTrailer(name)) << name;
  }
}

}  // namespace
}  // namespace sluice::policy
