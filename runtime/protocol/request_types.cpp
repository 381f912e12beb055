#include "runtime/protocol/request_types.hpp"

namespace troupe::engine {

void accumulate(FinalOutput& f, const RequestOutput& d) {
  if (f.request_id.empty()) f.request_id = d.request_id;
  if (!d.prompt_token_ids.empty()) f.prompt_token_ids = d.prompt_token_ids;
  f.token_ids.insert(f.token_ids.end(), d.new_token_ids.begin(), d.new_token_ids.end());
  f.text += d.new_text;
  f.logprobs.insert(f.logprobs.end(), d.new_logprobs.begin(), d.new_logprobs.end());
  if (!d.embedding.empty()) f.embedding = d.embedding;
  if (d.finished) {
    f.finished = true;
    f.finish_reason = d.finish_reason;
    f.stop_reason = d.stop_reason;
    f.error = d.error;
  }
}

}  // namespace troupe::engine
