#include "tests/support/transition_log.h"

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
std::size_t g_total = 0;

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
  spdlog::level::level_enum shown = spdlog::level::warn;
  if (const char* level = std::getenv("SLUICE_TEST_LOG"); level != nullptr) {
    shown = spdlog::level::from_str(level);
  }
  auto printed = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("session-test", printed);
  logger->set_level(shown);
  spdlog::set_default_logger(logger);
}

void noteTransition(std::string_view machine, std::string_view from, std::string_view to) {
  std::string key(machine);
  key.append(" ").append(from);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_seen != nullptr) {
    ++(*g_seen)[{std::move(key), std::string(to)}];
    ++g_total;
  }
}

std::size_t transitionsCounted() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_total;
}

std::map<std::pair<std::string, std::string>, std::size_t> transitionsSeen() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_seen == nullptr ? Seen{} : *g_seen;
}

std::size_t timesSeen(std::string_view machine, std::string_view from, std::string_view to) {
  std::string key(machine);
  key.append(" ").append(from);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_seen == nullptr) {
    return 0;
  }
  auto it = g_seen->find({key, std::string(to)});
  return it == g_seen->end() ? 0 : it->second;
}

}  // namespace sluice::test_support
