// The one logging facade (spdlog underneath, hidden in libtroupe_sdk).
// Lines look like vLLM's: "INFO 11-30 08:17:25 file.cpp:61] message".
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace troupe::log {

enum class Level { trace = 0, debug, info, warning, error, off };

/// Write one line at `level`, tagged with its source location.
void write(Level level, const char* file, int line, std::string_view message);
/// Lines below `level` are dropped. Initially from TROUPE_LOG_LEVEL (default info).
void set_level(Level level);
Level level();
/// Parse "trace|debug|info|warning|error|off"; false when unknown.
bool parse_level(std::string_view text, Level* out);

}  // namespace troupe::log

#define TROUPE_LOG_AT(lvl, ...)                                                   \
  do {                                                                            \
    if (static_cast<int>(lvl) >= static_cast<int>(::troupe::log::level()))       \
      ::troupe::log::write(lvl, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__));  \
  } while (0)
#define TROUPE_LOG_DEBUG(...) TROUPE_LOG_AT(::troupe::log::Level::debug, __VA_ARGS__)
#define TROUPE_LOG_INFO(...) TROUPE_LOG_AT(::troupe::log::Level::info, __VA_ARGS__)
#define TROUPE_LOG_WARNING(...) TROUPE_LOG_AT(::troupe::log::Level::warning, __VA_ARGS__)
#define TROUPE_LOG_ERROR(...) TROUPE_LOG_AT(::troupe::log::Level::error, __VA_ARGS__)
