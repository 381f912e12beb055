// vLLM's KV events config and wire format: the JSON's keys, types and defaults; the
// endpoint of each replica; the msgpack bytes of an EventBatch, checked by hand here
// (the Python subscriber test decodes and re-encodes them with msgspec, as vLLM does).
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/core/kv_events/kv_event_encoding.hpp"
#include "runtime/core/kv_events/kv_events_config.hpp"

namespace troupe::engine {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string out;
  for (int c : b) out.push_back(static_cast<char>(c));
  return out;
}

TEST(KvEventsConfig, VllmsKeysTypesAndDefaults) {
  auto c = KvEventsConfig::parse(R"({"enable_kv_cache_events": true, "endpoint": "tcp://*:6000",
                                     "replay_endpoint": "tcp://*:6100", "buffer_steps": 50, "topic": "kv"})");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->publisher, "zmq");  // vLLM's __post_init__: zmq when enabled and none named
  EXPECT_TRUE(c->publishes());
  EXPECT_EQ(c->replay_endpoint, std::optional<std::string>("tcp://*:6100"));
  EXPECT_EQ(c->buffer_steps, 50);
  auto off = KvEventsConfig::parse(R"({"publisher": "zmq"})");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->publishes());  // not enabled
  auto bad = KvEventsConfig::parse(R"({"enable_kv_cache_events": true, "port": 5})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown key \"port\""), std::string::npos) << bad.status().message();
  bad = KvEventsConfig::parse(R"({"buffer_steps": -1})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"buffer_steps\" must be a positive integer"), std::string::npos);
  bad = KvEventsConfig::parse(R"({"publisher": "kafka"})");
  EXPECT_FALSE(bad.ok());
  bad = KvEventsConfig::parse("not json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("must be a JSON object"), std::string::npos);
}

TEST(KvEventsConfig, EachReplicaHasItsEndpointAsVllmOffsetsIt) {
  EXPECT_EQ(*offset_endpoint("tcp://*:5557", 0), "tcp://*:5557");
  EXPECT_EQ(*offset_endpoint("tcp://*:5557", 3), "tcp://*:5560");
  EXPECT_EQ(*offset_endpoint("tcp://10.0.0.1:5557", 1), "tcp://10.0.0.1:5558");
  EXPECT_EQ(*offset_endpoint("inproc://cache", 2), "inproc://cache_dp2");
  EXPECT_FALSE(offset_endpoint("ipc:///tmp/kv", 1).ok());
  EXPECT_FALSE(offset_endpoint("tcp://*:65535", 1).ok());
  EXPECT_EQ(*offset_endpoint("ipc:///tmp/kv", 0), "ipc:///tmp/kv");
}

TEST(KvEventEncoding, ExternalHashIsTheDigestsLastEightBytesBigEndian) {
  sched::BlockHash h;
  for (size_t i = 0; i < h.bytes.size(); ++i) h.bytes[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(external_block_hash(h), 0x18191a1b1c1d1e1full);
}

TEST(KvEventEncoding, BatchesAreVllmsArrays) {
  const std::string cleared = encode_event_batch(1.5, {sched::AllBlocksCleared{}}, 2);
  std::string want = bytes({0x93, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x91, 0x91, 0xb0});
  want += "AllBlocksCleared";
  want += bytes({0x02});
  EXPECT_EQ(cleared, want);

  sched::BlockStored stored;
  stored.block_hashes.resize(1);
  stored.block_hashes[0].bytes[31] = 7;
  stored.token_ids = {1, 200};
  stored.block_size = 2;
  sched::BlockRemoved removed;
  removed.block_hashes = stored.block_hashes;
  const std::string out = encode_event_batch(0.0, {stored, removed}, 0);
  std::string expect = bytes({0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x92});
  // ["BlockStored", [7], None, [1, 200], 2, None, "GPU", None, [None], 0, "full_attention", None]
  expect += bytes({0x9c, 0xab}) + "BlockStored" + bytes({0x91, 0x07, 0xc0, 0x92, 0x01, 0xcc, 0xc8, 0x02, 0xc0, 0xa3}) +
            "GPU" + bytes({0xc0, 0x91, 0xc0, 0x00, 0xae}) + "full_attention" + bytes({0xc0});
  // ["BlockRemoved", [7], "GPU", 0]
  expect += bytes({0x94, 0xac}) + "BlockRemoved" + bytes({0x91, 0x07, 0xa3}) + "GPU" + bytes({0x00});
  expect += bytes({0x00});
  EXPECT_EQ(out, expect);
}

TEST(KvEventEncoding, ALoraBlockCarriesItsIdAndName) {
  sched::BlockStored stored;
  stored.block_hashes.resize(1);
  stored.block_size = 16;
  stored.lora_id = 3;
  const std::string out = encode_event_batch(0.0, {stored}, 1, [](int64_t id) { return id == 3 ? "sql" : ""; });
  EXPECT_NE(out.find(bytes({0x03, 0xa3}) + "GPU" + bytes({0xa3}) + "sql"), std::string::npos);
}

TEST(KvEventEncoding, ASlidingWindowCacheSaysSo) {
  sched::BlockStored stored;
  stored.block_hashes.resize(1);
  stored.block_size = 16;
  stored.sliding_window = 4096;
  const std::string out = encode_event_batch(0.0, {stored}, 0);
  EXPECT_NE(out.find(bytes({0xae}) + "sliding_window" + bytes({0xcd, 0x10, 0x00})), std::string::npos);
}

}  // namespace
}  // namespace troupe::engine
