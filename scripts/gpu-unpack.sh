#!/usr/bin/env bash
# Runs on the GPU machine from the repo root: unpacks the binaries that scripts/gpu-bundle.sh
# packed into .gpu/bin.tgz (a no-op when .gpu/bin is already newer than the archive).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .gpu/bin.tgz ] && { [ ! -d .gpu/bin ] || [ .gpu/bin.tgz -nt .gpu/bin ]; }; then
  rm -rf .gpu/bin
  tar -C .gpu -xzf .gpu/bin.tgz
  touch .gpu/bin
fi
