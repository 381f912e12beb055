// Refuses a model whose weights hold NaN or infinity, naming the first such
// tensor, before any rank multiplies with it (an all-NaN model otherwise
// serves `null` embeddings and garbage tokens with status 200).
#pragma once

#include <vector>

#include "troupe/model.hpp"
#include "troupe/status.hpp"

namespace troupe::engine {

/// Checks every value of float tensors (f32, f16, bf16) and every scale of
/// block-quantized ones (the f16 `d`/`dmin` fields; the integer codes are
/// finite by construction). data_loss naming `where`, the tensor and the
/// first bad element or block; OK when all are finite.
Status check_finite_weights(const std::vector<WeightTensor>& tensors, const std::string& where);

}  // namespace troupe::engine
