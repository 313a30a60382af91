// buildGeneration across a reload: what a sandbox keeps (CA, counters, rate bucket, audit file)
// and what makes it start afresh; one audit sink per path for the whole process.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <openssl/x509.h>

#include "certs/ca.h"
#include "policy/config_loader.h"
#include "proxy/runtime/generation.h"
#include "tests/support/temp_dir.h"

namespace sluice::proxy {
namespace {

namespace fs = std::filesystem;

class GenerationTest : public ::testing::Test {
 protected:
  // A config with sandbox `a` (and `b` when `with_b`); `a_ca` names a's CA directory, `rate` its
  // requests_per_second (0: none), `b_audit` b's own audit file ("" for the global one).
  // `upstream_ca` names upstream.ca_file, `extra_ca` the one of upstream.extra_ca_files ("":
  // none).
  std::shared_ptr<const policy::Config> config(const std::string& a_ca, int rate, bool with_b,
                                               const std::string& b_audit = "",
                                               const std::string& upstream_ca = "",
                                               const std::string& extra_ca = "") {
    std::string text = "version: 1\naudit: {path: " + (dir_ / "audit.jsonl").string() +
                       "}\nsandboxes:\n  - name: a\n    listen: 127.0.0.1:39001\n    ca: " +
                       (dir_ / a_ca).string() + "\n    policy: p\n";
    if (rate > 0) {
      text += "    limits: {requests_per_second: " + std::to_string(rate) + "}\n";
    }
    if (with_b) {
      text += "  - name: b\n    listen: 127.0.0.1:39002\n    ca: " + (dir_ / "ca-b").string() +
              "\n    policy: p\n";
      if (!b_audit.empty()) {
        text += "    audit: " + (dir_ / b_audit).string() + "\n";
      }
    }
    text += "policies:\n  p:\n    rules:\n      - hosts: [example.com]\n";
    if (!upstream_ca.empty()) {
      text += "upstream: {ca_file: " + (dir_ / upstream_ca).string() + "}\n";
    } else if (!extra_ca.empty()) {
      text += "upstream: {extra_ca_files: [" + (dir_ / extra_ca).string() + "]}\n";
    }
    auto loaded = policy::loadConfig({"test.yaml", text}, {});
    EXPECT_TRUE(loaded) << (loaded ? "" : loaded.error().front().toString());
    return loaded.value();
  }

  std::shared_ptr<const Generation> build(std::shared_ptr<const policy::Config> c,
                                          const Generation* previous,
                                          std::vector<std::string>* notices = nullptr) {
    auto built = buildGeneration(std::move(c), SecretValues{}, previous, audit_, notices);
    EXPECT_TRUE(built) << (built ? "" : built.error());
    return built.value();
  }

  // A CA made elsewhere, its two files then renamed over `dir`'s: a rotation in place.
  void rotateCa(const std::string& dir) {
    const fs::path made = dir_ / ("made-" + dir);
    ASSERT_TRUE(certs::CertificateAuthority::create(made.string(), "rotated"));
    fs::rename(made / "ca.key", dir_ / dir / "ca.key");
    fs::rename(made / "ca.pem", dir_ / dir / "ca.pem");
  }

  static std::string subjectOf(const SandboxView* view) {
    char line[256];
    X509_NAME_oneline(X509_get_subject_name(view->runtime->ca->certificate()), line, sizeof line);
    return line;
  }

  static bool anyMentions(const std::vector<std::string>& notices, const std::string& text) {
    for (const std::string& notice : notices) {
      if (notice.find(text) != std::string::npos) {
        return true;
      }
    }
    return false;
  }

  test_support::TempDir temp_;
  fs::path dir_{temp_.path()};
  audit::AuditLog audit_;
};

TEST_F(GenerationTest, AReloadKeepsASandboxsRuntimeBucketAndSink) {
  auto first = build(config("ca-a", 5, false), nullptr);
  auto second = build(config("ca-a", 5, true), first.get());
  EXPECT_EQ(first->number, 1u);
  EXPECT_EQ(second->number, 2u);
  const SandboxView* a1 = first->find("a");
  const SandboxView* a2 = second->find("a");
  ASSERT_NE(a1, nullptr);
  ASSERT_NE(a2, nullptr);
  EXPECT_EQ(a1->runtime, a2->runtime);  // same CA, leaves and counters
  EXPECT_EQ(a1->rate, a2->rate);        // the bucket's tokens carry over
  EXPECT_EQ(a1->audit, a2->audit);      // one chain per file
  EXPECT_EQ(second->find("b")->audit, a2->audit);
  EXPECT_EQ(second->audit_sinks.size(), 1u);
  EXPECT_EQ(first->upstream_trust_id, second->upstream_trust_id);
  EXPECT_EQ(first->upstream_tls, second->upstream_tls);
  // The policy itself is the new one.
  EXPECT_NE(a1->sandbox, a2->sandbox);
  EXPECT_EQ(a2->sandbox->name, "a");
}

TEST_F(GenerationTest, ANewCaDirectoryIsANewRuntime) {
  auto first = build(config("ca-a", 0, false), nullptr);
  auto second = build(config("ca-a2", 0, false), first.get());
  EXPECT_NE(first->find("a")->runtime, second->find("a")->runtime);
  EXPECT_NE(first->find("a")->runtime->id, second->find("a")->runtime->id);
  EXPECT_TRUE(fs::exists(dir_ / "ca-a2" / "ca.pem"));
}

TEST_F(GenerationTest, ACaReplacedInPlaceIsLoadedAnewAtTheReload) {
  auto first = build(config("ca-a", 5, true), nullptr);
  rotateCa("ca-a");
  std::vector<std::string> notices;
  auto second = build(config("ca-a", 5, true), first.get(), &notices);
  EXPECT_NE(first->find("a")->runtime, second->find("a")->runtime);
  EXPECT_NE(subjectOf(second->find("a")).find("CN=rotated"), std::string::npos)
      << subjectOf(second->find("a"));
  EXPECT_TRUE(anyMentions(notices, "sandbox 'a': CA files in"))
      << ::testing::PrintToString(notices);
  EXPECT_EQ(first->find("a")->rate, second->find("a")->rate) << "the rate is unchanged";
  EXPECT_EQ(first->find("b")->runtime, second->find("b")->runtime) << "b's CA is untouched";

  auto third = build(config("ca-a", 5, true), second.get());
  EXPECT_EQ(second->find("a")->runtime, third->find("a")->runtime) << "once, not each reload";
}

TEST_F(GenerationTest, CaFilesGoneFromUnderASandboxKeepItsCa) {
  // A reload set off by another sandbox's file must not mint a CA nobody trusts.
  auto first = build(config("ca-a", 0, true), nullptr);
  fs::remove(dir_ / "ca-a" / "ca.pem");
  fs::remove(dir_ / "ca-a" / "ca.key");
  std::vector<std::string> notices;
  auto second = build(config("ca-a", 0, true), first.get(), &notices);
  EXPECT_EQ(first->find("a")->runtime, second->find("a")->runtime);
  EXPECT_FALSE(fs::exists(dir_ / "ca-a" / "ca.pem"));
  EXPECT_TRUE(anyMentions(notices, "are gone; the CA in memory serves on"))
      << ::testing::PrintToString(notices);
}

TEST_F(GenerationTest, AnUpstreamCaFileUpdatedInPlaceIsTrustedAnew) {
  auto first = build(config("ca-a", 0, false), nullptr);
  fs::copy_file(dir_ / "ca-a" / "ca.pem", dir_ / "bundle.pem");
  auto second = build(config("ca-a", 0, false, "", "bundle.pem"), first.get());
  auto third = build(config("ca-a", 0, false, "", "bundle.pem"), second.get());
  EXPECT_NE(first->upstream_trust_id, second->upstream_trust_id);
  EXPECT_EQ(second->upstream_trust_id, third->upstream_trust_id) << "unchanged: kept";
  EXPECT_EQ(second->upstream_tls, third->upstream_tls);

  rotateCa("ca-a");
  fs::copy_file(dir_ / "ca-a" / "ca.pem", dir_ / ".bundle.tmp");
  fs::rename(dir_ / ".bundle.tmp", dir_ / "bundle.pem");
  auto fourth = build(config("ca-a", 0, false, "", "bundle.pem"), third.get());
  EXPECT_NE(third->upstream_trust_id, fourth->upstream_trust_id);
  EXPECT_NE(third->upstream_tls, fourth->upstream_tls);
}

// The same for upstream.extra_ca_files: listed, it is a new trust store; kept while unchanged;
// read anew once updated in place.
TEST_F(GenerationTest, AnExtraUpstreamCaFileUpdatedInPlaceIsTrustedAnew) {
  auto first = build(config("ca-a", 0, false), nullptr);
  fs::copy_file(dir_ / "ca-a" / "ca.pem", dir_ / "private.pem");
  auto second = build(config("ca-a", 0, false, "", "", "private.pem"), first.get());
  auto third = build(config("ca-a", 0, false, "", "", "private.pem"), second.get());
  EXPECT_NE(first->upstream_trust_id, second->upstream_trust_id);
  EXPECT_EQ(second->upstream_tls, third->upstream_tls) << "unchanged: kept";

  rotateCa("ca-a");
  fs::copy_file(dir_ / "ca-a" / "ca.pem", dir_ / ".private.tmp");
  fs::rename(dir_ / ".private.tmp", dir_ / "private.pem");
  auto fourth = build(config("ca-a", 0, false, "", "", "private.pem"), third.get());
  EXPECT_NE(third->upstream_trust_id, fourth->upstream_trust_id);
  auto fifth = build(config("ca-a", 0, false), fourth.get());
  EXPECT_NE(fourth->upstream_trust_id, fifth->upstream_trust_id) << "no longer listed";
}

TEST_F(GenerationTest, AChangedRateIsANewBucketAndNoRateIsNone) {
  auto first = build(config("ca-a", 5, false), nullptr);
  auto second = build(config("ca-a", 7, false), first.get());
  auto third = build(config("ca-a", 0, false), second.get());
  ASSERT_NE(first->find("a")->rate, nullptr);
  ASSERT_NE(second->find("a")->rate, nullptr);
  EXPECT_NE(first->find("a")->rate, second->find("a")->rate);
  EXPECT_EQ(third->find("a")->rate, nullptr);
}

TEST_F(GenerationTest, ARemovedSandboxIsGoneAndItsOwnSinkClosesWhenUnused) {
  auto first = build(config("ca-a", 0, true, "b.jsonl"), nullptr);
  ASSERT_EQ(first->audit_sinks.size(), 2u);
  std::weak_ptr<audit::AuditSink> b_sink;
  for (const auto& sink : first->audit_sinks) {
    if (sink->path() == (dir_ / "b.jsonl").string()) {
      b_sink = sink;
    }
  }
  ASSERT_FALSE(b_sink.expired());
  auto second = build(config("ca-a", 0, false), first.get());
  EXPECT_EQ(second->find("b"), nullptr);
  EXPECT_EQ(second->audit_sinks.size(), 1u);
  audit_.closeUnused();
  EXPECT_FALSE(b_sink.expired()) << "the first generation still writes there";
  first.reset();
  audit_.closeUnused();
  EXPECT_TRUE(b_sink.expired());
}

TEST_F(GenerationTest, ACaThatCannotBeMadeFailsTheBuild) {
  temp_.write("file-not-dir", "x");
  auto c = config("file-not-dir/ca", 0, false);
  auto built = buildGeneration(c, SecretValues{}, nullptr, audit_, nullptr);
  ASSERT_FALSE(built);
  EXPECT_NE(built.error().find("sandbox 'a'"), std::string::npos) << built.error();
}

}  // namespace
}  // namespace sluice::proxy
