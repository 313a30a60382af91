// ConfigWatch on a real directory and a real loop: what counts as a change of the configuration
// (the file rewritten or renamed over, a sandbox file added, changed or removed), and what does
// not (appends to an audit log beside the config, a CA directory or an audit file created in
// sandboxes_dir, a touch that changes nothing the fingerprint sees).
#include <gtest/gtest.h>
#include <uv.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "proxy/config/config_watch.h"
#include "proxy/config/config_fingerprint.h"
#include "tests/support/temp_dir.h"

namespace sluice::proxy {
namespace {

namespace fs = std::filesystem;

class ConfigWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "sandboxes.d");
    write("sluice.yaml", "version: 1\n");
    write("sandboxes.d/a.yaml", "name: a\n");
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    watch_ = std::make_unique<ConfigWatch>(&loop_, file(), [this] { ++changes_; });
    loaded("sandboxes.d");
  }

  std::string file() const { return (dir_ / "sluice.yaml").string(); }
  // What a start or a reload tells the watch: the sandboxes_dir in force, read just now.
  void loaded(const std::string& sandboxes_dir) {
    const std::string dir = (dir_ / sandboxes_dir).string();
    watch_->loaded(dir, ConfigFingerprint::onDisk(file(), dir));
  }

  void TearDown() override {
    bool closed = false;
    watch_->close([&] { closed = true; });
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(closed);
    watch_.reset();
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  void write(const std::string& name, const std::string& text) { temp_.write(name, text); }

  // Runs the loop for longer than the watch settles, then says how many changes it reported.
  int settle() {
    uv_timer_t timer;
    uv_timer_init(&loop_, &timer);
    uv_timer_start(&timer, [](uv_timer_t* t) { uv_stop(t->loop); },
                   static_cast<std::uint64_t>(ConfigWatch::kSettle.count()) * 3, 0);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
    return changes_;
  }

  test_support::TempDir temp_;
  fs::path dir_{temp_.path()};
  uv_loop_t loop_{};
  std::unique_ptr<ConfigWatch> watch_;
  int changes_ = 0;
};

TEST_F(ConfigWatchTest, NothingHappensNothingIsReported) { EXPECT_EQ(settle(), 0); }

TEST_F(ConfigWatchTest, TheConfigFileRewrittenInPlace) {
  write("sluice.yaml", "version: 1\n# edited\n");
  EXPECT_EQ(settle(), 1);
}

TEST_F(ConfigWatchTest, TheConfigFileRenamedOver) {
  write(".sluice.yaml.tmp", "version: 1\n# replaced\n");
  fs::rename(dir_ / ".sluice.yaml.tmp", dir_ / "sluice.yaml");
  EXPECT_EQ(settle(), 1);
}

TEST_F(ConfigWatchTest, ABurstIsOneChange) {
  write("sandboxes.d/b.yaml", "name: b\n");
  write("sandboxes.d/c.yaml", "name: c\n");
  fs::remove(dir_ / "sandboxes.d/a.yaml");
  EXPECT_EQ(settle(), 1);
}

TEST_F(ConfigWatchTest, SandboxFilesComeChangeAndGo) {
  write("sandboxes.d/b.yml", "name: b\n");
  EXPECT_EQ(settle(), 1);
  write("sandboxes.d/b.yml", "name: b\nmode: report\n");
  EXPECT_EQ(settle(), 2);
  fs::remove(dir_ / "sandboxes.d/b.yml");
  EXPECT_EQ(settle(), 3);
}

TEST_F(ConfigWatchTest, AnAuditLogBesideTheConfigIsNotAChange) {
  // Appended to without being closed, as the audit sink does: not one event is asked for.
  std::FILE* audit = std::fopen((dir_ / "audit.jsonl").c_str(), "a");
  ASSERT_NE(audit, nullptr);
  settle();  // its creation: not the config file's name
  const std::uint64_t before = watch_->eventsRead();
  for (int i = 0; i < 100; ++i) {
    std::fputs("{\"a\":1}\n", audit);
    std::fflush(audit);
  }
  EXPECT_EQ(settle(), 0);
  EXPECT_EQ(watch_->eventsRead(), before) << "appends woke the watch";
  std::fclose(audit);
  EXPECT_EQ(settle(), 0);
}

TEST_F(ConfigWatchTest, ACaOrAuditFileInTheSandboxDirIsNotAChange) {
  fs::create_directories(dir_ / "sandboxes.d/ca-a");
  write("sandboxes.d/ca-a/ca.pem", "pem");
  write("sandboxes.d/a.jsonl", "{}\n");
  write("sandboxes.d/.a.yaml.tmp", "name: a\n");
  EXPECT_EQ(settle(), 0);
}

TEST_F(ConfigWatchTest, PermissionsAloneAreNotAChange) {
  // IN_ATTRIB wakes the watch, but identity, size and mtime are as they were: no reload.
  fs::permissions(dir_ / "sluice.yaml", fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(settle(), 0);
}

TEST_F(ConfigWatchTest, ASandboxDirRemovedAndMadeAgainIsWatchedAgain) {
  fs::remove_all(dir_ / "sandboxes.d");
  EXPECT_EQ(settle(), 1);  // its files are gone (the reload will say the directory is)
  fs::create_directories(dir_ / "sandboxes.d");
  settle();
  loaded("sandboxes.d");  // what the next reload does
  const int before = changes_;
  write("sandboxes.d/b.yaml", "name: b\n");
  EXPECT_EQ(settle(), before + 1);
}

TEST_F(ConfigWatchTest, AChangeSinceTheFilesWereReadIsReportedThoughNoEventCame) {
  // sluice read its configuration, then a sandbox file arrived before the watch began (or while
  // a reload was reading): no inotify event will ever say so.
  const std::string dir = (dir_ / "sandboxes.d").string();
  const ConfigFingerprint as_read = ConfigFingerprint::onDisk(file(), dir);
  bool closed = false;
  watch_->close([&] { closed = true; });
  uv_run(&loop_, UV_RUN_DEFAULT);
  ASSERT_TRUE(closed);
  write("sandboxes.d/b.yaml", "name: b\n");  // nothing watches

  watch_ = std::make_unique<ConfigWatch>(&loop_, file(), [this] { ++changes_; });
  watch_->loaded(dir, as_read);
  EXPECT_EQ(settle(), 1);
  EXPECT_EQ(watch_->eventsRead(), 0u);
  EXPECT_EQ(settle(), 1) << "once";
}

TEST_F(ConfigWatchTest, AReloadThatReadWhatIsOnDiskIsNotReportedAgain) {
  write("sandboxes.d/b.yaml", "name: b\n");
  EXPECT_EQ(settle(), 1);
  loaded("sandboxes.d");  // the reload it caused read b.yaml
  EXPECT_EQ(settle(), 1);
}

TEST_F(ConfigWatchTest, ARecordingUnlikeTheDiskIsReportedOnceNotForever) {
  // A loader recording files unlike onDisk() (a bug): one reload, never one every settle.
  write("sandboxes.d/b.yaml", "name: b\n");
  EXPECT_EQ(settle(), 1);
  watch_->loaded((dir_ / "sandboxes.d").string(), ConfigFingerprint{});
  EXPECT_EQ(settle(), 1);
}

TEST_F(ConfigWatchTest, AnotherSandboxDirIsWatchedInstead) {
  fs::create_directories(dir_ / "other.d");
  loaded("other.d");
  write("sandboxes.d/b.yaml", "name: b\n");
  EXPECT_EQ(settle(), 0);
  write("other.d/b.yaml", "name: b\n");
  EXPECT_EQ(settle(), 1);
}

}  // namespace
}  // namespace sluice::proxy
