#include "apps/bench/text_prompts.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>

namespace troupe::apps::bench {
namespace {

// Common English words: most are one token (with their leading space) in
// byte-pair vocabularies, so a prompt's token count follows its word count.
constexpr const char* kWords[] = {
    "the",     "river",   "quiet",   "market",  "stone",   "light",   "garden",  "story",   "north",   "window",
    "paper",   "music",   "silver",  "forest",  "engine",  "morning", "cloud",   "letter",  "bridge",  "orange",
    "winter",  "table",   "signal",  "harbor",  "candle",  "village", "answer",  "before",  "yellow",  "summer",
    "people",  "water",   "number",  "little",  "house",   "school",  "country", "mother",  "father",  "friend",
    "family",  "moment",  "history", "office",  "machine", "doctor",  "picture", "island",  "animal",  "question",
    "problem", "system",  "program", "money",   "power",   "order",   "place",   "world",   "city",    "street",
    "road",    "field",   "mountain", "ocean",  "desert",  "valley",  "storm",   "rain",    "snow",    "wind",
    "green",   "blue",    "red",     "black",   "white",   "bright",  "dark",    "warm",    "cold",    "quick",
    "slow",    "happy",   "strong",  "simple",  "early",   "late",    "open",    "close",   "began",   "found",
    "carried", "walked",  "opened",  "turned",  "looked",  "called",  "wrote",   "read",    "sang",    "built",
    "and",     "with",    "under",   "over",    "after",   "near",    "through", "into",    "from",    "while",
    "of",      "a",       "to",      "in",      "on",      "for",     "by",      "at",      "as",      "then",
};

}  // namespace

std::vector<std::string> make_text_prompts(uint64_t seed, int count, int words) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, std::size(kWords) - 1);
  words = std::max(words, 1);
  std::vector<std::string> prompts;
  prompts.reserve(static_cast<size_t>(std::max(count, 0)));
  for (int i = 0; i < count; ++i) {
    std::string text;
    for (int w = 0; w < words; ++w) {
      if (w > 0) text += ' ';
      text += kWords[pick(rng)];
    }
    prompts.push_back(std::move(text));
  }
  return prompts;
}

int words_for_tokens(int target_tokens, int probe_words, int64_t probe_tokens) {
  if (probe_words <= 0 || probe_tokens <= 0) return std::max(target_tokens, 1);
  const double per_word = static_cast<double>(probe_tokens) / probe_words;
  return std::max(1, static_cast<int>(std::lround(target_tokens / per_word)));
}

}  // namespace troupe::apps::bench
