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
    : loop_(loop),
      file_(std::move(file)),
      file_name_(baseName(file_)),
      on_change_(std::move(on_change)) {
  uv_timer_init(loop_, &settle_);
  settle_.data = this;
  open_handles_ = 1;
  inotify_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_ < 0) {
    spdlog::warn("sluice: cannot watch the configuration for changes ({}); reload with SIGHUP",
                 std::strerror(errno));
  } else {
    uv_poll_init(loop_, &poll_, inotify_);
    poll_.data = this;
    ++open_handles_;
    uv_poll_start(&poll_, UV_READABLE, &ConfigWatch::onReadable);
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

void ConfigWatch::onReadable(uv_poll_t* poll, int status, int) noexcept {
  if (status == 0) {
    static_cast<ConfigWatch*>(poll->data)->readEvents();
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
    uv_timer_start(&settle_, &ConfigWatch::onSettled, static_cast<std::uint64_t>(kSettle.count()),
                   0);
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

void ConfigWatch::onSettled(uv_timer_t* timer) noexcept {
  auto* self = static_cast<ConfigWatch*>(timer->data);
  self->rewatchLost();
  ConfigFingerprint now = ConfigFingerprint::onDisk(self->file_, self->dir_);
  // Not again for what was reported already: were the loader ever to record a file unlike
  // ConfigWatch does, that would otherwise be a reload every kSettle, forever.
  if (now == self->last_ || now == self->reported_) {
    return;
  }
  self->last_ = now;
  self->reported_ = std::move(now);
  self->on_change_();
}

void ConfigWatch::close(std::function<void()> done) {
  if (closing_) {
    return;
  }
  closing_ = true;
  done_ = std::move(done);
  if (inotify_ >= 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&poll_), &ConfigWatch::onClosed);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&settle_), &ConfigWatch::onClosed);
}

void ConfigWatch::onClosed(uv_handle_t* handle) noexcept {
  auto* self = static_cast<ConfigWatch*>(handle->data);
  if (--self->open_handles_ > 0) {
    return;
  }
  if (self->done_) {
    auto done = std::move(self->done_);
    done();
  }
}

}  // namespace sluice::proxy
