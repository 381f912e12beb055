#include "actors/rank_group.hpp"

#include <caf/all.hpp>

#include "actors/status_error.hpp"

namespace troupe::actors {

std::string RankGroup::name(size_t rank) const {
  std::string out = "the worker of rank " + std::to_string(rank);
  if (rank < places.size() && !places[rank].empty()) out += " (" + places[rank] + ")";
  return out;
}

CollectiveRound::CollectiveRound(const RankGroup& group, const char* what, engine::Executor::Done done)
    : what_(what), timeout_(group.timeout), done_(std::move(done)), replies_(group.workers.size()),
      answered_(group.workers.size(), false), pending_(group.workers.size()) {
  for (size_t r = 0; r < group.workers.size(); ++r) names_.push_back(group.name(r));
}

void CollectiveRound::on_reply(size_t rank, engine::RankReply reply) {
  if (finished_ || answered_[rank]) return;
  answered_[rank] = true;
  replies_[rank] = std::move(reply);
  if (--pending_ > 0) return;
  finished_ = true;
  done_(std::move(replies_));
}

void CollectiveRound::on_error(size_t rank, const caf::error& error) {
  if (finished_) return;  // the first failure wins; later answers are dropped
  if (error == caf::sec::request_timeout) return fail_timeout(rank);
  finished_ = true;
  done_(to_status(error, what_ + " on " + names_[rank]));
}

void CollectiveRound::on_deadline() {
  if (finished_) return;
  size_t rank = 0;
  while (rank + 1 < answered_.size() && answered_[rank]) ++rank;
  fail_timeout(rank);
}

void CollectiveRound::fail_timeout(size_t rank) {
  finished_ = true;
  done_(unavailable(names_[rank] + " did not answer " + what_ + " within " + std::to_string(timeout_.count()) +
                    " ms"));
}

void BlockingRankExecutor::collective(engine::RankCommand command, Done done) {
  if (group_.workers.empty()) return done(internal_error("the executor has no ranks"));
  CollectiveRound round(group_, command.what(), std::move(done));
  caf::scoped_actor self{*system_};
  using Handle = decltype(self->request(group_.workers[0], group_.timeout, rank_atom_v, command));
  std::vector<Handle> handles;
  handles.reserve(group_.workers.size());
  // Every request goes out before any answer is awaited: ranks of one model
  // meet in their communicator, so none may wait for another's reply.
  for (const auto& w : group_.workers) handles.push_back(self->request(w, group_.timeout, rank_atom_v, command));
  for (size_t r = 0; r < handles.size(); ++r)
    handles[r].receive([&](engine::RankReply& reply) { round.on_reply(r, std::move(reply)); },
                       [&](caf::error& err) { round.on_error(r, err); });
}

}  // namespace troupe::actors
