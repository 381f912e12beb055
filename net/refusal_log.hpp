// Refusals as a flood leaves them: counted by cause, and logged at most once a
// second per cause. The first refusal of a quiet second is logged as it is; the
// ones after it within that second are counted, and the next line of that cause
// says how many were held back (or flush() says it once the second is over), so
// a thousand refused connections cost a few log lines, not a thousand. The
// counts are kept for /metrics. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "troupe/log.hpp"

namespace troupe::net {

class RefusalLog {
 public:
  using Clock = std::chrono::steady_clock;
  /// `who` starts the summary lines ("node", "HTTP server").
  explicit RefusalLog(std::string who, std::chrono::milliseconds every = std::chrono::milliseconds(1000));

  /// Counts a refusal of `cause` (a short fixed name: "handshake_slots", "handshake_timeout",
  /// ...) and logs `line` at `level` unless a line of that cause was logged within the
  /// last second.
  void refuse(const std::string& cause, const std::string& line, log::Level level = log::Level::warning);
  /// Logs what was held back for causes whose second is over (call it now and then).
  void flush();
  /// Refusals so far, by cause.
  std::map<std::string, uint64_t> counts() const;

 private:
  struct Cause {
    uint64_t total = 0;
    uint64_t held = 0;           // counted, not logged, since `logged_at`
    Clock::time_point logged_at{};
    std::string last;            // the last line held back
    log::Level level = log::Level::warning;
  };
  void summary(const std::string& cause, Cause& c, Clock::time_point now);

  std::string who_;
  std::chrono::milliseconds every_;
  mutable std::mutex mu_;
  std::map<std::string, Cause> causes_;
};

}  // namespace troupe::net
