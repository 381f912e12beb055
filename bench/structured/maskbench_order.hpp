// MaskBench's instances with their object keys in the order the engine writes
// them: the schema's `properties` order (followed through local $ref, allOf,
// anyOf and oneOf, in the order written), then the keys the schema does not
// declare, as stored, each followed through the patternProperties it matches. Used for the second table of troupe_bench_maskbench,
// labelled "keys in the schema's order". A rough guide, not a validator: where
// branches declare a key in different orders, the first one written wins.
#pragma once

#include <nlohmann/json.hpp>

namespace troupe::bench {

/// `value` with every object's keys reordered as `schema` (within document `root`) declares them.
nlohmann::ordered_json reorder_keys(const nlohmann::ordered_json& value, const nlohmann::ordered_json& schema,
                                    const nlohmann::ordered_json& root);

}  // namespace troupe::bench
