#include "proxy/config_watch.h"

#include <dirent.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <vector>

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

// A file's identity and version, following symlinks (a ConfigMap's files are symlinks into a
// directory that is swapped whole).
void appendStat(std::string& out, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    out += "-;";
    return;
  }
  out += std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
         std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + ";";
}

}  // namespace

ConfigWatch::ConfigWatch(uv_loop_t* loop, std::string file, std::function<void()> on_change)
    : loop_(loop),
      file_(std::move(file)),
      file_name_(baseName(file_)),
      on_change_(std::move(on_change)) {
  for (Watch* w : {&config_dir_, &sandbox_dir_}) {
    uv_fs_event_init(loop_, &w->handle);
    w->handle.data = w;
    w->owner = this;
  }
  config_dir_.only_config_file = true;
  uv_timer_init(loop_, &settle_);
  settle_.data = this;
  open_handles_ = 3;
  startWatch(config_dir_, parentOf(file_));
  last_ = fingerprint();
}

ConfigWatch::~ConfigWatch() = default;

void ConfigWatch::startWatch(Watch& watch, const std::string& dir) {
  int rc = uv_fs_event_start(&watch.handle, &ConfigWatch::onEvent, dir.c_str(), 0);
  if (rc != 0) {
    // Not fatal: SIGHUP still reloads. A sandboxes_dir that does not exist is already a
    // config error.
    spdlog::warn("sluice: cannot watch {} for changes ({}); reload with SIGHUP", dir,
                 uv_strerror(rc));
    return;
  }
  watch.open = true;
}

void ConfigWatch::stopWatch(Watch& watch) {
  if (watch.open) {
    uv_fs_event_stop(&watch.handle);
    watch.open = false;
  }
}

void ConfigWatch::watchSandboxDir(const std::optional<std::string>& dir) {
  std::string wanted = dir.value_or("");
  if (wanted != dir_ && !closing_) {
    stopWatch(sandbox_dir_);
    dir_ = wanted;
    if (!dir_.empty()) {
      startWatch(sandbox_dir_, dir_);
    }
  }
  last_ = fingerprint();
}

void ConfigWatch::onEvent(uv_fs_event_t* handle, const char* name, int, int status) noexcept {
  auto* watch = static_cast<Watch*>(handle->data);
  ConfigWatch* self = watch->owner;
  if (status != 0 || self->closing_) {
    return;
  }
  if (watch->only_config_file && name != nullptr) {
    // Beside the config file live other things (CAs, audit logs): only the file itself, or a
    // ConfigMap's `..data` swap, counts.
    std::string_view n = name;
    if (n != self->file_name_ && !n.starts_with("..")) {
      return;
    }
  }
  uv_timer_start(&self->settle_, &ConfigWatch::onSettled,
                 static_cast<std::uint64_t>(kSettle.count()), 0);
}

void ConfigWatch::onSettled(uv_timer_t* timer) noexcept {
  auto* self = static_cast<ConfigWatch*>(timer->data);
  std::string now = self->fingerprint();
  if (now == self->last_) {
    return;
  }
  self->last_ = std::move(now);
  self->on_change_();
}

std::string ConfigWatch::fingerprint() const {
  std::string out;
  appendStat(out, file_);
  if (dir_.empty()) {
    return out;
  }
  DIR* handle = ::opendir(dir_.c_str());
  if (handle == nullptr) {
    return out + "no directory";
  }
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(handle)) {
    std::string_view name = entry->d_name;
    if (!name.starts_with(".")) {
      names.emplace_back(name);
    }
  }
  ::closedir(handle);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    out += name + "=";
    appendStat(out, dir_ + "/" + name);
  }
  return out;
}

void ConfigWatch::close(std::function<void()> done) {
  if (closing_) {
    return;
  }
  closing_ = true;
  done_ = std::move(done);
  for (Watch* w : {&config_dir_, &sandbox_dir_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(&w->handle), &ConfigWatch::onClosed);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&settle_), &ConfigWatch::onClosed);
}

void ConfigWatch::onClosed(uv_handle_t* handle) noexcept {
  ConfigWatch* self = handle->type == UV_TIMER ? static_cast<ConfigWatch*>(handle->data)
                                               : static_cast<Watch*>(handle->data)->owner;
  if (--self->open_handles_ > 0) {
    return;
  }
  if (self->done_) {
    auto done = std::move(self->done_);
    done();
  }
}

}  // namespace sluice::proxy
