#include "net/refusal_log.hpp"

#include <utility>

namespace troupe::net {

RefusalLog::RefusalLog(std::string who, std::chrono::milliseconds every) : who_(std::move(who)), every_(every) {}

void RefusalLog::summary(const std::string& cause, Cause& c, Clock::time_point now) {
  const double seconds = std::chrono::duration<double>(now - c.logged_at).count();
  TROUPE_LOG_AT(c.level, "{}: {} more refusal(s) of the same kind ({}) in the last {:.1f} s; the last: {}", who_, c.held,
                cause, seconds, c.last);
  c.held = 0;
  c.logged_at = now;
}

void RefusalLog::refuse(const std::string& cause, const std::string& line, log::Level level) {
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  Cause& c = causes_[cause];
  ++c.total;
  c.level = level;
  if (c.total > 1 && now - c.logged_at < every_) {
    ++c.held;
    c.last = line;
    return;
  }
  if (c.held > 0) {
    c.last = line;
    ++c.held;
    summary(cause, c, now);
    return;
  }
  TROUPE_LOG_AT(level, "{}", line);
  c.logged_at = now;
}

void RefusalLog::flush() {
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  for (auto& [cause, c] : causes_)
    if (c.held > 0 && now - c.logged_at >= every_) summary(cause, c, now);
}

std::map<std::string, uint64_t> RefusalLog::counts() const {
  std::lock_guard lock(mu_);
  std::map<std::string, uint64_t> out;
  for (const auto& [cause, c] : causes_) out[cause] = c.total;
  return out;
}

}  // namespace troupe::net
