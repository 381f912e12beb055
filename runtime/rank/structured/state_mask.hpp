// The part of a token mask that depends on the lexer state alone, cached per
// state of a grammar's lexer: the tokens whose bytes all stay inside the
// current lexeme, and the trie nodes where a token's next byte would end the
// lexeme instead (there the parser decides, so those subtrees are walked again
// at every mask). A state revisited (inside a string, after a value at the same
// depth) then costs a copy of its bits and the walks below its boundaries.
#pragma once

#include <cstdint>
#include <vector>

namespace troupe::structured {

class TokenVocabulary;

struct StateMask {
  struct Boundary {
    uint32_t trie;    // the vocabulary's trie: a slice index, or the number of slices for the rest
    uint32_t node;    // the node whose byte ends the lexeme
    int32_t state;    // the lexer state before that byte
  };
  const TokenVocabulary* vocab = nullptr;  // the vocabulary the tries belong to
  std::vector<uint64_t> bits;              // allowed tokens, dense (empty when `ids` is used)
  std::vector<uint32_t> ids;               // allowed tokens, sparse
  std::vector<Boundary> boundaries;
  size_t bytes() const {
    return sizeof(StateMask) + bits.capacity() * 8 + ids.capacity() * 4 + boundaries.capacity() * sizeof(Boundary);
  }
};

}  // namespace troupe::structured
