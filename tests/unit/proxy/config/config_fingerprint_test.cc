// The files as the loader read them (loadConfigFile's `as_read`) and as ConfigWatch sees them on
// disk (ConfigFingerprint::onDisk) must be recorded alike, whatever the directory holds: any
// difference would be a reload for nothing, and a missing one a change never noticed. And
// any change of a file the loader reads is a difference.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "proxy/config/config_files.h"
#include "proxy/config/config_fingerprint.h"
#include "tests/support/temp_dir.h"

namespace sluice::proxy {
namespace {

namespace fs = std::filesystem;

class ConfigFingerprintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "sandboxes.d");
    write("sluice.yaml", kConfig);
  }

  static constexpr const char* kConfig =
      "version: 1\n"
      "sandboxes_dir: sandboxes.d\n"
      "policies:\n"
      "  p:\n"
      "    rules: [{name: r, hosts: [pypi.org]}]\n";

  void write(const std::string& name, const std::string& text) { temp_.write(name, text); }
  // A sandbox file the loader accepts (`extra`: one more key, a change of it).
  void sandbox(const std::string& file, const std::string& name, const std::string& extra = "") {
    write("sandboxes.d/" + file,
          "name: " + name + "\nlisten: 127.0.0.1:" + std::to_string(3200 + name[0]) +
              "\nca: " + (dir_ / ("ca-" + name)).string() + "\npolicy: p\n" + extra);
  }
  std::string config() const { return (dir_ / "sluice.yaml").string(); }
  std::string sandboxes() const { return (dir_ / "sandboxes.d").string(); }

  // Loads the config; returns the files as read, checking that they are what is on disk.
  ConfigFingerprint loadAndCompare(bool loads = true) {
    ConfigFingerprint as_read;
    auto config = loadConfigFile(this->config(), &as_read);
    EXPECT_EQ(static_cast<bool>(config), loads)
        << (config ? std::string() : config.error().front().toString());
    EXPECT_EQ(as_read.text(), ConfigFingerprint::onDisk(this->config(), sandboxes()).text());
    return as_read;
  }

  test_support::TempDir temp_;
  fs::path dir_{temp_.path()};
};

TEST_F(ConfigFingerprintTest, SandboxFileNames) {
  struct Case {
    const char* name;
    bool read;
  };
  for (const Case& c : {Case{"a.yaml", true}, Case{"a.yml", true}, Case{".a.yaml", false},
                        Case{".a.yaml.tmp", false}, Case{"a.yaml.tmp", false},
                        Case{"a.json", false}, Case{"..data", false}, Case{"yaml", false}}) {
    EXPECT_EQ(isSandboxFileName(c.name), c.read) << c.name;
  }
}

TEST_F(ConfigFingerprintTest, AnEmptyDirectory) { loadAndCompare(); }

TEST_F(ConfigFingerprintTest, FilesReadAndFilesSkipped) {
  sandbox("a.yaml", "a");
  sandbox("b.yml", "b");
  write("sandboxes.d/.c.yaml.tmp", "half a file");
  write("sandboxes.d/notes.txt", "not read");
  fs::create_directories(dir_ / "sandboxes.d/d.yaml");  // listed, not a file: skipped
  fs::create_directory_symlink(dir_ / "nowhere", dir_ / "sandboxes.d/e.yaml");  // dangling
  loadAndCompare();
}

TEST_F(ConfigFingerprintTest, AConfigMapVolume) {
  // kubelet's layout: each key a symlink through `..data` into a timestamped directory.
  fs::create_directories(dir_ / "sandboxes.d/..2026_11_30_1");
  sandbox("..2026_11_30_1/a.yaml", "a");
  fs::create_directory_symlink("..2026_11_30_1", dir_ / "sandboxes.d/..data");
  fs::create_symlink("..data/a.yaml", dir_ / "sandboxes.d/a.yaml");
  ConfigFingerprint before = loadAndCompare();

  // An update: a new timestamped directory, `..data` swapped to it by a rename.
  fs::create_directories(dir_ / "sandboxes.d/..2026_11_30_2");
  sandbox("..2026_11_30_2/a.yaml", "a");
  fs::create_directory_symlink("..2026_11_30_2", dir_ / "sandboxes.d/..data_tmp");
  fs::rename(dir_ / "sandboxes.d/..data_tmp", dir_ / "sandboxes.d/..data");
  EXPECT_NE(ConfigFingerprint::onDisk(config(), sandboxes()), before);
  EXPECT_NE(loadAndCompare(), before);
}

TEST_F(ConfigFingerprintTest, AMissingDirectoryIsRecordedAlike) {
  fs::remove_all(dir_ / "sandboxes.d");
  loadAndCompare(/*loads=*/false);
}

TEST_F(ConfigFingerprintTest, AnUnreadableConfigFileIsRecordedAlike) {
  fs::remove(dir_ / "sluice.yaml");
  ConfigFingerprint as_read;
  EXPECT_FALSE(loadConfigFile(config(), &as_read));
  EXPECT_EQ(as_read, ConfigFingerprint::onDisk(config(), ""));
}

TEST_F(ConfigFingerprintTest, EveryChangeOfWhatIsReadIsADifference) {
  sandbox("a.yaml", "a");
  const ConfigFingerprint loaded = loadAndCompare();
  auto differs = [&](const char* what) {
    EXPECT_NE(ConfigFingerprint::onDisk(config(), sandboxes()), loaded) << what;
  };

  sandbox("b.yaml", "b");
  differs("a file added");
  fs::remove(dir_ / "sandboxes.d/b.yaml");
  EXPECT_EQ(ConfigFingerprint::onDisk(config(), sandboxes()), loaded) << "and taken away";

  sandbox(".a.yaml.tmp", "a", "mode: report\n");
  fs::rename(dir_ / "sandboxes.d/.a.yaml.tmp", dir_ / "sandboxes.d/a.yaml");
  differs("a file renamed over");
  const ConfigFingerprint renamed = loadAndCompare();
  sandbox("a.yaml", "a", "mode: enforce\n");
  EXPECT_NE(ConfigFingerprint::onDisk(config(), sandboxes()), renamed) << "rewritten in place";

  const ConfigFingerprint rewritten = loadAndCompare();
  write("sluice.yaml", std::string(kConfig) + "# edited\n");
  EXPECT_NE(ConfigFingerprint::onDisk(config(), sandboxes()), rewritten) << "the config file";
}

}  // namespace
}  // namespace sluice::proxy
