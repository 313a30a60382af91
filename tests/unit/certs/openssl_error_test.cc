// The one drain of the thread's OpenSSL error queue: what it says, and that it leaves the queue
// empty (a stale entry would be misread by SSL_get_error() on another connection); and the
// clearing before an SSL call, which skips an empty queue.
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

TEST(ClearOpensslErrors, EmptiesAQueueThatHoldsErrors) {
  ERR_raise(ERR_LIB_X509, X509_R_CERT_ALREADY_IN_HASH_TABLE);
  ERR_raise(ERR_LIB_SYS, 0);
  clearOpensslErrors();
  EXPECT_EQ(ERR_peek_error(), 0u);
  EXPECT_EQ(ERR_peek_last_error(), 0u);
  EXPECT_EQ(ERR_get_error(), 0u);
}

TEST(ClearOpensslErrors, LeavesAnEmptyQueueEmpty) {
  clearOpensslErrors();
  clearOpensslErrors();
  EXPECT_EQ(ERR_peek_error(), 0u);
  ERR_raise(ERR_LIB_X509, X509_R_INVALID_DIRECTORY);  // the queue still works after it
  EXPECT_NE(ERR_peek_error(), 0u);
  clearOpensslErrors();
  EXPECT_EQ(ERR_peek_error(), 0u);
}

// What clearOpensslErrors() rests on: whatever a library raises, even with reason 0 or errno 0,
// its code is not 0, so ERR_peek_error() is 0 only for an empty queue.
TEST(ClearOpensslErrors, NoQueuedErrorHasCodeZero) {
  for (int lib = ERR_LIB_NONE; lib < ERR_LIB_USER; ++lib) {
    ERR_raise(lib, 0);
    EXPECT_NE(ERR_peek_error(), 0u) << lib;
    clearOpensslErrors();
    ASSERT_EQ(ERR_peek_error(), 0u) << lib;
  }
}

}  // namespace
}  // namespace sluice::certs
