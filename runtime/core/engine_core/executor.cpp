#include "runtime/core/engine_core/executor.hpp"

#include <algorithm>
#include <future>
#include <memory>

namespace troupe::engine {

void Executor::execute(StepInput input, std::function<void(Result<StepOutput>)> done) {
  collective(ExecuteStep{std::move(input)}, [done = std::move(done)](Result<std::vector<StepOutput>> outs) {
    if (!outs) return done(outs.status());
    if (outs->empty()) return done(internal_error("the executor has no ranks"));
    StepOutput driver = std::move(outs->front());
    for (size_t r = 1; r < outs->size(); ++r) {
      driver.communicator_bytes += (*outs)[r].communicator_bytes;
      driver.communicator_seconds = std::max(driver.communicator_seconds, (*outs)[r].communicator_seconds);
    }
    done(std::move(driver));
  });
}

Result<Executor::Replies> Executor::wait_for(RankCommand command) {
  auto promise = std::make_shared<std::promise<Result<Replies>>>();
  auto future = promise->get_future();
  collective(std::move(command), [promise](Result<Replies> replies) { promise->set_value(std::move(replies)); });
  return future.get();
}

}  // namespace troupe::engine
