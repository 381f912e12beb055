#!/usr/bin/env bash
# Install exactly the Debian packages troupe needs; quiet and quick when they
# are already there.
set -euo pipefail
packages=(
  cmake ninja-build g++ ccache pkg-config
  libcaf-dev libssl-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libasio-dev librestinio-dev libhttp-parser-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
  clang libclang-rt-14-dev unzip
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# scripts/fetch-model.sh downloads the default model with pip.
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "install-deps: installing python3-pip"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
fi
