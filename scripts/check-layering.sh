#!/usr/bin/env bash
# The layering rules of docs/architecture.md, checked on the source tree
# (a ctest runs this): dependencies point down (apps -> actors -> plugin_host
# -> runtime -> SDK; platforms see only the SDK and kernels; kernels only the
# SDK's dtype header), only actors/ and apps/ include CAF, only
# platforms/cuda and kernels/cuda include CUDA/NCCL, only plugin_host/ calls
# dlopen, and the public engine header (actors/engine.hpp) reaches no CAF.
# runtime/ is grouped by where code runs: core/ (the engine process), request/
# (request shaping), rank/ (inside a rank), model_files/; conformance/ links the
# SDK only. Target links enforce the same: each library exports an include root
# holding only its own folder (cmake/TroupeIncludeRoots.cmake).
# The model runner (model_runner/, include/troupe/model_runner/) builds on the
# SDK alone, and the SDK's contract never reaches it.
# Prints every violation and exits 1 if there is any.
set -uo pipefail
cd "${1:-$(dirname "$0")/..}"
status=0

# forbid FOLDERS... -- PATTERN MESSAGE: no file under FOLDERS may match PATTERN.
forbid() {
  local dirs=() pattern message hits
  while [[ $1 != -- ]]; do dirs+=("$1"); shift; done
  shift
  pattern=$1 message=$2
  hits=$(grep -rnE --include='*.cpp' --include='*.hpp' --include='*.h' --include='*.cu' --include='*.cuh' \
         "$pattern" "${dirs[@]}" 2>/dev/null)
  if [[ -n $hits ]]; then
    echo "layering: $message"
    echo "$hits" | sed 's/^/  /'
    status=1
  fi
}

inc='^\s*#\s*include\s*[<"]'
forbid include sdk -- "$inc(runtime|actors|plugin_host|apps|platforms|kernels)/" "the SDK includes only itself"
forbid model_runner -- "$inc(runtime|actors|plugin_host|apps|platforms|kernels)/" "the model runner builds on the SDK only"
forbid sdk include/troupe/*.hpp -- "${inc}troupe/model_runner/" "the SDK's contract never includes the model runner (a library platforms may link)"
forbid kernels -- "$inc(runtime|actors|plugin_host|apps|platforms)/" "kernels know only raw pointers and the SDK's dtypes"
forbid platforms -- "$inc(runtime|actors|plugin_host|apps)/" "platforms build on the SDK and kernels only"
forbid runtime -- "$inc(actors|plugin_host|apps|platforms|kernels|model_runner|conformance)/" "runtime depends on the SDK only"
forbid conformance -- "$inc(runtime|actors|plugin_host|apps|platforms|kernels|model_runner)/" "conformance links the SDK only"
# Inside runtime/, grouped by where code runs: a rank knows nothing of the engine
# process, model files know neither, and the engine core speaks no client protocol.
forbid runtime/rank -- "${inc}runtime/core/" "code inside a rank (runtime/rank) never includes the engine process's (runtime/core)"
forbid runtime/model_files -- "${inc}runtime/(core|rank)/" "model files (runtime/model_files) include neither the engine core nor a rank's code"
forbid runtime/core runtime/rank -- "${inc}runtime/request/(openai|chat|admission)/" \
  "the engine core and the ranks know no OpenAI protocol, chat template or admission (runtime/request)"
forbid runtime/model_files -- "${inc}runtime/request/(openai|admission)/" \
  "model files know no OpenAI protocol or admission (they may name a chat template)"
forbid plugin_host -- "$inc(actors|apps|platforms|kernels)/" "plugin_host depends on runtime and the SDK only"
forbid actors -- "$inc(apps)/" "actors never include apps"
forbid include sdk kernels platforms runtime plugin_host -- "${inc}caf/" "only actors/ and apps/ include CAF"
forbid include sdk kernels/cpu platforms/cpu runtime plugin_host actors apps -- \
  "${inc}(cuda|cuda_runtime|cuda_runtime_api|cublas|cublasLt|cuda_fp16|cuda_bf16|nccl)[._a-zA-Z]*\.h" \
  "only platforms/cuda and kernels/cuda include CUDA or NCCL"
forbid include sdk kernels platforms runtime actors apps -- '\bdlopen\s*\(' "only plugin_host/ calls dlopen"

# The public engine header reaches no CAF header, not even through another one:
# what speaks CAF is in actors/engine_caf.hpp.
if deps=$("${CXX:-c++}" -std=c++20 -M -x c++ -I. -Iinclude actors/engine.hpp 2>&1); then
  if hits=$(tr ' ' '\n' <<<"$deps" | grep '/caf/'); then
    echo "layering: actors/engine.hpp must include no CAF (keep it behind actors/engine_caf.hpp); it reaches"
    echo "$hits" | head -5 | sed 's/^/  /'
    status=1
  fi
else
  echo "layering: cannot list what actors/engine.hpp includes:"
  echo "$deps" | head -5 | sed 's/^/  /'
  status=1
fi

if ((status == 0)); then echo "layering: ok"; fi
exit $status
