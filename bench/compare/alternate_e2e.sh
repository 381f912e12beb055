#!/usr/bin/env bash
# Prefill and decode of one GGUF file by two troupe builds (before/after a kernel
# change) and llama.cpp, alternated round by round so a noisy neighbour hits all
# three alike; a narrower, faster companion of compare.sh for kernel work.
#
#   bench/compare/alternate_e2e.sh MODEL.gguf BUILD_BEFORE BUILD_AFTER [--rounds N] [--threads N]
#                                  [--prompt-tokens N] [--decode-tokens N]
#
# BUILD_* are troupe build directories with bin/troupe_bench_e2e built. llama.cpp
# comes from bench/compare/build-llama-cpp.sh (llama-bench, default repacking).
# Each round runs: before, after, llama.cpp (prefill -p N and decode -n N in one
# llama-bench call); each line gives the 1-minute load average before the run.
# Output: one line per run, then the median of each engine and the ratios.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
[[ $# -ge 3 ]] || { sed -n '2,13p' "$0" | cut -c3-; exit 2; }
model=$1 before=$2 after=$3
shift 3
rounds=3 threads=2 prompt=512 gen=64
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --prompt-tokens) prompt=$2; shift 2 ;;
    --decode-tokens) gen=$2; shift 2 ;;
    *) echo "alternate_e2e.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -f $model ]] || { echo "alternate_e2e.sh: no model at $model" >&2; exit 1; }
for b in "$before" "$after"; do
  [[ -x $b/bin/troupe_bench_e2e ]] || { echo "alternate_e2e.sh: $b/bin/troupe_bench_e2e missing" >&2; exit 1; }
done
llama_bin=$("$repo/bench/compare/build-llama-cpp.sh")
work=$(mktemp -d "${TMPDIR:-/tmp}/alternate-e2e.XXXXXX")
trap 'rm -rf "$work"' EXIT

load() { cut -d' ' -f1 /proc/loadavg; }
troupe_run() {  # BUILD NAME
  "$1/bin/troupe_bench_e2e" "$model" --threads "$threads" --prompt-tokens "$prompt" --decode-tokens "$gen" \
    --decode-prompt 1 --repeats 2 --warmup 1 --json "$work/$2.json" >"$work/$2.out" 2>"$work/$2.err"
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print("%.1f %.1f" % (max(d["prefill_tps"]), max(d["decode_tps"])))' \
    "$work/$2.json"
}
llama_run() {  # NAME
  "$llama_bin/llama-bench" -m "$model" -t "$threads" -p "$prompt" -n "$gen" -r 2 -o json \
    >"$work/$1.json" 2>"$work/$1.err"
  python3 - "$work/$1.json" <<'EOF'
import json, sys
pp = tg = float("nan")
for r in json.load(open(sys.argv[1])):
    if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0: pp = r["avg_ts"]
    if r.get("n_gen", 0) > 0 and r.get("n_prompt", 0) == 0: tg = r["avg_ts"]
print(f"{pp:.1f} {tg:.1f}")
EOF
}
echo "model $model, $threads threads, prefill $prompt, decode $gen; tok/s as 'prefill decode'"
for r in $(seq "$rounds"); do
  l=$(load); v=$(troupe_run "$before" before-$r); echo "round $r before  (load $l): $v"; echo "$v" >>"$work/before.all"
  l=$(load); v=$(troupe_run "$after" after-$r); echo "round $r after   (load $l): $v"; echo "$v" >>"$work/after.all"
  l=$(load); v=$(llama_run llama-$r); echo "round $r llama   (load $l): $v"; echo "$v" >>"$work/llama.all"
done
python3 - "$work" <<'EOF'
import statistics, sys
w = sys.argv[1]
med = {}
for e in ("before", "after", "llama"):
    rows = [list(map(float, l.split())) for l in open(f"{w}/{e}.all")]
    med[e] = [statistics.median(r[i] for r in rows) for i in (0, 1)]
    print(f"median {e:6s}: prefill {med[e][0]:.1f}  decode {med[e][1]:.1f}")
for e in ("before", "after"):
    print(f"{e} / llama.cpp: prefill {med[e][0] / med['llama'][0]:.2f}x  decode {med[e][1] / med['llama'][1]:.2f}x")
print(f"after / before: prefill {med['after'][0] / med['before'][0]:.2f}x  decode {med['after'][1] / med['before'][1]:.2f}x")
EOF
