#include "tests/support/transition_log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>

namespace sluice::test_support {

namespace {

using Seen = std::map<std::pair<std::string, std::string>, std::size_t>;

std::mutex g_mutex;
Seen* g_seen = nullptr;  // leaked on purpose: sessions may log until the very end

// "[C<id>] <From> -> <To>", exactly.
bool parseTransition(std::string_view line, std::string& from, std::string& to) {
  if (!line.starts_with("[C")) {
    return false;
  }
  std::size_t close = line.find("] ");
  if (close == std::string_view::npos) {
    return false;
  }
  std::string_view rest = line.substr(close + 2);
  std::size_t arrow = rest.find(" -> ");
  if (arrow == std::string_view::npos || rest.find(' ') != arrow) {
    return false;
  }
  std::string_view next = rest.substr(arrow + 4);
  if (next.empty() || next.find(' ') != std::string_view::npos) {
    return false;
  }
  from.assign(rest.substr(0, arrow));
  to.assign(next);
  return true;
}

class TransitionSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string from;
    std::string to;
    if (parseTransition(std::string_view(msg.payload.data(), msg.payload.size()), from, to)) {
      std::lock_guard<std::mutex> lock(g_mutex);
      ++(*g_seen)[{from, to}];
    }
  }
  void flush_() override {}
};

// Lists what was seen when the binary exits.
struct Report {
  ~Report() {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_seen == nullptr || g_seen->empty()) {
      return;
    }
    std::fprintf(stderr, "session transitions exercised (from -> to: times):\n");
    for (const auto& [edge, times] : *g_seen) {
      std::fprintf(stderr, "  %s -> %s: %zu\n", edge.first.c_str(), edge.second.c_str(), times);
    }
  }
};
Report g_report;

}  // namespace

void installTransitionLog() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_seen != nullptr) {
      return;
    }
    g_seen = new Seen;
  }
  std::vector<spdlog::sink_ptr> sinks{std::make_shared<TransitionSink>()};
  spdlog::level::level_enum shown = spdlog::level::warn;
  if (const char* level = std::getenv("SLUICE_TEST_LOG"); level != nullptr) {
    shown = spdlog::level::from_str(level);
  }
  auto printed = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  printed->set_level(shown);
  sinks.push_back(printed);
  auto logger = std::make_shared<spdlog::logger>("session-test", sinks.begin(), sinks.end());
  logger->set_level(spdlog::level::debug);
  spdlog::set_default_logger(logger);
}

std::map<std::pair<std::string, std::string>, std::size_t> transitionsSeen() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_seen == nullptr ? Seen{} : *g_seen;
}

}  // namespace sluice::test_support
