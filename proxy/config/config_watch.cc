#include "proxy/config/config_watch.h"

#include <spdlog/spdlog.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sluice::proxy {

namespace {

std::string parentOf(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) {
    return ".";
  }
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseName(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

ConfigWatch::ConfigWatch(uv_loop_t* loop, std::string file, std::function<void()> on_change)
    : file_(std::move(file)),
      file_name_(baseName(file_)),
      on_change_(std::move(on_change)),
      settle_(loop) {
  open_handles_ = 1;
  inotify_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_ < 0) {
    spdlog::warn("sluice: cannot watch the configuration for changes ({}); reload with SIGHUP",
                 std::strerror(errno));
  } else {
    poll_.emplace(loop, inotify_);
    ++open_handles_;
    poll_->start(UV_READABLE, [this](int status, int) {
      if (status == 0) {
        readEvents();
      }
    });
    config_dir_watch_ = addWatch(parentOf(file_));
  }
}

ConfigWatch::~ConfigWatch() {
  if (inotify_ >= 0) {
    ::close(inotify_);
  }
}

int ConfigWatch::addWatch(const std::string& dir) {
  constexpr std::uint32_t kMask = IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                                  IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;
  int wd = ::inotify_add_watch(inotify_, dir.c_str(), kMask | IN_ONLYDIR);
  if (wd < 0) {
    // Not fatal: SIGHUP still reloads. A sandboxes_dir that does not exist is already a
    // config error.
    spdlog::warn("sluice: cannot watch {} for changes ({}); reload with SIGHUP", dir,
                 std::strerror(errno));
  }
  return wd;
}

void ConfigWatch::loaded(const std::optional<std::string>& dir, ConfigFingerprint as_read) {
  std::string wanted = dir.value_or("");
  rewatchLost();
  if (wanted != dir_ && !closing_ && inotify_ >= 0) {
    // One directory may be both (sandboxes_dir: "."): inotify then has one watch for it, and
    // removing it for one would remove it for the other.
    if (sandbox_dir_watch_ >= 0 && sandbox_dir_watch_ != config_dir_watch_) {
      ::inotify_rm_watch(inotify_, sandbox_dir_watch_);
    }
    sandbox_dir_watch_ = -1;
    dir_ = wanted;
    if (!dir_.empty()) {
      sandbox_dir_watch_ = addWatch(dir_);
    }
  } else if (wanted != dir_) {
    dir_ = wanted;
  }
  last_ = std::move(as_read);
  // Whatever changed between the read and now (a file dropped in while sluice started, before
  // this directory was watched) raised no event to wait for.
  if (ConfigFingerprint::onDisk(file_, dir_) != last_) {
    settleLater();
  }
}

void ConfigWatch::readEvents() {
  alignas(inotify_event) char buffer[4096];
  bool relevant = false;
  for (;;) {
    ssize_t n = ::read(inotify_, buffer, sizeof(buffer));
    if (n <= 0) {
      break;  // EAGAIN: all read
    }
    // The kernel writes whole events, each name NUL-padded within `len`; checked all the same,
    // so that a short read could never send this past the bytes it has.
    const auto size = static_cast<std::size_t>(n);
    for (std::size_t at = 0; at + sizeof(inotify_event) <= size;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      if (event->len > size - at - sizeof(inotify_event)) {
        break;
      }
      at += sizeof(inotify_event) + event->len;
      ++events_read_;
      if ((event->mask & IN_IGNORED) != 0) {
        // The directory itself went away (removed, or renamed over): its watch is gone.
        if (event->wd == sandbox_dir_watch_ && sandbox_dir_watch_ != config_dir_watch_) {
          sandbox_dir_watch_ = -1;
        } else if (event->wd == config_dir_watch_) {
          config_dir_watch_ = -1;
          sandbox_dir_watch_ = sandbox_dir_watch_ == event->wd ? -1 : sandbox_dir_watch_;
        }
      }
      std::string_view name(event->name, ::strnlen(event->name, event->len));
      if (event->wd == sandbox_dir_watch_ || name.empty()) {
        relevant = true;
      } else if (event->wd == config_dir_watch_) {
        // Beside the config file live other things (CAs, audit logs): only the file itself,
        // or a ConfigMap's `..data` swap, counts.
        relevant |= name == file_name_ || name.starts_with("..");
      }
    }
  }
  if (relevant) {
    settleLater();
  }
}

void ConfigWatch::settleLater() {
  if (!closing_) {
    settle_.start(kSettle, [this] { onSettled(); });
  }
}

// A watched directory that went away and is back (rm -rf, mkdir): watched again. Asked at each
// settled change and each reload; without any, SIGHUP after recreating it does it.
void ConfigWatch::rewatchLost() {
  if (closing_ || inotify_ < 0) {
    return;
  }
  if (config_dir_watch_ < 0) {
    config_dir_watch_ = addWatch(parentOf(file_));
  }
  if (sandbox_dir_watch_ < 0 && !dir_.empty()) {
    sandbox_dir_watch_ = addWatch(dir_);
  }
}

void ConfigWatch::onSettled() {
  rewatchLost();
  ConfigFingerprint now = ConfigFingerprint::onDisk(file_, dir_);
  // Not again for what was reported already: were the loader ever to record a file unlike
  // ConfigWatch does, that would otherwise be a reload every kSettle, forever.
  if (now == last_ || now == reported_) {
    return;
  }
  last_ = now;
  reported_ = std::move(now);
  on_change_();
}

void ConfigWatch::close(std::function<void()> done) {
  if (closing_) {
    return;
  }
  closing_ = true;
  done_ = std::move(done);
  if (poll_) {
    poll_->close([this] { onClosed(); });
  }
  settle_.close([this] { onClosed(); });
}

void ConfigWatch::onClosed() {
  if (--open_handles_ > 0) {
    return;
  }
  if (done_) {
    auto done = std::move(done_);  // moved out first: `done` may destroy the watch
    done();
  }
}

}  // namespace sluice::proxy
