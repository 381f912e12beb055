// spdlog behind troupe/log.hpp. We format the vLLM-style prefix ourselves
// ("INFO 11-30 08:17:25 file.cpp:61] ") and let spdlog own the sink and locking.
#include "troupe/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>

namespace troupe::log {
namespace {

Level initial_level() {
  Level l = Level::info;
  if (const char* env = std::getenv("TROUPE_LOG_LEVEL")) parse_level(env, &l);
  return l;
}

std::atomic<int>& level_ref() {
  static std::atomic<int> l{static_cast<int>(initial_level())};
  return l;
}

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> l = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto lg = std::make_shared<spdlog::logger>("troupe", sink);
    lg->set_pattern("%v");
    lg->set_level(spdlog::level::trace);
    lg->flush_on(spdlog::level::trace);
    return lg;
  }();
  return *l;
}

const char* level_name(Level l) {
  switch (l) {
    case Level::trace: return "TRACE";
    case Level::debug: return "DEBUG";
    case Level::info: return "INFO";
    case Level::warning: return "WARNING";
    case Level::error: return "ERROR";
    case Level::off: return "OFF";
  }
  return "?";
}

}  // namespace

void write(Level lvl, const char* file, int line, std::string_view message) {
  if (static_cast<int>(lvl) < level_ref().load(std::memory_order_relaxed) || lvl == Level::off) return;
  std::string_view path(file);
  if (auto slash = path.find_last_of('/'); slash != std::string_view::npos) path.remove_prefix(slash + 1);
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%m-%d %H:%M:%S", &tm);
  logger().log(spdlog::level::info, "{} {} {}:{}] {}", level_name(lvl), stamp, path, line, message);
}

void set_level(Level l) { level_ref().store(static_cast<int>(l)); }
Level level() { return static_cast<Level>(level_ref().load(std::memory_order_relaxed)); }

bool parse_level(std::string_view text, Level* out) {
  struct Name { std::string_view name; Level level; };
  static constexpr Name names[] = {{"trace", Level::trace}, {"debug", Level::debug}, {"info", Level::info},
                                   {"warning", Level::warning}, {"warn", Level::warning},
                                   {"error", Level::error}, {"off", Level::off}};
  std::string lower(text);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& n : names) {
    if (lower == n.name) {
      *out = n.level;
      return true;
    }
  }
  return false;
}

}  // namespace troupe::log
