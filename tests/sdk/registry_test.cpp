// CustomOp selection (out-of-tree override > active platform's > native, chosen
// once at construction) and ModelRegistry semantics.
#include <gtest/gtest.h>

#include <algorithm>

#include "troupe/custom_op.hpp"
#include "troupe/model_registry.hpp"

namespace {

using UnaryFn = float (*)(float);
float native_double(float x) { return 2 * x; }
float cpu_double(float x) { return 2 * x + 100; }
float oot_double(float x) { return 2 * x + 1000; }

TEST(CustomOp, NativeWhenNothingOverrides) {
  troupe::CustomOp<UnaryFn> op("test.nothing_overrides", &native_double);
  EXPECT_EQ(op.chosen(), "native");
  EXPECT_EQ(op(3.0f), 6.0f);
}

TEST(CustomOp, ActivePlatformsImplementationBeatsNative) {
  troupe::register_custom_op_for_platform("test.platform_op", "cpu", &cpu_double);
  troupe::register_custom_op_for_platform("test.platform_op", "other_device", &oot_double);
  troupe::custom_op_registry::set_active_device_type("cpu");
  troupe::CustomOp<UnaryFn> op("test.platform_op", &native_double);
  EXPECT_EQ(op.chosen(), "platform");
  EXPECT_EQ(op(3.0f), 106.0f);
  troupe::custom_op_registry::set_active_device_type("gpu_without_override");
  troupe::CustomOp<UnaryFn> elsewhere("test.platform_op", &native_double);
  EXPECT_EQ(elsewhere.chosen(), "native");
  troupe::custom_op_registry::set_active_device_type("");
}

TEST(CustomOp, OutOfTreeOverrideWinsAndTheChoiceIsMadeOnce) {
  troupe::custom_op_registry::set_active_device_type("cpu");
  troupe::register_custom_op_for_platform("test.oot_op", "cpu", &cpu_double);
  troupe::CustomOp<UnaryFn> before("test.oot_op", &native_double);
  troupe::register_custom_op_oot("test.oot_op", &oot_double);
  troupe::CustomOp<UnaryFn> after("test.oot_op", &native_double);
  EXPECT_EQ(before.chosen(), "platform");  // built before the override: keeps its choice
  EXPECT_EQ(before(1.0f), 102.0f);
  EXPECT_EQ(after.chosen(), "oot");
  EXPECT_EQ(after(1.0f), 1002.0f);
  troupe::custom_op_registry::set_active_device_type("");
}

troupe::Result<std::unique_ptr<troupe::Model>> factory_a(const troupe::ModelSource&, const troupe::ModelContext&) {
  return troupe::not_supported("factory a");
}
troupe::Result<std::unique_ptr<troupe::Model>> factory_b(const troupe::ModelSource&, const troupe::ModelContext&) {
  return troupe::not_supported("factory b");
}

class EmptySource final : public troupe::ModelSource {
 public:
  std::string architecture() const override { return "TestArch"; }
  const troupe::WeightTensor* tensor(std::string_view) const override { return nullptr; }
  std::optional<int64_t> get_int(std::string_view) const override { return std::nullopt; }
  std::optional<double> get_float(std::string_view) const override { return std::nullopt; }
  std::optional<std::string> get_string(std::string_view) const override { return std::nullopt; }
};

TEST(ModelRegistry, RegisterAgainIsANoOpAndOverwriteReplaces) {
  namespace reg = troupe::model_registry;
  EmptySource src;
  reg::register_model("TestArch", &factory_a);
  reg::register_model("TestArch", &factory_a);  // idempotent
  EXPECT_TRUE(reg::is_registered("TestArch"));
  EXPECT_EQ(reg::create("TestArch", src, {}).status().message(), "factory a");
  reg::register_model("TestArch", &factory_b);  // logs a warning, then wins
  EXPECT_EQ(reg::create("TestArch", src, {}).status().message(), "factory b");
  auto archs = reg::supported_architectures();
  EXPECT_NE(std::find(archs.begin(), archs.end(), "TestArch"), archs.end());
}

TEST(ModelRegistry, UnknownArchitectureNamesTheRegisteredOnes) {
  EmptySource src;
  troupe::model_registry::register_model("TestArch", &factory_a);
  auto r = troupe::model_registry::create("NoSuchArch", src, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), troupe::StatusCode::not_found);
  EXPECT_NE(r.status().message().find("NoSuchArch"), std::string::npos);
  EXPECT_NE(r.status().message().find("TestArch"), std::string::npos);
}

}  // namespace
