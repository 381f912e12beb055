// Stepping an engine core until its requests finish, for tests that drive EngineCore
// directly: a bounded number of steps, each one started, and the core healthy after.
#pragma once

#include <gtest/gtest.h>

#include "runtime/core/engine_core/engine_core.hpp"

namespace troupe::testing {

inline void step_until_done(engine::EngineCore& core, engine::Executor& executor, int max_steps = 5000) {
  for (int steps = 0; core.has_unfinished_requests(); ++steps) {
    EXPECT_LT(steps, max_steps);
    if (steps >= max_steps) break;
    EXPECT_EQ(core.step(executor), engine::StepStatus::started);
  }
  EXPECT_TRUE(core.healthy()) << core.health().to_string();
}

}  // namespace troupe::testing
