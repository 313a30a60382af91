#pragma once
// Notices when the configuration on disk changed: the config file, or a file of sandboxes_dir
// appearing, changing or going away (docs/cli.md#reloads; an orchestrator adds a sandbox by
// dropping a file). inotify on the two directories, not on the files: editors and Kubernetes
// ConfigMaps replace a file by renaming another over it (a ConfigMap swaps its `..data` symlink),
// which a watch on the old file would never report.
//
// Only completed changes are asked for (a file closed after writing, created, removed, renamed,
// its attributes changed), never every write: an audit log in the same directory is appended
// to thousands of times a second, and each IN_MODIFY would wake this thread (libuv's
// uv_fs_event always asks for them, hence inotify itself here).
//
// Events come in bursts (a write is create, modify, close; a ConfigMap update touches several
// names), so a change is reported once things were quiet for kSettle, and only if what is on
// disk really differs from what the configuration in force was read from (ConfigFingerprint):
// an audit file or a CA written beside them changes nothing, and a file that changed while it
// was being read, or before the watch began, is a change all the same.
//
// Main thread only. Same ownership contract as the io/ handles it is made of: close(), then
// keep the object until `done` has run.

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "proxy/config/config_fingerprint.h"
#include "proxy/io/loop_handles.h"
#include "proxy/io/timer.h"

namespace sluice::proxy {

class ConfigWatch {
 public:
  static constexpr std::chrono::milliseconds kSettle{250};

  // `file`: the config file; `on_change` runs on the loop after a settled change.
  ConfigWatch(uv_loop_t* loop, std::string file, std::function<void()> on_change);
  ~ConfigWatch();
  ConfigWatch(const ConfigWatch&) = delete;
  ConfigWatch& operator=(const ConfigWatch&) = delete;

  // The configuration in force was read from `as_read`, with `dir` as its sandboxes_dir (none
  // when empty): `dir` is watched from now on, in place of the previous one, and changes are
  // measured from `as_read`. If the files already differ from it, that is reported once they
  // settle.
  void loaded(const std::optional<std::string>& dir, ConfigFingerprint as_read);
  void close(std::function<void()> done);
  // inotify events read so far, relevant or not: what woke this thread (tests).
  std::uint64_t eventsRead() const { return events_read_; }

 private:
  void onSettled();
  void onClosed();
  // An inotify watch on `dir`; -1 (and a warning) if it cannot be watched.
  int addWatch(const std::string& dir);
  void rewatchLost();
  void readEvents();
  void settleLater();

  std::string file_;
  std::string file_name_;  // the config file's name in its directory
  std::string dir_;        // sandboxes_dir, or empty
  std::function<void()> on_change_;
  int inotify_ = -1;
  int config_dir_watch_ = -1;
  int sandbox_dir_watch_ = -1;
  std::optional<io::Poll> poll_;  // on inotify_, when there is one
  io::Timer settle_;
  ConfigFingerprint last_;      // what is on disk as last loaded, or as last reported
  ConfigFingerprint reported_;  // as last reported
  std::uint64_t events_read_ = 0;
  int open_handles_ = 0;
  bool closing_ = false;
  std::function<void()> done_;
};

}  // namespace sluice::proxy
