// SecretMask: the secret never passes, however the body is cut into pieces.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proxy/session/secret_mask.h"

namespace sluice::proxy::session {
namespace {

std::string run(const std::string& body, std::vector<std::string_view> secrets,
                std::size_t piece) {
  SecretMask mask;
  mask.reset(secrets);
  std::string out;
  for (std::size_t at = 0; at < body.size(); at += piece) {
    std::string_view p = std::string_view(body).substr(at, piece);
    mask.feed(std::span<const char>(p.data(), p.size()), out);
  }
  mask.finish(out);
  return out;
}

TEST(SecretMask, EveryOccurrenceMaskedForEveryPieceSize) {
  const std::string secret = "sk-real-0123456789";
  const std::string body = "{\"echo\":\"" + secret + "\",\"again\":\"x" + secret + secret +
                           "\",\"partial\":\"sk-real-01234\"}";
  std::string want = body;
  for (std::size_t at = want.find(secret); at != std::string::npos;
       at = want.find(secret, at + secret.size())) {
    want.replace(at, secret.size(), std::string(secret.size(), '*'));
  }
  for (std::size_t piece = 1; piece <= body.size(); ++piece) {
    std::string got = run(body, {secret}, piece);
    EXPECT_EQ(got, want) << "piece " << piece;
    EXPECT_EQ(got.find(secret), std::string::npos) << "piece " << piece;
    EXPECT_EQ(got.size(), body.size());
  }
}

TEST(SecretMask, TwoSecretsOfDifferentLengths) {
  std::string got = run("a-long-secret-value and short! and short", {"a-long-secret-value",
                                                                   "short"}, 3);
  EXPECT_EQ(got, "******************* and *****! and *****");
}

TEST(SecretMask, NothingToMaskPassesUnchanged) {
  EXPECT_EQ(run("plain body", {"secret-value"}, 4), "plain body");
}

}  // namespace
}  // namespace sluice::proxy::session
