// MaskBench's check of one test instance (guidance-ai/jsonschemabench,
// maskbench/maskbench/runner.py): the instance is serialized as Python's
// json.dumps(data, ensure_ascii=False) writes it, tokenized without special
// tokens, and walked token by token: before each token the mask is computed
// and the token must be in it, then it is accepted. Stricter than MaskBench's
// runner, the end must also be accepted (end-of-generation allowed) for the
// instance to count as accepted. The walk also checks that the mask and
// accept_token agree on every token it meets.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/rank/structured/grammar.hpp"
#include "runtime/rank/structured/token_vocabulary.hpp"

namespace troupe::bench {

struct WalkResult {
  bool accepted = false;          // every token allowed and the end accepted
  size_t tokens_allowed = 0;      // tokens walked before the first refused one
  bool ended = false;             // end-of-generation allowed after the last token
  std::string mismatch;           // the mask and accept_token disagreed (an engine bug)
  std::string error;              // a mask failed: a limit of the grammar was reached
  std::vector<double> mask_us;    // per token: mask computation plus accepting the token
};

WalkResult walk_tokens(const std::shared_ptr<const structured::Grammar>& grammar,
                       const std::shared_ptr<const structured::TokenVocabulary>& vocab,
                       const std::vector<int32_t>& tokens);

}  // namespace troupe::bench
