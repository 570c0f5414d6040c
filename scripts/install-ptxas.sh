#!/usr/bin/env bash
# Installs ptxas from the nvidia-cuda-nvcc wheel (PyPI) into .tools/cuda and prints its path.
# The build machines have no CUDA toolkit; this wheel is the smallest source of a real ptxas.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.tools/cuda"
find_ptxas() { find "$dest" -type f -name ptxas -path '*bin*' 2>/dev/null | head -n 1; }
existing=$(find_ptxas || true)
if [ -n "$existing" ] && "$existing" --version >/dev/null 2>&1; then
  echo "$existing"
  exit 0
fi
mkdir -p "$dest"
python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" 'nvidia-cuda-nvcc>=13,<14' >&2
ptxas=$(find_ptxas)
if [ -z "$ptxas" ]; then
  echo "install-ptxas: the wheel did not contain ptxas" >&2
  exit 1
fi
chmod +x "$ptxas"
"$ptxas" --version >&2
echo "$ptxas"
