#!/usr/bin/env bash
# Installs the Debian packages Cleave builds and tests with; only what is missing.
#
# Idempotent and quiet when everything is present, so `make demo` and
# `make check` can call it every time. Runs as root (CI, fresh machines) or
# through sudo when available.
set -euo pipefail

packages=(
  cmake ninja-build g++ ccache pkg-config
  llvm-16-dev llvm-16-tools libmlir-16-dev mlir-16-tools
  libonnx-dev libonnx-testdata
  libprotobuf-dev protobuf-compiler
  libopenmpi-dev openmpi-bin
  libgtest-dev googletest
  libopenblas-dev
  python3-torch python3-onnx python3-numpy python3-protobuf
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done

[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
