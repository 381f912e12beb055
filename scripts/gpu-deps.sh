#!/usr/bin/env bash
# Packs the Debian development packages troupe builds against into
# .gpu-deps/deps.tar.xz, for a device machine that has CUDA, CMake, ninja and a
# compiler but none of our libraries and no network (the H200 runner's image).
# Run it here, where apt works, before the device call; the call carries
# ".gpu-deps" and scripts/gpu-check.sh unpacks it into a private prefix
# (CMAKE_PREFIX_PATH). Nothing is installed on this machine.
#   scripts/gpu-deps.sh            # writes .gpu-deps/deps.tar.xz (~7 MB)
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(
  libcaf-dev libcaf-core0.17 libcaf-io0.17 libcaf-openssl0.17
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  nlohmann-json3-dev libcli11-dev
  libasio-dev librestinio-dev libhttp-parser-dev libhttp-parser2.9
  # prometheus-cpp's CMake config asks for civetweb (with its binary), ZLIB and CURL
  prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libprometheus-cpp-push1.0
  libcivetweb-dev libcivetweb1 civetweb zlib1g-dev zlib1g libcurl4-openssl-dev libcurl4
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/root"
(cd "$work/debs" && apt-get download "${packages[@]}" >/dev/null 2>"$work/apt.err") || {
  cat "$work/apt.err" >&2
  echo "gpu-deps: apt-get download failed (run 'apt-get update' first?)" >&2
  exit 1
}
for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/root"; done
rm -rf "$work/root/usr/share/doc" "$work/root/usr/share/man" "$work/root/usr/share/lintian"
# Absolute links (libz.so -> /lib/...) would point into the device's own system: make them relative.
while IFS= read -r link; do
  target=$(readlink "$link")
  if [[ -e "$work/root$target" ]]; then
    ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$work/root$target")" "$link"
  else
    echo "gpu-deps: warning: $link -> $target is not in the packed set" >&2
  fi
done < <(find "$work/root" -type l -lname '/*')
mkdir -p .gpu-deps
tar -C "$work/root" -cJf .gpu-deps/deps.tar.xz .
echo "gpu-deps: wrote .gpu-deps/deps.tar.xz ($(du -h .gpu-deps/deps.tar.xz | cut -f1), ${#packages[@]} packages)"
