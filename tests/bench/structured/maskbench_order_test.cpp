// The harness's key reordering: objects' keys in `properties` order (through $ref,
// allOf, anyOf), undeclared keys after them as stored, arrays by items/prefixItems.
#include "bench/structured/maskbench_order.hpp"

#include <gtest/gtest.h>

namespace troupe::bench {
namespace {

using ojson = nlohmann::ordered_json;

TEST(MaskbenchOrder, KeysFollowTheSchema) {
  const ojson schema = ojson::parse(R"({
    "$defs": {"p": {"properties": {"x": {}, "y": {}}}},
    "properties": {"b": {"$ref": "#/$defs/p"}, "a": {"type": "array", "items": {"$ref": "#/$defs/p"}}},
    "allOf": [{"properties": {"c": {}}}]})");
  const ojson value = ojson::parse(R"({"z": 0, "c": 1, "a": [{"y": 1, "x": 2}], "b": {"q": 0, "y": 1, "x": 2}})");
  EXPECT_EQ(reorder_keys(value, schema, schema).dump(),
            R"({"b":{"x":2,"y":1,"q":0},"a":[{"x":2,"y":1}],"c":1,"z":0})");
  // Undeclared keys follow the patternProperties that match them.
  const ojson patterned = ojson::parse(R"({"patternProperties": {"^s": {"properties": {"x": {}, "y": {}}}, "^t": {}}})");
  EXPECT_EQ(reorder_keys(ojson::parse(R"({"s1": {"y": 1, "x": 2}, "t1": {"y": 1, "x": 2}})"), patterned, patterned).dump(),
            R"({"s1":{"x":2,"y":1},"t1":{"y":1,"x":2}})");
  // Not an object, or no schema for it: as it was.
  EXPECT_EQ(reorder_keys(ojson::parse("[1,{\"b\":1,\"a\":2}]"), ojson::object(), ojson::object()).dump(),
            R"([1,{"b":1,"a":2}])");
}

}  // namespace
}  // namespace troupe::bench
