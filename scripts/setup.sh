#!/usr/bin/env bash
# Installs, with apt-get, whatever cgram needs that this Debian machine lacks.
# Idempotent: a second run installs nothing and returns quickly.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  antlr4 libantlr4-runtime-dev
  llvm-19-dev lld-19
  libfmt-dev librange-v3-dev catch2
  nlohmann-json3-dev libcli11-dev libsimdjson-dev libicu-dev
  python3 python3-jsonschema
  python3-dev pybind11-dev python3-numpy python3-torch
  zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev libcurl4-openssl-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
