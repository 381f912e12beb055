// What the cuda platform decides without a device, so it runs wherever CUDA is
// compiled (label unit): config defaults, KV cache dtypes, the refusals of bad
// NCCL ids before any device call, the NCCL timeout from the environment, and
// the probe's reason in `troupe plugins` on a machine without a GPU.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/config/engine_config.hpp"
#include "platforms/cuda/cuda_attention.hpp"
#include "platforms/cuda/cuda_ops.hpp"
#include "platforms/cuda/cuda_platform.hpp"
#include "platforms/cuda/device_claim.hpp"
#ifdef TROUPE_CUDA_HAVE_NCCL
#include "platforms/cuda/nccl_communicator.hpp"
#endif
#include "tests/platforms/cuda/cuda_test_device.hpp"
#include "tests/run_troupe.hpp"

namespace troupe::cuda {
namespace {

TEST(CudaPlatformConfig, DefaultsAndRefusals) {
  CudaPlatform platform(2);
  EngineConfig config;
  ASSERT_TRUE(platform.check_and_update_config(config).ok());
  EXPECT_EQ(config.parallel.worker_cls, "troupe.cuda.CudaWorker");
  EXPECT_EQ(config.cache.cache_dtype, "float16");
  EXPECT_EQ(config.cache.block_size, 16);
  EXPECT_FALSE(config.compilation.enforce_eager);
  EXPECT_EQ(config.compilation.graph_mode, "cuda_graph");
  EngineConfig eager;
  eager.compilation.enforce_eager = true;
  ASSERT_TRUE(platform.check_and_update_config(eager).ok());
  EXPECT_EQ(eager.compilation.graph_mode, "none");
  config.cache.cache_dtype = "bfloat16";
  ASSERT_TRUE(platform.check_and_update_config(config).ok());
  EXPECT_EQ(config.cache.cache_dtype, "bfloat16");
  config.cache.cache_dtype = "fp8";
  EXPECT_EQ(platform.check_and_update_config(config).code(), StatusCode::invalid_argument);
  config.cache.cache_dtype = "auto";
  config.parallel.tensor_parallel_size = 3;
  const Status too_many = platform.check_and_update_config(config);
  EXPECT_EQ(too_many.code(), StatusCode::invalid_argument);
  EXPECT_NE(too_many.message().find("2 CUDA device(s)"), std::string::npos) << too_many.message();
  config.parallel.tensor_parallel_size = 1;
  config.parallel.worker_cls = "some.OtherWorker";
  EXPECT_EQ(platform.make_worker(config, 0).status().code(), StatusCode::not_found);
}

// In a child process: 0 when claiming `key` is refused naming `holder`, 1 when it succeeds,
// 2 when it fails otherwise.
int claim_in_child(const std::string& key, const std::string& holder) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    auto c = DeviceClaim::acquire(key, "cuda:9", 1);
    if (c.ok()) ::_exit(1);
    const bool named = c.status().code() == StatusCode::resource_exhausted &&
                       c.status().message().find(holder) != std::string::npos &&
                       c.status().message().find("fewer CUDA devices than ranks") != std::string::npos;
    ::_exit(named ? 0 : 2);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

// A host with more ranks than devices: the second process to claim a device is refused,
// naming who holds it; ranks of one process share the claim; a released claim is free again.
TEST(CudaDeviceClaim, OneProcessPerDevice) {
  const std::string key = "0000:test:" + std::to_string(::getpid());
  auto first = DeviceClaim::acquire(key, "cuda:9", 0);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto again = DeviceClaim::acquire(key, "cuda:9", 0);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(first->get(), again->get());
  EXPECT_EQ(claim_in_child(key, "pid " + std::to_string(::getpid()) + " rank 0"), 0);
  const std::string path = (*first)->path();
  first->reset();
  again->reset();
  EXPECT_EQ(claim_in_child(key, ""), 1);  // the child took it and exited, dropping it
  ::unlink(path.c_str());
}

TEST(CudaPlatformConfig, QuantizationsAreWhatTheKernelsCompute) {
  CudaPlatform platform(1);
  for (const char* q : {"f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k",
                        "q6_k", "iq4_nl", "iq4_xs"})
    EXPECT_TRUE(platform.verify_quantization(q).ok()) << q;
  const Status no = platform.verify_quantization("q8_k");
  EXPECT_EQ(no.code(), StatusCode::not_supported);
  EXPECT_NE(no.message().find("platform cuda"), std::string::npos) << no.message();
  EXPECT_EQ(platform.supported_quantizations(), weight_type_names());
}

TEST(CudaPlatformConfig, KvCacheDtypes) {
  EXPECT_EQ(*cuda_kv_cache_dtype("auto"), DType::f16);
  EXPECT_EQ(*cuda_kv_cache_dtype("half"), DType::f16);
  EXPECT_EQ(*cuda_kv_cache_dtype("bf16"), DType::bf16);
  EXPECT_EQ(*cuda_kv_cache_dtype("float32"), DType::f32);
  EXPECT_EQ(cuda_kv_cache_dtype("int4").status().code(), StatusCode::invalid_argument);
}

TEST(CudaPlatformConfig, PluginsShowTheProbesReasonWithoutAGpu) {
  const std::string why = testing::no_gpu_reason();
  if (why.empty()) GTEST_SKIP() << "a GPU is present: the probe accepts";
  auto r = ::troupe::testing::run_troupe("plugins", "env -u TROUPE_DEVICE -u TROUPE_PLUGINS");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cuda: declined (probe returned no platform: " + why + ")"), std::string::npos) << r.out;
}

#ifdef TROUPE_CUDA_HAVE_NCCL
TEST(NcclIds, BadIdsAreRefusedBeforeAnyDeviceCall) {
  for (const std::string& bad : std::vector<std::string>{"", "cpu-shm:host:x", "nccl:", "nccl:zz", "nccl:" + std::string(256, 'g')}) {
    auto made = NcclCommunicator::create(bad, 2, 0, nullptr, std::chrono::seconds(1));
    ASSERT_FALSE(made.ok()) << bad;
    EXPECT_EQ(made.status().code(), StatusCode::invalid_argument) << bad;
    EXPECT_NE(made.status().message().find("NCCL communicator id"), std::string::npos) << made.status().message();
  }
  EXPECT_EQ(NcclCommunicator::create("nccl:00", 2, 2, nullptr, std::chrono::seconds(1)).status().code(),
            StatusCode::invalid_argument);
}

TEST(NcclIds, TimeoutComesFromTheEnvironment) {
  ::unsetenv("TROUPE_NCCL_TIMEOUT_S");
  EXPECT_EQ(nccl_timeout_from_env()->count(), 600'000);
  ::setenv("TROUPE_NCCL_TIMEOUT_S", "2.5", 1);
  EXPECT_EQ(nccl_timeout_from_env()->count(), 2'500);
  ::setenv("TROUPE_NCCL_TIMEOUT_S", "soon", 1);
  EXPECT_EQ(nccl_timeout_from_env().status().code(), StatusCode::invalid_argument);
  ::unsetenv("TROUPE_NCCL_TIMEOUT_S");
}

#endif

}  // namespace
}  // namespace troupe::cuda
