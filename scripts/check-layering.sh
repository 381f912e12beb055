#!/usr/bin/env bash
# The layering rules of docs/architecture.md, checked on the source tree
# (a ctest runs this): dependencies point down (apps -> actors -> plugin_host
# -> runtime -> net -> SDK; platforms see only the SDK, net, the model runner
# and kernels; kernels only the SDK's dtype header); only actors/ and apps/
# include CAF, only platforms/cuda and kernels/cuda include CUDA/NCCL, only
# plugin_host/ calls dlopen, and the public engine header (actors/engine.hpp)
# reaches no CAF. net/ (network trust: crypto, TLS, sockets, the one handshake,
# the link guard) and the model runner (model_runner/,
# include/troupe/model_runner/) build on the SDK alone, and the SDK's contract
# never reaches the model runner. Only net/ calls OpenSSL (and `troupe certs`,
# which makes certificates), so TLS and the handshake have one implementation. runtime/ is grouped by
# dependency (config, text, protocol, model_files, rank, core, frontend, bottom
# first; see below); conformance/ links the SDK only. Target links enforce the
# same: each library exports an include root holding only its own folder
# (cmake/TroupeIncludeRoots.cmake).
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
forbid net -- "$inc(runtime|actors|plugin_host|apps|platforms|kernels|model_runner|conformance)/" "net/ (network trust) builds on the SDK only"
forbid model_runner -- "$inc(runtime|actors|plugin_host|apps|platforms|kernels)/" "the model runner builds on the SDK only"
forbid sdk include/troupe/*.hpp -- "${inc}troupe/model_runner/" "the SDK's contract never includes the model runner (a library platforms may link)"
forbid kernels -- "$inc(runtime|actors|plugin_host|apps|platforms)/" "kernels know only raw pointers and the SDK's dtypes"
forbid platforms -- "$inc(runtime|actors|plugin_host|apps)/" "platforms build on the SDK, net/, the model runner and kernels only"
forbid runtime -- "$inc(actors|plugin_host|apps|platforms|kernels|model_runner|conformance)/" "runtime depends on the SDK only"
forbid conformance -- "$inc(runtime|actors|plugin_host|apps|platforms|kernels|model_runner)/" "conformance links the SDK only"
# Inside runtime/, groups by dependency, bottom first: each group includes only
# groups before it in this list (and itself), so the include graph between groups
# has no cycle. config: the engine's settings; text: tokenizers, chat templates,
# Jinja, JSON; protocol: SamplingParams, the engine's requests and outputs, a
# step's input and output, RankCommand; model_files; rank: what runs inside a
# rank; core: the engine process; frontend: the OpenAI protocol and admission.
runtime_groups=(config text protocol model_files rank core frontend)
for ((i = 0; i < ${#runtime_groups[@]} - 1; i++)); do
  above=$(IFS='|'; echo "${runtime_groups[*]:i+1}")
  forbid "runtime/${runtime_groups[i]}" -- "${inc}runtime/($above)/" \
    "runtime/${runtime_groups[i]} includes only the groups below it (${runtime_groups[*]:0:i+1}), never $above"
done
# Every folder of runtime/ is one of the groups: a new one must take its place in the order.
for dir in runtime/*/; do
  dir=${dir#runtime/}; dir=${dir%/}
  if [[ " ${runtime_groups[*]} " != *" $dir "* ]]; then
    echo "layering: runtime/$dir is in no group of the order (${runtime_groups[*]}); add it to runtime_groups"
    status=1
  fi
done
forbid plugin_host -- "$inc(actors|apps|platforms|kernels)/" "plugin_host depends on runtime and the SDK only"
forbid actors -- "$inc(apps)/" "actors never include apps"
forbid include sdk kernels net platforms runtime plugin_host -- "${inc}caf/" "only actors/ and apps/ include CAF"
forbid include sdk kernels/cpu net platforms/cpu runtime plugin_host actors apps -- \
  "${inc}(cuda|cuda_runtime|cuda_runtime_api|cublas|cublasLt|cuda_fp16|cuda_bf16|nccl)[._a-zA-Z]*\.h" \
  "only platforms/cuda and kernels/cuda include CUDA or NCCL"
forbid include sdk kernels net platforms runtime actors apps -- '\bdlopen\s*\(' "only plugin_host/ calls dlopen"
if hits=$(grep -rnE --include='*.cpp' --include='*.hpp' --include='*.h' \
           "${inc}(zmq|zmq_addon|msgpack)(\.h|\.hpp|/)" include sdk kernels net platforms runtime plugin_host \
           actors apps conformance model_runner 2>/dev/null | grep -v '^runtime/core/kv_events/'); then
  echo "layering: only runtime/core/kv_events includes ZMQ or msgpack (vLLM's KV events for external routers)"
  echo "$hits" | sed 's/^/  /'
  status=1
fi
forbid include sdk kernels platforms runtime plugin_host actors conformance model_runner -- "${inc}openssl/" \
  "only net/ includes OpenSSL (one TLS, one handshake; apps/cmd_certs makes certificates)"

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
