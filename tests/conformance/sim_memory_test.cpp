// The sim accelerator's memory, loaded through the plugin host as the engine
// loads it: device addresses round-trip through explicit copies, a copy that
// leaves its allocation is an error, and a direct load or store through a
// device address kills the process (the core cannot read device memory).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "plugin_host/plugin_host.hpp"
#include "troupe/platform.hpp"

namespace troupe {
namespace {

const Platform* sim_platform() {
  static plugin_host::PluginHost* host = [] {
    plugin_host::HostOptions o;
    o.plugin_dirs = {SIM_PLUGIN_DIR};
    return new plugin_host::PluginHost(o);  // kept: the platform lives in its library
  }();
  auto p = host->platform("sim");
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p.ok() ? *p : nullptr;
}

TEST(SimMemory, CopiesRoundTripAndAreChecked) {
  const Platform* sim = sim_platform();
  ASSERT_NE(sim, nullptr);
  EXPECT_EQ(sim->device_type(), "sim");
  EXPECT_TRUE(sim->is_out_of_tree());
  auto mem = sim->make_allocator(ConfigValues{});
  ASSERT_TRUE(mem.ok());
  EXPECT_FALSE((*mem)->host_addressable());
  auto buf = (*mem)->allocate(1000);
  ASSERT_TRUE(buf.ok());
  EXPECT_GE((*mem)->allocated_bytes(), 1000);
  void* dev = (*buf)->data();
  std::string in(1000, 'x'), out(1000, '.');
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>('a' + i % 26);
  ASSERT_TRUE((*mem)->copy(dev, in.data(), 1000, CopyKind::host_to_device).ok());
  ASSERT_TRUE((*mem)->copy(out.data(), dev, 1000, CopyKind::device_to_host).ok());
  EXPECT_EQ(out, in);
  // Past the end of the allocation, a host pointer as the device side, device memory as the host side.
  EXPECT_EQ((*mem)->copy(out.data(), dev, 2000, CopyKind::device_to_host).code(), StatusCode::out_of_range);
  EXPECT_EQ((*mem)->copy(out.data(), in.data(), 10, CopyKind::device_to_host).code(), StatusCode::invalid_argument);
  EXPECT_EQ((*mem)->copy(dev, dev, 10, CopyKind::host_to_device).code(), StatusCode::invalid_argument);
  const DeviceMemory before = sim->memory_info();
  buf->reset();
  EXPECT_GT(sim->memory_info().free_bytes, before.free_bytes);
}

TEST(SimMemoryDeathTest, TheCoreCannotDereferenceADeviceAddress) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Platform* sim = sim_platform();
  ASSERT_NE(sim, nullptr);
  auto mem = sim->make_allocator(ConfigValues{});
  ASSERT_TRUE(mem.ok());
  auto buf = (*mem)->allocate(64);
  ASSERT_TRUE(buf.ok());
  volatile float* dev = static_cast<float*>((*buf)->data());
  EXPECT_DEATH({ dev[0] = 1.0f; }, "");
  EXPECT_DEATH({ [[maybe_unused]] float f = dev[1]; }, "");
}

TEST(SimMemory, MoreThanOneRankIsRefusedWithAReason) {
  const Platform* sim = sim_platform();
  ASSERT_NE(sim, nullptr);
  ConfigValues config;
  ASSERT_TRUE(config.set_int("parallel.tensor_parallel_size", 2).ok());
  Status st = sim->check_and_update_config(config);
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("platform sim runs one rank only"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace troupe
