#!/usr/bin/env bash
# One build against another, alternated in one run on one machine:
#   bench/engine/ab.sh OLD_BUILD NEW_BUILD [rounds] [-- troupe_bench_engine args]
# Runs OLD_BUILD/bin/troupe_bench_engine and NEW_BUILD/bin/troupe_bench_engine in turn
# (old, new, old, new, ...) with the same arguments (default: the default model,
# concurrency 1 and 32) and prints each run's "decode tok/s" line per level, then
# the new/old ratio of the medians. A refactor's "no regression" is this ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
old=${1:?old build dir}; new=${2:?new build dir}; rounds=${3:-3}
shift $(( $# >= 3 ? 3 : $# ))
[[ ${1:-} == -- ]] && shift
args=("$@")
if ((${#args[@]} == 0)); then
  args=("$(scripts/fetch-model.sh)" --concurrency 1,32 --prompt-len 128 --gen-len 64)
fi
out=$(mktemp -d)
for ((i = 1; i <= rounds; i++)); do
  for side in old new; do
    dir=$old; [[ $side == new ]] && dir=$new
    "$dir/bin/troupe_bench_engine" "${args[@]}" --json "$out/$side.$i.json" >"$out/$side.$i.log" 2>&1 ||
      { cat "$out/$side.$i.log" >&2; exit 1; }
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
runs = {side: [json.load(open(f"{out}/{side}.{i}.json")) for i in range(1, rounds + 1)] for side in ("old", "new")}
def levels(run):
    return {lv["concurrency"]: lv["decode_tps"] for lv in run["levels"]}
print(f"{'concurrency':>11} {'old decode tok/s (each run)':>34} {'new decode tok/s (each run)':>34} {'new/old (medians)':>18}")
for c in sorted(levels(runs["old"][0])):
    o = [levels(r)[c] for r in runs["old"]]
    n = [levels(r)[c] for r in runs["new"]]
    fmt = lambda xs: " ".join(f"{x:.1f}" for x in xs)
    print(f"{c:>11} {fmt(o):>34} {fmt(n):>34} {statistics.median(n) / statistics.median(o):>18.3f}")
PY
