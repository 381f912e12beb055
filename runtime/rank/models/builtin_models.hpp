// The model architectures troupe ships, registered in ModelRegistry.
#pragma once

namespace troupe::runtime {

/// Register the built-in architectures ("llama", "LlamaForCausalLM"). Idempotent, thread-safe.
void register_builtin_models();

}  // namespace troupe::runtime
