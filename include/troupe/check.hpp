// Broken invariants abort with file, line and message; expected failures
// use Status/Result instead (status.hpp).
#pragma once

namespace troupe::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* expr, const char* message);
}  // namespace troupe::detail

#define TROUPE_CHECK(cond, message)                                            \
  do {                                                                         \
    if (!(cond)) ::troupe::detail::check_failed(__FILE__, __LINE__, #cond, message); \
  } while (0)
