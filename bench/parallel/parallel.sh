#!/usr/bin/env bash
# Throughput and communication per step of one model split over ranks (local
# node processes), all configurations in one run on this machine:
#   bench/parallel/parallel.sh [MODEL] [CONFIGS]
# MODEL defaults to the default model (SmolLM2-135M: 9 heads, 3 kv heads, so
# TP 1 and 3); CONFIGS is a list of TPxPP, e.g. "1x1 3x1 1x2" (the default).
# A ":tcp" suffix (e.g. "3x1:tcp") runs the ranks' communicator over TCP
# (TROUPE_CPU_COMM=tcp, what ranks on several hosts use) instead of shared
# memory, on this one host, so the two transports compare per step.
# For stories260K (8 heads):
#   bench/parallel/parallel.sh tests/data/stories260K.gguf "1x1 2x1 2x1:tcp 4x1 1x2 1x2:tcp 2x2"
# Each run: 16 distinct prompts of ~40 tokens, 64 greedy tokens each, all at
# once, through `troupe generate --stats`. Nothing here expects a speed-up on
# a 2-core machine: the point is the overhead per step.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-$(scripts/fetch-model.sh)}
configs=${2:-"1x1 3x1 3x1:tcp 1x2 1x2:tcp"}
troupe=${TROUPE:-build/bin/troupe}
prompts=$(mktemp)
trap 'rm -f "$prompts"' EXIT
python3 - "$prompts" <<'PY'
import random, sys
random.seed(7)
words = "time girl dog park sun happy little big tree ball play friend mom house cat bird".split()
with open(sys.argv[1], "w") as f:
    for _ in range(16):
        f.write(" ".join(random.choice(words) for _ in range(32)) + "\n")
PY
printf "%-12s %12s %10s %18s %16s %14s\n" "TPxPP" "gen tok/s" "steps" "comm MB/step" "comm ms/step" "comm share"
for c in $configs; do
  shape=${c%:*}
  transport=auto
  [[ $c == *:* ]] && transport=${c#*:}
  tp=${shape%x*}
  pp=${shape#*x}
  out=$(TROUPE_CPU_COMM=$transport "$troupe" generate "$model" --prompts-file "$prompts" -n 64 --stats \
        --tensor-parallel-size "$tp" --pipeline-parallel-size "$pp" 2>/dev/null | tail -1)
  python3 - "$c" "$out" <<'PY'
import json, sys
c, d = sys.argv[1], json.loads(sys.argv[2])
steps = max(d["steps"], 1)
share = d["communicator_seconds"] / d["wall_seconds"] if d["wall_seconds"] else 0
print(f"{c:<12} {d['generation_throughput']:12.1f} {steps:10d} {d['communicator_bytes'] / steps / 1e6:18.2f} "
      f"{1000 * d['communicator_seconds'] / steps:16.2f} {100 * share:13.1f}%")
PY
done
