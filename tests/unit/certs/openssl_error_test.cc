// The one drain of the thread's OpenSSL error queue: what it says, and that it leaves the queue
// empty (a stale entry would be misread by SSL_get_error() on another connection).
#include "certs/openssl_error.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/x509.h>

namespace sluice::certs {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(DrainOpensslErrors, EmptiesTheQueue) {
  EXPECT_EQ(drainOpensslErrors(), "no OpenSSL error reported");
  ERR_raise(ERR_LIB_X509, X509_R_CERT_ALREADY_IN_HASH_TABLE);
  ERR_raise(ERR_LIB_X509, X509_R_INVALID_DIRECTORY);
  std::string text = drainOpensslErrors();
  EXPECT_THAT(text, HasSubstr("; "));
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(OpensslFailure, NamesWhatFailedAndDrainsTheQueue) {
  ERR_raise(ERR_LIB_X509, X509_R_INVALID_DIRECTORY);
  Err<std::string> failure = opensslFailure("cannot load ca.pem");
  EXPECT_THAT(failure.error, StartsWith("cannot load ca.pem (OpenSSL: "));
  EXPECT_THAT(failure.error, HasSubstr("invalid directory"));
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(OpensslFailure, SaysSoWhenTheQueueWasEmpty) {
  EXPECT_EQ(opensslFailure("x").error, "x (OpenSSL: no OpenSSL error reported)");
}

}  // namespace
}  // namespace sluice::certs
