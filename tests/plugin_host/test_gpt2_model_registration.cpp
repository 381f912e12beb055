// The gpt2_model example's registration, compiled into this test and run twice: the
// second run must change nothing (plugins re-register per process and embedders may load
// them more than once). Its model runs in tests/golden/gpt2_plugin_test.
#include <gtest/gtest.h>

#include <algorithm>

#include "troupe/model_registry.hpp"
#include "troupe/plugin.hpp"

extern "C" const troupe::PluginDescriptor* troupe_plugin_entry();

namespace {
class NoSource final : public troupe::ModelSource {
 public:
  std::string architecture() const override { return "gpt2"; }
  const troupe::WeightTensor* tensor(std::string_view) const override { return nullptr; }
  std::optional<int64_t> get_int(std::string_view) const override { return std::nullopt; }
  std::optional<double> get_float(std::string_view) const override { return std::nullopt; }
  std::optional<std::string> get_string(std::string_view) const override { return std::nullopt; }
};
}  // namespace

TEST(Gpt2ModelExample, RegistrationIsIdempotent) {
  const troupe::PluginDescriptor* d = troupe_plugin_entry();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->abi_version, TROUPE_ABI_VERSION);
  EXPECT_STREQ(d->group, troupe::kGroupGeneral);
  ASSERT_NE(d->register_fn, nullptr);

  ASSERT_TRUE(d->register_fn().ok());
  auto first = troupe::model_registry::supported_architectures();
  ASSERT_TRUE(d->register_fn().ok());
  auto second = troupe::model_registry::supported_architectures();
  EXPECT_EQ(first, second);
  EXPECT_EQ(std::count(second.begin(), second.end(), "gpt2"), 1);

  // Without a platform's services the factory refuses before reading anything.
  NoSource source;
  auto model = troupe::model_registry::create("gpt2", source, troupe::ModelContext{});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), troupe::StatusCode::invalid_argument);
  EXPECT_EQ(model.status().message(), "the gpt2 model needs the platform's ops, attention backend and allocator");
}
