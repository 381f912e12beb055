#!/usr/bin/env bash
# Embeddings per second, troupe against sentence-transformers, same machine,
# same run, same sentences, same thread count, 1 / 32 / 256 sentences per
# request (batch). sentence-transformers is installed in a throwaway
# virtualenv (BENCH_VENV, default /tmp/troupe-st-venv) for this script only:
# the product never depends on it.
#   bench/embeddings/compare.sh [MODEL_DIR] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-$(scripts/fetch-model.sh all-MiniLM-L6-v2)}
threads=${2:-2}
venv=${BENCH_VENV:-/tmp/troupe-st-venv}
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import sentence_transformers" 2>/dev/null; then
  echo "compare.sh: installing sentence-transformers into $venv (once; large: torch)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check sentence-transformers==3.4.1 >&2
fi
sentences=$(mktemp)
trap 'rm -f "$sentences"' EXIT
python3 - "$sentences" <<'PY'
import random, sys
random.seed(3)
words = ("the a quick brown fox dog jumps over lazy river city market bread oven music night "
         "children school garden light storm mountain coffee morning train book").split()
with open(sys.argv[1], "w") as f:
    for _ in range(2048):
        f.write(" ".join(random.choice(words) for _ in range(random.randint(6, 20))).capitalize() + ".\n")
PY
troupe_out=$(build/bin/troupe_bench_embeddings "$model" "$sentences" --threads "$threads" --seconds 5 2>/dev/null)
st_out=$("$venv/bin/python" - "$model" "$sentences" "$threads" <<'PY'
import json, sys, time
import torch
from sentence_transformers import SentenceTransformer
model_dir, path, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(threads)
sentences = [l.strip() for l in open(path) if l.strip()]
model = SentenceTransformer(model_dir, device="cpu")
i = 0
for b in (1, 32, 256):
    model.encode(sentences[:b], batch_size=b)  # warm-up
    n, t0 = 0, time.perf_counter()
    while True:
        batch = [sentences[(i + k) % len(sentences)] for k in range(b)]
        i += b
        model.encode(batch, batch_size=b, normalize_embeddings=True)
        n += b
        wall = time.perf_counter() - t0
        if wall >= 5:
            break
    print(json.dumps({"engine": "sentence-transformers", "batch": b, "embeddings": n, "seconds": wall,
                      "per_second": n / wall}))
PY
)
python3 - "$troupe_out" "$st_out" "$threads" <<'PY'
import json, sys
t = {j["batch"]: j for j in map(json.loads, sys.argv[1].splitlines())}
s = {j["batch"]: j for j in map(json.loads, sys.argv[2].splitlines())}
print(f"all-MiniLM-L6-v2, {sys.argv[3]} threads, embeddings per second (same sentences, same run)")
print(f"{'batch':>6} {'troupe':>10} {'sentence-transformers':>22} {'ratio':>7}")
for b in sorted(t):
    print(f"{b:>6} {t[b]['per_second']:>10.1f} {s[b]['per_second']:>22.1f} {t[b]['per_second'] / s[b]['per_second']:>6.2f}x")
PY
