#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/crypto.hpp"
#include "runtime/core/sched/block_hash.hpp"

namespace troupe::sched {
namespace {

using crypto::Sha256;
using crypto::to_hex;

// FIPS 180-4 example vectors (NIST CSRC "SHA256.pdf" and the short/long messages).
TEST(Sha256, Abc) {
  EXPECT_EQ(to_hex(Sha256::digest("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, Empty) {
  EXPECT_EQ(to_hex(Sha256::digest("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, TwoBlockMessage) {
  EXPECT_EQ(to_hex(Sha256::digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, FourBlockMessage) {
  EXPECT_EQ(to_hex(Sha256::digest("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                                  "klmnopqrlmnopqrsmnopqrstnopqrstu")),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionA) {
  // Fed in uneven pieces to exercise the buffering across block boundaries.
  Sha256 h;
  const std::string piece(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = std::min(left, piece.size());
    h.update(piece.data(), n);
    left -= n;
  }
  EXPECT_EQ(to_hex(h.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  // Lengths around 55/56/64 bytes take different padding paths; incremental
  // and one-shot digests must agree.
  for (size_t len : {55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u}) {
    const std::string msg(len, 'x');
    Sha256 h;
    for (char c : msg) h.update(&c, 1);
    EXPECT_EQ(h.finish(), Sha256::digest(msg)) << len;
  }
  // Known: 64 x 'a'.
  EXPECT_EQ(to_hex(Sha256::digest(std::string(64, 'a'))),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(BlockHash, ChainedAndSalted) {
  const std::vector<int32_t> a = {1, 2, 3, 4};
  const std::vector<int32_t> b = {5, 6, 7, 8};
  const BlockHash a0 = hash_block_tokens(std::nullopt, a, std::nullopt);
  EXPECT_EQ(a0, hash_block_tokens(std::nullopt, a, std::nullopt));
  // Same tokens after a different parent: a different block.
  const BlockHash b_after_a = hash_block_tokens(a0, b, std::nullopt);
  const BlockHash b_first = hash_block_tokens(std::nullopt, b, std::nullopt);
  EXPECT_NE(b_after_a, b_first);
  // A salt, even empty, changes the hash.
  EXPECT_NE(a0, hash_block_tokens(std::nullopt, a, std::string_view("")));
  EXPECT_NE(hash_block_tokens(std::nullopt, a, std::string_view("s1")),
            hash_block_tokens(std::nullopt, a, std::string_view("s2")));
}

TEST(BlockHash, ExtendCoversFullBlocksOnly) {
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<BlockHash> hashes;
  extend_block_hashes(hashes, tokens, 4, std::nullopt);
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hashes[0], hash_block_tokens(std::nullopt, std::span(tokens).first(4), std::nullopt));
  EXPECT_EQ(hashes[1], hash_block_tokens(hashes[0], std::span(tokens).subspan(4, 4), std::nullopt));
  tokens.push_back(11);
  tokens.push_back(12);
  extend_block_hashes(hashes, tokens, 4, std::nullopt);
  ASSERT_EQ(hashes.size(), 3u);
  // The salt enters block 0, hence every later block through the chain.
  std::vector<BlockHash> salted;
  extend_block_hashes(salted, tokens, 4, std::string("tenant"));
  for (size_t i = 0; i < 3; ++i) EXPECT_NE(salted[i], hashes[i]) << i;
}

}  // namespace
}  // namespace troupe::sched

// RFC 4231 test cases 1, 2 and 6 (a key longer than a block is hashed first).
TEST(HmacSha256, Rfc4231Vectors) {
  using troupe::crypto::hmac_sha256;
  using troupe::crypto::to_hex;
  EXPECT_EQ(to_hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(to_hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  // An empty key is a key like any other (HMAC of "" under "": a known value).
  EXPECT_EQ(to_hex(hmac_sha256("", "")), "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST(RandomBytes, LengthAndFreshness) {
  auto a = troupe::crypto::random_bytes(32);
  auto b = troupe::crypto::random_bytes(32);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_NE(*a, *b);  // 2^-256 to fail by chance
  auto h = troupe::crypto::random_hex(16);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->size(), 32u);
  EXPECT_EQ(h->find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(EqualConstantTime, ComparesWholeStrings) {
  using troupe::crypto::equal_constant_time;
  EXPECT_TRUE(equal_constant_time("", ""));
  EXPECT_TRUE(equal_constant_time("abc", "abc"));
  EXPECT_FALSE(equal_constant_time("abc", "abd"));
  EXPECT_FALSE(equal_constant_time("abc", "ab"));
  EXPECT_FALSE(equal_constant_time(std::string("a\0b", 3), std::string("a\0c", 3)));
}
