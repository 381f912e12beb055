#include "troupe/check.hpp"

#include <cstdio>
#include <cstdlib>

namespace troupe::detail {

void check_failed(const char* file, int line, const char* expr, const char* message) {
  std::fprintf(stderr, "troupe: invariant broken at %s:%d: %s (%s)\n", file, line, message, expr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace troupe::detail
