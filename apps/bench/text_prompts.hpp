// Prompts for `troupe bench serve` made from text, so any OpenAI-compatible
// server can take them (no /tokenize needed): random English words drawn
// from a fixed list by a seeded generator. Different seeds give different
// prompts from the first word on, so a prefix cache finds nothing to reuse
// across runs; the same seed gives the same prompts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::apps::bench {

/// `count` prompts of `words` words each (at least one word), from `seed`.
std::vector<std::string> make_text_prompts(uint64_t seed, int count, int words);

/// Words per prompt to aim at `target_tokens` tokens, given that a probe of
/// `probe_words` words counted `probe_tokens` prompt tokens on the server
/// (special tokens such as BOS included). At least one word.
int words_for_tokens(int target_tokens, int probe_words, int64_t probe_tokens);

}  // namespace troupe::apps::bench
