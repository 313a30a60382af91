#include "certs/x509_util.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/err.h>

#include "certs/openssl_ptr.h"

namespace sluice::certs {
namespace {

using namespace std::string_view_literals;

TEST(CertificateHostKind, AcceptsCanonicalNames) {
  for (std::string_view host : {"pkg.test", "localhost", "a", "xn--bcher-kva.example", "a-b.c-d",
                                "0a.example", "example.123a", "files.pythonhosted.org"}) {
    EXPECT_EQ(certificateHostKind(host), HostKind::DnsName) << host;
  }
  std::string longest = std::string(63, 'a') + "." + std::string(63, 'b') + "." +
                        std::string(63, 'c') + "." + std::string(61, 'd');
  ASSERT_EQ(longest.size(), 253u);
  EXPECT_EQ(certificateHostKind(longest), HostKind::DnsName);
}

TEST(CertificateHostKind, AcceptsCanonicalIpText) {
  for (std::string_view host : {"192.0.2.1", "0.0.0.0", "255.255.255.255", "10.0.0.10"}) {
    EXPECT_EQ(certificateHostKind(host), HostKind::Ipv4) << host;
  }
  for (std::string_view host : {"2001:db8::1", "::1", "::", "::ffff:192.0.2.1", "fe80::1:0:0:1",
                                "2001:db8:0:1:1:1:1:1", "1::", "2001:db8::1:0:0:1"}) {
    EXPECT_EQ(certificateHostKind(host), HostKind::Ipv6) << host;
  }
}

TEST(CertificateHostKind, RefusesEverythingElse) {
  std::string too_long = std::string(63, 'a') + "." + std::string(63, 'b') + "." +
                         std::string(63, 'c') + "." + std::string(62, 'd');
  std::string long_label(64, 'a');
  for (std::string_view host : {""sv,
                                "a\0b"sv,
                                "pkg.test\0.evil.test"sv,
                                "*.x"sv,
                                "*"sv,
                                "a b"sv,
                                " pkg.test"sv,
                                "Pkg.test"sv,
                                "pkg.test."sv,
                                ".pkg.test"sv,
                                "a..b"sv,
                                "-a.test"sv,
                                "a-.test"sv,
                                "a_b.test"sv,
                                "a%b.test"sv,
                                "a@b.test"sv,
                                "ü.test"sv,
                                "1.2.3"sv,
                                "example.123"sv,
                                "2130706433"sv,
                                "010.0.0.1"sv,
                                "1.2.3.4.5"sv,
                                "256.0.0.1"sv,
                                "+1.2.3.4"sv,
                                "0x7f.0.0.1"sv,
                                "[::1]"sv,
                                "2001:DB8::1"sv,
                                "2001:db8:0:0:0:0:0:1"sv,
                                "2001:db8::0:1"sv,
                                "2001:0db8::1"sv,
                                "fe80::1%eth0"sv,
                                "::ffff:c000:201"sv,
                                "1::2:0:0:0:3"sv,
                                "::1.2.3.4"sv,
                                "pkg.test:443"sv,
                                std::string_view(too_long),
                                std::string_view(long_label)}) {
    EXPECT_EQ(certificateHostKind(host), std::nullopt) << host;
  }
  // "1::2:0:0:0:3" compresses the shorter of two zero runs; RFC 5952 compresses the longer.
  EXPECT_EQ(certificateHostKind("1:0:0:2::3"), HostKind::Ipv6);
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(SetRandomSerial, IsPositiveAtMost159BitsAndRandom) {
  X509Ptr a(X509_new());
  X509Ptr b(X509_new());
  ASSERT_TRUE(setRandomSerial(a.get()));
  ASSERT_TRUE(setRandomSerial(b.get()));
  BignumPtr serial(
      ASN1_INTEGER_to_BN(X509_get0_serialNumber(a.get()), nullptr));
  ASSERT_TRUE(serial);
  EXPECT_FALSE(BN_is_negative(serial.get()));
  EXPECT_FALSE(BN_is_zero(serial.get()));
  EXPECT_LE(BN_num_bits(serial.get()), kSerialBits);
  EXPECT_GT(BN_num_bits(serial.get()), 64);  // fails ~1 in 2^95
  EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber(a.get()), X509_get0_serialNumber(b.get())), 0);
}

}  // namespace
}  // namespace sluice::certs
