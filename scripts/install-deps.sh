#!/usr/bin/env bash
# Installs the Debian packages Cleave builds and tests with; only what is
# missing. Then creates .venv-hf/ in the checkout: a virtual environment with
# the system site packages (Debian's torch 1.13 and onnx) plus the pinned
# Hugging Face transformers of scripts/hf-requirements.txt, which the
# Hugging Face tests and models/export_hf.py run in. CLEAVE_NO_HF=1 skips it
# (those tests then report themselves unsupported, saying why).
#
# Idempotent and quiet when everything is present, so `make demo` and
# `make check` can call it every time. Runs as root (CI, fresh machines) or
# through sudo when available; the virtual environment belongs to the caller.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  cmake ninja-build g++ ccache pkg-config
  llvm-16-dev llvm-16-tools libmlir-16-dev mlir-16-tools
  libonnx-dev libonnx-testdata
  libprotobuf-dev protobuf-compiler
  libopenmpi-dev openmpi-bin
  libgtest-dev googletest
  libopenblas-dev
  python3-torch python3-onnx python3-numpy python3-protobuf
  python3-venv python3-yaml python3-requests
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
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
fi

[ "${CLEAVE_NO_HF:-0}" = 1 ] && exit 0
venv=$root/.venv-hf
pins=$root/scripts/hf-requirements.txt
# Up to date when it holds exactly these pins and its interpreter still runs
# (a Debian Python upgrade breaks a venv's links).
if cmp -s "$pins" "$venv/cleave-hf-requirements.txt" && "$venv/bin/python" -c '' 2>/dev/null; then
  exit 0
fi
echo "install-deps: creating $venv (transformers for the Hugging Face tests)"
start=$(date +%s)
rm -rf "$venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
# --no-deps: every package is pinned in the file, and none of them may bring
# PyPI's torch, which would shadow Debian's.
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-input \
  --no-deps -r "$pins"
# The venv must use Debian's torch and onnx, and import what it installed.
"$venv/bin/python" - <<'PY'
import sys
import onnx, torch, transformers, tokenizers, safetensors, huggingface_hub  # noqa
for mod in (torch, onnx):
    if not mod.__file__.startswith("/usr/lib/python3/dist-packages/"):
        sys.exit("install-deps: .venv-hf imports %s from %s, not Debian's"
                 % (mod.__name__, mod.__file__))
PY
cp "$pins" "$venv/cleave-hf-requirements.txt"
echo "install-deps: .venv-hf ready in $(( $(date +%s) - start ))s"
